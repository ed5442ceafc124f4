"""notebooks/analysis.ipynb runs top to bottom on a small results root and draws its figures."""

from __future__ import annotations

import nbformat
from nbclient import NotebookClient

from .conftest import REPO, shaberi


def test_the_analysis_notebook_runs_top_to_bottom(server, tmp_path, data_dir, monkeypatch):
    results = tmp_path / "results"
    proc = shaberi("run", "--model", "m", "--base-url", server.base_url, "--tag", "nb", "--runs", "2", "--limit", "3",
                   "--judge", "judge-a", "--judge", "judge-b", "--results-dir", str(results), "--data-dir",
                   str(data_dir))
    assert proc.returncode == 0, proc.stderr
    monkeypatch.setenv("SHABERI_RESULTS_DIR", str(results))
    nb = nbformat.read(REPO / "notebooks" / "analysis.ipynb", as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                   ).execute()  # the kernel inherits SHABERI_RESULTS_DIR
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # intervals, judge scatter, distributions (and tokens)
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "judge-a" in text and "judge-b" in text and "spearman" in text
