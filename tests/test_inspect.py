"""inspect (the terminal browser, driven headless by textual's pilot): what it shows, on complete, partial,
errored, legacy and very large roots. The HTML report: tests/test_report.py."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path

import pytest

from shaberi.legacy import import_tree
from shaberi.llm.client import ClientConfig
from shaberi.llm.endpoints import ModelAt
from shaberi.pipeline import RunRequest, run
from shaberi.reports.inspector import Inspector
from shaberi.reports.tui import InspectApp, render_detail

from .conftest import judged_rakuda_runs, run_pilot

SCORES = {"a": [3, 8, 5, 9, 2, 6], "b": [7, 8, 1, 9, 6, 6]}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Two Rakuda runs of one model, tags a and b, judged with known scores; b's last question fails (HTTP
    401, not retried) so it has an error answer; the passes ran on both."""
    return judged_rakuda_runs(tmp_path_factory.mktemp("inspect"), {
        tag: [f"<<answer: 回答{i}です。>> <<judge: 理由{tag}{i}。\\nFINAL SCORE: {s}>> 質問{i}"
              + (" [[fail:401]]" if tag == "b" and i == 5 else "") for i, s in enumerate(scores)]
        for tag, scores in SCORES.items()})


def table_rows(app: InspectApp) -> list[list[str]]:
    table = app.query_one("#questions")
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def detail_text(app: InspectApp) -> str:
    return str(app.query_one("#detail").content)


def test_inspect_lists_sorts_compares_and_shows_a_question(root):
    app = InspectApp(root, model="m")
    seen = {}

    async def steps(app, pilot):
        assert app.inspector.run(app.run_id).tag == "a"
        seen["first"] = [(r[1], r[2]) for r in table_rows(app)]  # id, score
        app.query_one("#sort").value = "score ↓"
        await pilot.pause()
        seen["desc"] = [r[1] for r in table_rows(app)]
        b = next(r.run_id for r in app.inspector.runs if r.tag == "b")
        app.query_one("#compare").value = f"run:{b}"
        app.query_one("#sort").value = "difference"
        await pilot.pause()
        seen["diff"] = [(r[1], r[5]) for r in table_rows(app)]
        app.query_one("#questions").focus()
        await pilot.press("down")
        await pilot.pause()
        seen["detail"] = detail_text(app)
        app.query_one("#run").value = b
        await pilot.pause()
        await pilot.press("e")  # errors only
        await pilot.pause()
        seen["errors"] = table_rows(app)
        seen["error_detail"] = detail_text(app)

    run_pilot(app, steps)
    assert seen["first"][:3] == [("q4", "2.00"), ("q0", "3.00"), ("q2", "5.00")]  # score ascending
    assert seen["desc"][:2] == ["q3", "q1"]
    assert seen["diff"][:3] == [("q0", "+4.00"), ("q2", "-4.00"), ("q4", "+4.00")]  # |Δ| largest first
    assert "rakuda / q2" in seen["detail"] and "回答2です。" in seen["detail"]  # the second row after moving down
    assert "Judge j" in seen["detail"] and "parsed by final_score" in seen["detail"] and "理由a2。" in seen["detail"]
    assert "format_validation: +0.00" in seen["detail"]
    assert [r[1] for r in seen["errors"]] == ["q5"] and "HTTP 401" in seen["errors"][0][6]
    assert "error: HTTP 401" in seen["error_detail"] and "answer_error" in seen["error_detail"]


def test_inspect_compares_two_judges_and_reads_legacy_imports_without_replies(root, tmp_path, data_dir):
    inspector = Inspector(root, tag="a")
    rows = inspector.rows(inspector.runs[0].run_id, compare_judge="j", sort="difference")
    assert {r["difference"] for r in rows} == {0.0}  # a judge against itself
    import_tree(data_dir / "legacy" / "samples", tmp_path)
    legacy = Inspector(tmp_path, tag="legacy")
    found = None
    for r in legacy.runs:
        con = legacy.con(r.run_id)
        hit = con.execute("SELECT benchmark, question_id FROM judgements WHERE judge_output IS NULL LIMIT 1").fetchone()
        if hit:
            found = (r.run_id, *hit)
            break
    assert found, "the sample files hold judgements without a judge_output"
    text = render_detail(legacy.detail(*found))
    assert "(no judge reply stored)" in text and "parsed by legacy" in text


def test_inspect_opens_a_million_row_root_without_loading_it(tmp_path):
    """1,000,000 judgement rows in 250 runs; the browser opens one run, in a separate process whose peak
    memory is measured."""
    script = Path(__file__).resolve().parents[1] / "bench" / "view_scores.py"
    build = subprocess.run([sys.executable, "-c", f"""
import sys; sys.path.insert(0, {str(script.parent)!r})
from view_scores import build
from pathlib import Path
build(Path({str(tmp_path / 'big')!r}), 1_000_000)
"""], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    probe = subprocess.run([sys.executable, "-c", f"""
import asyncio, re, time
def peak():  # VmHWM: this process's own peak (ru_maxrss would count the forking parent's)
    return int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024
from shaberi.reports.tui import InspectApp
started = time.perf_counter()
app = InspectApp({str(tmp_path / 'big')!r}, tag="exp-run1")
async def go():
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        print(app.query_one("#questions").row_count, len(app.inspector._connected),
              peak(), round(time.perf_counter() - started, 2))
asyncio.run(go())
"""], capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-2000:]
    rows, runs_read, peak_mb, _seconds = probe.stdout.split()
    assert int(rows) == 500 and int(runs_read) == 1  # the first 500 of its questions, from its own partitions
    assert int(peak_mb) < 400, f"peak RSS {peak_mb} MB"


BRACKETS = ["[0, 1)", "{\"a\": [1, 2", "[/b] 閉じタグだけ", "[[8]] と [b]太字[/b]", "末尾の ]", "[red]赤[/red"]


def test_inspect_shows_any_text_literally(server, tmp_path):
    """Answers, judge replies, question ids and model, tag and judge names with unbalanced brackets and
    markup-like text: shown as written, no crash."""
    from .conftest import write_rakuda

    texts = [f"<<answer: {t}>> <<judge: {t} FINAL SCORE: 5>> 質問{i}" for i, t in enumerate(BRACKETS)]
    data = write_rakuda(tmp_path / "d", texts)
    rakuda = data / "ja" / "rakuda.jsonl"
    rakuda.write_text(rakuda.read_text(encoding="utf-8").replace('"q0"', '"[/]q0"'), encoding="utf-8")
    asyncio.run(run(RunRequest(model="m[/]", base_url=server.base_url, results_dir=tmp_path / "r", data_dir=data,
                               benchmarks=["rakuda"], judges=[ModelAt("j[/b]", server.base_url)], tag="t[/]",
                               client=ClientConfig(timeout=5, max_retries=0))))
    app = InspectApp(tmp_path / "r")
    seen = []

    async def steps(app, pilot):
        app.query_one("#questions").focus()
        for _ in BRACKETS:
            seen.append(detail_text(app))
            await pilot.press("down")
            await pilot.pause()

    run_pilot(app, steps)
    assert not app.return_code
    for text in BRACKETS:
        assert sum(text in s for s in seen) >= 1, text  # the answer, as written
        assert any(f"{text} FINAL SCORE: 5" in s for s in seen), text  # the judge's reply, as written


def test_inspect_exits_non_zero_when_the_browser_fails(root, monkeypatch):
    """An unexpected error inside the browser: textual shows it, and the command's exit code says so."""
    from shaberi.cli import main

    def broken(self, *args, **kwargs):
        raise RuntimeError("a bug in the detail panel")

    monkeypatch.setattr(Inspector, "detail", broken)
    app = InspectApp(root, model="m")

    async def steps(app, pilot):
        pass

    with pytest.raises(RuntimeError):
        run_pilot(app, steps)
    assert app.return_code == 1

    def headless(self):  # the command's own App.run, without a terminal
        async def go():
            async with self.run_test():
                pass

        with contextlib.suppress(RuntimeError):  # textual re-raises it after showing it
            asyncio.run(go())

    monkeypatch.setattr(InspectApp, "run", headless)
    with pytest.raises(SystemExit) as exited:
        main(["inspect", "--results-dir", str(root)])
    assert exited.value.code == 1
