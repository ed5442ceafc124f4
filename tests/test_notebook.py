"""notebooks/analysis.ipynb runs top to bottom on a small results root and draws its figures."""

from __future__ import annotations

import json

import nbformat
from nbclient import NotebookClient

import shaberi as shaberi_api

from .conftest import REPO, query, shaberi


def test_the_analysis_notebook_runs_top_to_bottom(server, tmp_path, data_dir, monkeypatch):
    results = tmp_path / "results"
    proc = shaberi("run", "--model", "m", "--base-url", server.base_url, "--tag", "nb", "--runs", "2", "--limit", "3",
                   "--judge", "judge-a", "--judge", "judge-b", "--results-dir", str(results), "--data-dir",
                   str(data_dir))
    assert proc.returncode == 0, proc.stderr
    monkeypatch.setenv("SHABERI_RESULTS_DIR", str(results))
    nb = nbformat.read(REPO / "notebooks" / "analysis.ipynb", as_version=4)
    # a last cell hands what the notebook computed back to the test
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json; print('COMPUTED ' + json.dumps({'summary': summary.to_dicts(), 'agreement': "
        "agreement.to_dicts(), 'cost': cost.to_dicts()}, default=str))"))
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                   ).execute()  # the kernel inherits SHABERI_RESULTS_DIR
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # intervals, judge scatter, distributions (and tokens)
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "judge-a" in text and "judge-b" in text and "spearman" in text
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    computed = json.loads(printed.split("COMPUTED ", 1)[1])
    # the notebook's figures are the views' numbers: the family means and intervals of multi_run_stats ...
    expected = shaberi_api.open(results).multi_run_stats(judge="*").sort("position")
    assert [(r["benchmark"], r["runs"], r["mean"]) for r in computed["summary"]] == [
        (r["title"], r["runs"], r["mean"]) for r in expected.to_dicts()]
    # ... the judges compared on the same answers (every answer scored by both) ...
    assert [(a["judge_a"], a["judge_b"]) for a in computed["agreement"]] == [("judge-a", "judge-b")]
    scored = query(results, "SELECT count(*) FROM scores WHERE judge = 'judge-a' AND score IS NOT NULL")[0][0]
    assert computed["agreement"][0]["answers"] == scored > 0
    # ... and the tokens of every stage that made calls
    assert {c["stage"] for c in computed["cost"]} == {"generation", "judging"}
    requests = query(results, "SELECT sum(requests) FROM token_usage")[0][0]
    assert sum(int(c["requests"]) for c in computed["cost"]) == requests
