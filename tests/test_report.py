"""shaberi report, read in a real headless Chromium: every section, the numbers of ``shaberi view``, movers
of two run families ranked per benchmark on its own scale, judge agreement equal to the package's, and
Japanese text drawn with a CJK font."""

from __future__ import annotations

import asyncio
import json
import re
import shutil

import krippendorff
import numpy as np
import pytest
from scipy import stats

from shaberi.generate import GenerationConfig
from shaberi.legacy import import_tree
from shaberi.llm.client import ClientConfig
from shaberi.llm.endpoints import ModelAt
from shaberi.passes import build
from shaberi.pipeline import RunRequest, run
from shaberi.reports.inspector import Inspector

from .browser import with_page
from .conftest import query, shaberi

# Judge scores by tag, run, judge: Rakuda (1–10) q0 … q5 and ELYZA (1–5) ids 1 … 3.
RAKUDA = {
    ("base", 1): {"ja": [3, 8, 5, 9, 2, 6], "jb": [4, 9, 5, 10, 3, 6]},
    ("base", 2): {"ja": [4, 8, 5, 9, 2, 7], "jb": [5, 9, 6, 10, 3, 8]},
    ("new", 1): {"ja": [9, 8, 5, 9, 2, 6], "jb": [10, 9, 5, 10, 3, 6]},
    ("new", 2): {"ja": [9, 7, 5, 9, 2, 6], "jb": [10, 8, 6, 9, 3, 7]},
}
ELYZA = {
    ("base", 1): {"ja": [1, 3, 4], "jb": [2, 3, 4]},
    ("base", 2): {"ja": [1, 3, 4], "jb": [1, 3, 5]},
    ("new", 1): {"ja": [5, 3, 4], "jb": [5, 3, 4]},
    ("new", 2): {"ja": [5, 3, 4], "jb": [5, 3, 3]},
}
LOOP = "同じ一行を何度も書いてしまう回答です。\\n" * 5  # the repetition pass: a line written 4 times or more
SEEDS = {("base", 1): 11, ("base", 2): 12, ("new", 1): 21, ("new", 2): 22}  # a reply per run: its seed's


def _asked(answers: dict[tuple[str, int], str], scores: dict[tuple[str, int], dict[str, list[int]]], i: int) -> str:
    """One question text for every run: each run's answer (by its seed), and each judge's verdict on it."""
    newline = "\\n"  # as the server reads it
    return "".join(f"<<answer#{SEEDS[run]}: {text}>>" + "".join(
        f"<<judge@{j}?{text.rsplit(newline, 1)[-1]}: {j}の理由{i}。{newline}FINAL SCORE: {s[i]}>>"
        for j, s in scores[run].items()) for run, text in answers.items())


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """Two families of two runs each (tags base, new), Rakuda and ELYZA, judged by ja and jb with the scores
    above; the repetition pass lowers the new runs' looping answer to Rakuda q5. Every run asks the same
    questions (one data file): the loopback server answers each run by its seed."""
    from shaberi.testing import LoopbackServer

    base = tmp_path_factory.mktemp("report")
    data = base / "d" / "ja"
    data.mkdir(parents=True)
    with open(data / "rakuda.jsonl", "w", encoding="utf-8") as fh:
        for i in range(6):
            answers = {run: (LOOP if run[0] == "new" and i == 5 else "") + f"{run[0]}{run[1]}の回答{i}です。"
                       for run in RAKUDA}
            fh.write(json.dumps({"category": "地理" if i < 3 else "歴史", "question_id": f"q{i}",
                                 "text": f"{_asked(answers, RAKUDA, i)} 日本の質問{i}"}, ensure_ascii=False) + "\n")
    with open(data / "elyza_tasks_100.jsonl", "w", encoding="utf-8") as fh:
        for i in range(3):
            answers = {run: f"{run[0]}{run[1]}のエリザ回答{i}" for run in ELYZA}
            fh.write(json.dumps({"input": f"{_asked(answers, ELYZA, i)} 課題{i}", "output": "模範解答",
                                 "eval_aspect": "正確さ"}, ensure_ascii=False) + "\n")
    with LoopbackServer() as server:
        for (tag, index), seed in SEEDS.items():
            asyncio.run(run(RunRequest(
                model="m", base_url=server.base_url, results_dir=base / "r", data_dir=data.parent,
                benchmarks=["elyza", "rakuda"], tag=f"{tag}-run{index}", passes=build("repetition"),
                generation=GenerationConfig(seed=seed),
                judges=[ModelAt("ja", server.base_url), ModelAt("jb", server.base_url)],
                client=ClientConfig(timeout=5, max_retries=0))))
    return base / "r"


READ = """(() => {
const all = sel => Array.from(document.querySelectorAll(sel));
const text = sel => all(sel).map(e => e.textContent);
const cells = sel => all(sel).map(r => Array.from(r.cells).map(c => c.textContent));
return JSON.stringify({
  rendered: document.body.dataset.rendered,
  sections: all("h2[id]").map(h => h.id),
  tables: Object.fromEntries(all("table.scores").map(t => [t.id,
    Object.fromEntries(cells(`#${t.id} tbody tr`).map(r => [r[0], r]))])),
  perJudge: all("table.per-judge").map(t => cells(`#${t.id} tbody tr`)),
  alpha: text(".alpha"),
  bias: cells("table.bias tbody tr"),
  movers: text("h3.mover-group"),
  moverRows: text("tr.mover th"),
  runs: text(".movers .runs"),
  replies: text(".movers details summary"),
  histograms: text("figure.histogram figcaption"),
  spread: all("svg.spread circle").length,
  categories: cells("table.categories tbody tr").map(r => r.slice(0, 5)),
  passes: cells("table.passes tbody tr"),
  tokens: cells("table.tokens tbody tr"),
  comparisonHead: text("table.comparison thead th"),
  comparison: cells("table.comparison tbody tr"),
  comparisonNotes: text("p.note"),
});
})()"""


def test_report_of_two_families_reads_right_in_a_browser(families, tmp_path):
    out = tmp_path / "report.html"
    done = shaberi("report", "--tag", "base", "--compare", "new", "--out", str(out), "--results-dir", str(families))
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", html)  # nothing to fetch: opens offline

    async def steps(page):
        seen = json.loads(await page.evaluate(READ))
        seen["fonts"] = await page.fonts("table.categories td.text")  # 地理: which font drew it
        order = "Array.from(document.querySelectorAll('#scores-0 tbody tr')).map(r => r.cells[0].textContent)"
        seen["sorted"] = [await page.evaluate(f"document.querySelector('#scores-0 th:nth-child(2)').click(); {order}")
                          for _ in range(2)]  # by score, ascending then descending
        await page.screenshot(tmp_path / "report.png")
        return seen

    seen = with_page(out, steps)
    assert seen["rendered"] == "yes"  # the inline script ran
    assert seen["sorted"][0][-1] == seen["sorted"][1][-1] == "Overall"  # a sorted table keeps Overall last ...
    assert {*seen["sorted"][0][-3:-1]} == {*seen["sorted"][1][-3:-1]} == {"Tengu-Bench", "MT-Bench"}  # "–" after
    assert seen["sections"] == ["scores", "comparison", "categories", "judges", "distributions", "movers", "passes",
                                "tokens"]

    # The comparison is the table `shaberi compare` prints, from its code: the same cells and notes, the numbers
    # those of its JSON. ELYZA per question (0–10, the mean over both runs and judges): base 2.5, 6, 8.5 and new
    # 10, 6, 7.5, so B − A is 7.5, 0, −1; its interval scipy's paired t at 1 − 0.05/3 (ELYZA, Rakuda and the
    # Overall), and with three questions no verdict.
    from shaberi.reports.compare import compare

    report = compare(families, "base", "new")
    header, rows = report.table()
    assert seen["comparisonHead"] == header and seen["comparison"] == rows
    assert [r[0] for r in rows] == ["ELYZA-tasks-100", "Rakuda", "Overall"]
    assert seen["comparisonNotes"] == [f"note: {n}" for n in report.notes()] and seen["comparisonNotes"]
    body = json.loads(shaberi("compare", "base", "new", "--format", "json", "--results-dir", str(families)).stdout)
    assert [r[4] for r in rows] == [f"{c['diff']:+.2f}" for c in body["benchmarks"]]
    assert [r[7] for r in rows] == [c["verdict"] for c in body["benchmarks"]]
    d = np.array([7.5, 0.0, -1.0])
    # three questions: no sign pattern is rare enough for 0.05 / 3 (scipy's exact test gives 0.25 at best), so the
    # test rejects no shift: no interval, no verdict
    assert rows[0][1:7] == ["3", "5.67", "7.83", f"{d.mean():+.2f}", "–", "1.000"]
    assert rows[0][7] == "too few" and report.benchmarks[0].p == pytest.approx(stats.permutation_test(
        (d,), np.mean, permutation_type="samples").pvalue)

    # The scores are the view's, to the printed digits: pooled, then each judge, for both families.
    for k, tag in enumerate(["base", "new"]):
        for judge, table in [("*", seen["tables"][f"scores-{k}"]), *(
                (j, {r[0]: [r[0], r[1 + i]] for r in seen["perJudge"][k]}) for i, j in enumerate(["ja", "jb"]))]:
            view = json.loads(shaberi("view", "--tag", tag, "--judge", judge, "--format", "json", "--clustered-se",
                                      "--results-dir", str(families)).stdout)
            rows = {r["benchmark"]: r for r in view["scores"][0]["rows"]}
            for title in ["ELYZA-tasks-100", "Rakuda", "Overall"]:
                assert table[title][1].split(" ")[0] == f"{rows[title]['mean']:.2f}", (tag, judge, title)
                if judge == "*":  # the interval over runs, then over questions × runs: both the view's
                    assert table[title][2] == f"{rows[title]['ci_low']:.2f}–{rows[title]['ci_high']:.2f}"
                    assert table[title][3] == (f"{rows[title]['ci_questions_low']:.2f}–"
                                               f"{rows[title]['ci_questions_high']:.2f}")
                    assert table[title][4] == f"{rows[title]['baseline_mean']:.2f}"
            assert table["Tengu-Bench"][1].startswith("–")
        assert seen["tables"][f"scores-{k}"]["Tengu-Bench"][-1] == "not run"

    # Judge agreement: Krippendorff's α from the package on the known scores (ELYZA × 2), every answer a unit.
    for k, tag in enumerate(["base", "new"]):
        units = [(RAKUDA[tag, i]["ja"][q], RAKUDA[tag, i]["jb"][q]) for i in (1, 2) for q in range(6)]
        units += [(2 * ELYZA[tag, i]["ja"][q], 2 * ELYZA[tag, i]["jb"][q]) for i in (1, 2) for q in range(3)]
        alpha = krippendorff.alpha(reliability_data=np.array(units, dtype=float).T, level_of_measurement="interval")
        assert seen["alpha"][k] == f"{alpha:.3f}"
        bias = {r[0]: r for r in seen["bias"][2 * k:2 * k + 2]}
        diffs = [b - a for a, b in units]  # jb against the only other judge, ja
        low, high = stats.t.interval(0.95, len(diffs) - 1, loc=np.mean(diffs), scale=stats.sem(diffs))
        assert bias["jb"][2] == f"{np.mean(diffs):+.2f}" and bias["jb"][3] == f"{low:.2f}–{high:.2f}"

    # Movers of two families, ranked within each benchmark on its own scale: ELYZA's question 1 moves by
    # 3.75 of its 1–5 (7.50 on 0–10), Rakuda's q0 by 5.50; each mean over runs, both runs' scores shown.
    assert [h.split(" (")[0] for h in seen["movers"]] == ["ELYZA-tasks-100", "Rakuda"]
    elyza = [r for r in seen["moverRows"] if r.startswith("elyza")]
    rakuda = [r for r in seen["moverRows"] if r.startswith("rakuda")]
    assert elyza[0] == "elyza / 1: 2.50 → 10.00 (+7.50 on 0–10; +3.75 on its own scale)"
    assert rakuda[0] == "rakuda / q0: 4.00 → 9.50 (+5.50 on 0–10; +5.50 on its own scale)"
    assert "runs (0–10): base-run1 3.00, base-run2 2.00" in seen["runs"]
    assert "ja: 1 on 1-5 (final_score)" in seen["replies"] and "jb: 2 on 1-5 (final_score)" in seen["replies"]
    assert "base-run2" in seen["replies"] and "new-run2" in seen["replies"]  # every run's answer and replies

    # Per category (Rakuda's two), each question's mean over judges and runs, then the t-interval over them.
    per_q = {q: np.mean([RAKUDA["base", i][j][q] for i in (1, 2) for j in ("ja", "jb")]) for q in range(6)}
    geo = [per_q[q] for q in range(3)]
    geo_ci = stats.t.interval(0.95, 2, loc=np.mean(geo), scale=stats.sem(geo))
    assert ["Rakuda", "地理", f"{np.mean(geo):.2f}", f"{geo_ci[0]:.2f}–{geo_ci[1]:.2f}", "3"] in seen["categories"]
    assert seen["fonts"] and all(re.search(r"IPA|Noto Sans CJK|Source Han", f) for f in seen["fonts"]), (
        f"Japanese drawn with {seen['fonts']}: install a CJK font (apt-get install fonts-ipafont-gothic)")

    # Distributions: every judgement counted; two runs per family drawn against the interval.
    assert "Rakuda: 24 judgements" in seen["histograms"] and "ELYZA-tasks-100: 12 judgements" in seen["histograms"]
    assert seen["spread"] == 2 * 2 * 3  # 2 families × 2 runs × (ELYZA, Rakuda, Overall)

    # Pass effects: the new family's looping answer, lowered in both runs.
    changed = query(families, "SELECT count(DISTINCT run_id) FROM pass_deltas d JOIN runs r USING (run_id) "
                              "WHERE r.base_tag = 'new' AND delta <> 0")[0][0]
    assert changed == 2
    # pass, checked, model call failed, verdict unreadable, changed
    assert [p[:5] for p in seen["passes"]] == [["repetition", "18", "0", "0", "0"], ["repetition", "18", "0", "0", "2"]]
    # Tokens: a Total row equal to the stages' sum.
    tokens = [t for t in seen["tokens"] if t[0] in ("generation", "judging", "passes", "Total")]
    total = [int(t[1].replace(",", "")) for t in tokens if t[0] == "Total"]
    assert total[0] == sum(int(t[1].replace(",", "")) for t in tokens[:tokens.index(next(
        t for t in tokens if t[0] == "Total"))])
    png = (tmp_path / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000


def test_report_of_one_run_and_a_legacy_import(families, tmp_path, data_dir, server):
    out = tmp_path / "one.html"
    done = shaberi("report", "--tag", "base-run1", "--out", str(out), "--results-dir", str(families))
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert 'id="movers"' not in html and "Krippendorff" in html
    # One run: the interval is over questions (Student t over each question's mean of the two judges).
    per_q = [np.mean([RAKUDA["base", 1]["ja"][q], RAKUDA["base", 1]["jb"][q]]) for q in range(6)]
    low, high = stats.t.interval(0.95, 5, loc=np.mean(per_q), scale=stats.sem(per_q))
    assert f"<td>Rakuda</td><td class=\"score\">{np.mean(per_q):.2f}</td><td>{low:.2f}–{high:.2f}</td>" in html

    # A third judge on one side only: its own scores stay its own, said so; movers use the judges both have.
    copy = tmp_path / "copy"
    shutil.copytree(families, copy)
    assert shaberi("run", "--model", "m", "--tag", "base-run1", "--stages", "judge", "--judge",
                   f"jc@{server.base_url}", "--results-dir", str(copy)).returncode == 0
    done = shaberi("report", "--tag", "base-run1", "--compare", "new-run1", "--out", str(out), "--results-dir",
                   str(copy))
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert "Not like for like: base-run1 was judged by ja, jb, jc, new-run1 by ja, jb." in html
    assert "judges both tags have: ja, jb" in html and "Judges both tags have: ja, jb." in html  # movers, categories
    assert "rakuda / q0: 3.50 → 9.50 (+6.00 on 0–10; +6.00 on its own scale)" in html

    import_tree(data_dir / "legacy" / "samples", tmp_path / "r")
    model = Inspector(tmp_path / "r", tag="legacy").runs[0].model
    legacy = tmp_path / "legacy.html"
    done = shaberi("report", "--tag", "legacy", "--model", model, "--out", str(legacy), "--results-dir",
                   str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    assert "no token usage recorded" in legacy.read_text()
    missing = shaberi("report", "--tag", "nope", "--out", str(legacy), "--results-dir", str(tmp_path / "r"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: no run tagged 'nope'")
    missing = shaberi("report", "--tag", "nope", "--out", str(legacy), "--results-dir", str(families))
    assert "tags there: base (2 runs), new (2 runs)\n" in missing.stderr  # the families --tag takes
    itself = shaberi("report", "--tag", "base", "--compare", "base", "--out", str(tmp_path / "same.html"),
                     "--results-dir", str(families))
    assert itself.returncode == 2 and itself.stderr == ("error: --compare 'base' is --tag itself: name another tag "
                                                         "or model to compare with\n")
    assert not (tmp_path / "same.html").exists()
    # Where it writes: a directory or a path through a file is bad input; a link's target is written.
    (tmp_path / "afile").write_text("x")
    for bad, needle in [(tmp_path, "is a directory"), (tmp_path / "afile" / "x.html", "cannot make its folder")]:
        refused = shaberi("report", "--tag", "legacy", "--model", model, "--out", str(bad), "--results-dir",
                          str(tmp_path / "r"))
        assert refused.returncode == 2 and needle in refused.stderr and refused.stderr.count("\n") == 1
    link = tmp_path / "link.html"
    link.symlink_to(legacy)
    assert shaberi("report", "--tag", "base-run1", "--out", str(link), "--results-dir", str(families)).returncode == 0
    assert link.is_symlink() and "base-run1" in legacy.read_text(encoding="utf-8")
