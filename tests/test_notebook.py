"""notebooks/analysis.ipynb runs top to bottom on a small results root, and its frames are the views' numbers.

One root, made with the real command line against the loopback server: a family of two runs (tag ``nb``,
model ``m``) judged by two judges who disagree on Rakuda, and a single run (tag ``solo``, model ``m2``)
judged by one. The notebook runs twice: on everything (several judges, a family beside a single run), then
with ``SHABERI_TAG=solo`` (one run, one judge, no family), where only that run's rows may appear.
"""

from __future__ import annotations

import json
from pathlib import Path

import krippendorff
import nbformat
import pytest
from nbclient import NotebookClient
from scipy import stats

import shaberi as shaberi_api

from .conftest import REPO, query, shaberi

PRICED = "gpt-4.1-mini"  # a judge data/pricing.toml prices: the cost total is not 0
# a last cell hands what the notebook computed back to the test
EXPORT = """
import json
ax = fig_summary.axes[0]
print("COMPUTED " + json.dumps({
    "runs": runs["tag"].to_list(), "summary": summary.to_dicts(), "x_positions": x_positions,
    "ticks": [float(t) for t in ax.get_xticks()], "labels": [t.get_text() for t in ax.get_xticklabels()],
    "plotted_x": [float(x) for line in ax.lines for x in line.get_xdata()],
    "agreement": agreement.to_dicts(), "alpha": agree.alpha, "bias": bias.to_dicts(),
    "categories": categories.to_dicts(), "cost": cost.to_dicts(), "cost_total": cost_total,
    "comparison": None if comparison is None else comparison.to_dicts()}, default=str))
"""
SCORES = "SELECT {cols} FROM scores s JOIN runs r USING (run_id) WHERE s.strategy = '' AND r.tag LIKE '{tag}'"


def one_per_category(src: Path, dst: Path, key: str, marks: list[str] | None = None) -> None:
    """The first row of each category of a real dataset file (so that a few questions span several
    categories), each question text prefixed by a mark when given."""
    rows, seen = [], set()
    for line in src.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row[key] not in seen:
            seen.add(row[key])
            rows.append(row)
    for row, mark in zip(rows, marks or [], strict=False):
        row["text"] = f"{mark} {row['text']}"
    dst.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def execute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tag: str | None, compare: tuple[str, str] | None = None
            ) -> tuple[list, dict]:
    monkeypatch.delenv("SHABERI_MODEL", raising=False)
    for name, side in zip(("SHABERI_COMPARE_A", "SHABERI_COMPARE_B"), compare or (None, None), strict=True):
        if side is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, side)
    if tag is None:
        monkeypatch.delenv("SHABERI_TAG", raising=False)
    else:
        monkeypatch.setenv("SHABERI_TAG", tag)
    nb = nbformat.read(REPO / "notebooks" / "analysis.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(EXPORT))
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                   ).execute()  # the kernel inherits SHABERI_RESULTS_DIR and SHABERI_TAG
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]  # no warnings
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "no CJK font installed" not in printed  # the test set-up installs one: Japanese labels are drawn
    return outputs, json.loads(printed.split("COMPUTED ", 1)[1])


def images(outputs: list) -> int:
    return len([o for o in outputs if "image/png" in o.get("data", {})])


def test_the_analysis_notebook_runs_top_to_bottom(server, tmp_path, data_dir, monkeypatch):
    data = tmp_path / "data"
    (data / "ja").mkdir(parents=True)
    for path in (data_dir / "ja").iterdir():
        if path.name not in ("tengu_bench.jsonl", "ja_mt_bench_1shot.jsonl", "rakuda.jsonl"):
            (data / "ja" / path.name).symlink_to(path)
    one_per_category(data_dir / "ja" / "tengu_bench.jsonl", data / "ja" / "tengu_bench.jsonl", "Category")
    one_per_category(data_dir / "ja" / "ja_mt_bench_1shot.jsonl", data / "ja" / "ja_mt_bench_1shot.jsonl", "category")
    one_per_category(data_dir / "ja" / "rakuda.jsonl", data / "ja" / "rakuda.jsonl", "category",
                     [f"<<judge@{PRICED}: FINAL SCORE: {s}>>" for s in (9, 2, 7, 4)])  # the other judge: a hash
    results = tmp_path / "results"
    common = ["--base-url", server.base_url, "--limit", "3", "--results-dir", str(results), "--data-dir", str(data)]
    proc = shaberi("run", "--model", "m", "--tag", "nb", "--runs", "2", "--judge", "judge-a", "--judge", PRICED,
                   *common)
    assert proc.returncode == 0, proc.stderr
    proc = shaberi("run", "--model", "m2", "--tag", "solo", "--judge", "judge-a", *common)
    assert proc.returncode == 0, proc.stderr
    monkeypatch.setenv("SHABERI_RESULTS_DIR", str(results))
    api = shaberi_api.open(results)

    # everything: a family of two runs and a single run, two judges; the family's model against the other one
    outputs, computed = execute(tmp_path, monkeypatch, None, ("m@nb", "m2@solo"))
    assert images(outputs) == 6  # intervals, the comparison, judges, categories, distributions, cost
    expected = api.compare("m@nb", "m2@solo")  # shaberi compare's numbers, the two models on their shared judge
    assert [(c["a"], c["b"], c["benchmark"], c["n"]) for c in computed["comparison"]] == [
        (c["a"], c["b"], c["benchmark"], c["n"]) for c in expected.to_dicts()]
    assert [c["diff"] for c in computed["comparison"]] == pytest.approx(expected["diff"].to_list())
    assert {c["a"] for c in computed["comparison"]} == {"m@nb"} and len(computed["comparison"]) == 5  # and Overall
    assert computed["comparison"][-1]["title"] == "Overall"
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "judge-a" in text and PRICED in text and "spearman" in text and "Total" in text
    assert sorted(computed["runs"]) == ["nb-run1", "nb-run2", "solo"]

    # the intervals: the family's means and margins are multi_run_stats', the single run's scores are
    # benchmark_scores' and its Overall run_scores' ...
    # (to the last bit only approximately: DuckDB's parallel sums may add in another order from one query to the next)
    family = api.multi_run_stats(judge="*").sort("position")
    assert [(s["base_tag"], s["benchmark"], s["runs"], s["mean"], s["margin"]) for s in computed["summary"]] == [
        ("nb", f["title"], 2, pytest.approx(f["mean"]), pytest.approx(f["margin"])) for f in family.to_dicts()] + [
        ("solo", title, 1, pytest.approx(score), None) for title, score in query(
            results, "SELECT title, score FROM benchmark_scores WHERE judge = '*' AND tag = 'solo' ORDER BY position")
        + query(results, "SELECT 'Overall', overall FROM run_scores WHERE judge = '*' AND tag = 'solo'")]
    # ... on a categorical axis, Overall last at k - 1 (not at the view's position 1000)
    titles = ["ELYZA-tasks-100", "Tengu-Bench", "MT-Bench", "Rakuda", "Overall"]
    assert computed["x_positions"] == {t: i for i, t in enumerate(titles)}
    assert computed["labels"] == titles and computed["ticks"] == [0, 1, 2, 3, 4]
    assert computed["plotted_x"] and all(-0.5 < x < 4.5 for x in computed["plotted_x"])
    assert {s["x"] for s in computed["summary"] if s["benchmark"] == "Overall"} == {4}

    # the judges: α and ρ as krippendorff and scipy give them from the raw scores of the answers both scored
    rows = query(results, SCORES.format(cols="run_id, benchmark, question_id, sample_index, judge, "
                                              "original_score_10", tag="%"))
    by_judge: dict[str, dict] = {}
    for *unit, judge, score in rows:
        if score is not None:
            by_judge.setdefault(judge, {})[tuple(unit)] = score
    first, second = sorted(["judge-a", PRICED])  # the pair as agreement orders it
    units = sorted(by_judge[first].keys() & by_judge[second].keys())
    a, b = [by_judge[first][u] for u in units], [by_judge[second][u] for u in units]
    alpha = krippendorff.alpha(reliability_data=[a, b], level_of_measurement="interval")
    assert 0 < alpha < 1  # they disagree on Rakuda, agree elsewhere
    assert len(units) == len([u for u in by_judge["judge-a"] if u[0].startswith("nb-")])  # solo: one judge
    [pair] = computed["agreement"]
    assert (pair["judge_a"], pair["judge_b"], pair["answers"]) == (first, second, len(units))
    assert pair["alpha"] == pytest.approx(alpha) and computed["alpha"] == pytest.approx(alpha)
    assert pair["spearman"] == pytest.approx(stats.spearmanr(a, b).statistic)
    assert pair["mean_difference"] == pytest.approx(sum(y - x for x, y in zip(a, b, strict=True)) / len(units))
    assert [j["judge"] for j in computed["bias"]] == [first, second]

    # the categories: each question's mean over the judges and runs that scored it, then the mean over the
    # category's questions (category_scores, the report's rule); n counts the questions
    def categories(tag: str) -> list[tuple]:
        return sorted(query(results, f"""
            WITH per_question AS (
                SELECT r.base_tag, r.model, b.title, q.category, s.question_id, avg(s.score_10) AS score
                FROM scores s JOIN questions q USING (run_id, benchmark, question_id) JOIN runs r USING (run_id)
                JOIN benchmark_info b USING (benchmark)
                WHERE s.strategy = '' AND q.category IS NOT NULL AND s.score_10 IS NOT NULL AND r.tag LIKE '{tag}'
                GROUP BY ALL)
            SELECT base_tag, model, title, category, avg(score), count(*) FROM per_question GROUP BY ALL"""))

    def approx(rows: list[tuple]) -> list[tuple]:
        return [(*row[:4], pytest.approx(row[4]), row[5]) for row in rows]

    got = sorted((c["base_tag"], c["model"], c["benchmark"], c["category"], c["mean"], c["n"])
                 for c in computed["categories"])
    assert got == approx(categories("%"))
    assert {c[2] for c in got} == {"Tengu-Bench", "MT-Bench", "Rakuda"}  # ELYZA has no categories
    assert len({c[3] for c in got if c[2] == "Rakuda"}) == 3

    # the cost: per stage and model, the total the cost view's
    assert {(c["stage"], c["model"]) for c in computed["cost"]} == {
        ("generation", "m"), ("generation", "m2"), ("judging", "judge-a"), ("judging", PRICED)}
    [(usd, tokens, requests)] = query(results, "SELECT sum(cost_usd), sum(prompt_tokens + completion_tokens), "
                                               "sum(requests) FROM cost")
    total = computed["cost_total"]
    assert total["cost_usd"] == pytest.approx(usd) and usd > 0
    assert (total["tokens"], total["requests"]) == (tokens, requests)
    assert sum(c["requests"] for c in computed["cost"]) == query(results, "SELECT sum(requests) FROM token_usage")[0][0]

    # one tag: the single run alone (one judge, no family, nothing to compare)
    outputs, computed = execute(tmp_path, monkeypatch, "solo")
    assert images(outputs) == 4  # no judge against judge, no comparison asked for
    assert computed["comparison"] is None
    assert computed["runs"] == ["solo"]
    assert {(s["base_tag"], s["model"], s["runs"], s["margin"]) for s in computed["summary"]} == {
        ("solo", "m2", 1, None)}
    assert computed["labels"] == titles
    assert computed["agreement"] == [] and computed["alpha"] is None
    got = sorted((c["base_tag"], c["model"], c["benchmark"], c["category"], c["mean"], c["n"])
                 for c in computed["categories"])
    assert got == approx(categories("solo")) and got
    [(usd, tokens)] = query(results, "SELECT sum(cost_usd), sum(prompt_tokens + completion_tokens) FROM cost "
                                     "WHERE tag = 'solo'")  # the cost view carries the run's tag
    assert {c["model"] for c in computed["cost"]} == {"m2", "judge-a"}
    assert (computed["cost_total"]["cost_usd"], computed["cost_total"]["tokens"]) == (pytest.approx(usd), tokens)
