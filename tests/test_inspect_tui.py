"""inspect's question list, driven headless by textual's pilot on real runs: the question column, search
with ``/`` (matched in DuckDB over prompts, answers and judge replies), coloured scores, the focus at start
and the widths of the list and the detail."""

from __future__ import annotations

import base64

import pytest
from rich.text import Text

from shaberi.reports.inspector import Inspector
from shaberi.reports.tui import QUESTION_CELLS, InspectApp, _one_line

from .conftest import judged_rakuda_runs, run_pilot


def judge64(reply: str) -> str:
    """A judge reply that appears in no prompt (the loopback server decodes it)."""
    return f"<<judge64: {base64.b64encode(reply.encode()).decode()}>>"


def texts(tag: str) -> list[str]:
    """Each question holds a word found only in one place: Kyoto and 共通語 in the prompt (q0, q2),
    サーバーの応答 in q1's answer (the server's default reply; q1 asks for no answer), ZEBRA in q2's judge
    reply; q3 asks for JSON and gets none (format_validation takes 1.8 off), and holds % and _."""
    s0, s2 = (8, 2) if tag == "a" else (3, 6)
    zebra = judge64(f"首都を正しく答えたZEBRA。\nFINAL SCORE: {s2}")
    return [
        f"Kyotoの観光地は？共通語 <<answer: 金閣寺です。>> <<judge: 具体的。\\nFINAL SCORE: {s0}>>",
        "富士山の高さは？ <<judge: 正確。\\nFINAL SCORE: 5>>",
        f"日本の首都は？共通語 <<answer: 東京です。>> {zebra}",
        "割合は100%ですか？a_bをJSON形式で答えてください。 <<answer: はい。>> <<judge: 妥当。\\nFINAL SCORE: 7>>",
    ]


@pytest.fixture(scope="module")
def tui_root(tmp_path_factory):
    """Two Rakuda runs of one model (tags a and b) of the four questions above, judged, with the passes."""
    return judged_rakuda_runs(tmp_path_factory.mktemp("inspect-tui"), {tag: texts(tag) for tag in ("a", "b")})


def cells(app: InspectApp) -> list[list]:
    table = app.query_one("#questions")
    return [list(table.get_row_at(i)) for i in range(table.row_count)]


def ids(app: InspectApp) -> list[str]:
    return [str(r[1]) for r in cells(app)]


def detail_text(app: InspectApp) -> str:
    return str(app.query_one("#detail").content)


def test_the_list_shows_questions_coloured_scores_and_has_the_focus(tui_root):
    app = InspectApp(tui_root, model="m")
    seen = {}

    async def steps(app, pilot):
        table = app.query_one("#questions")
        seen["focused"] = app.focused is table
        seen["headers"] = [str(c.label) for c in table.columns.values()]
        seen["list_width"] = table.size.width
        seen["diff_ends"] = sum(c.get_render_width(table) for c in list(table.columns.values())[:6])
        seen["rows"] = cells(app)
        seen["first"] = detail_text(app)
        await pilot.press("down")  # no click, no focus() first
        await pilot.pause()
        seen["second"] = detail_text(app)
        seen["widths"] = (table.region.width, app.query_one("#detail-scroll").region.width)
        b = next(r.run_id for r in app.inspector.runs if r.tag == "b")
        app.query_one("#compare").value = f"run:{b}"
        await pilot.pause()
        seen["compared"] = cells(app)

    run_pilot(app, steps)
    assert app.inspector.run(app.run_id).tag == "a"
    assert seen["focused"]
    assert seen["headers"] == ["benchmark", "id", "score", "w/o pass", "pass Δ", "diff", "error", "question"]
    assert seen["diff_ends"] <= seen["list_width"]  # the numbers, the difference included, are in view
    rows = {str(r[1]): r for r in seen["rows"]}
    assert [str(r[1]) for r in seen["rows"]] == ["q2", "q1", "q3", "q0"]  # score ↑: 2, 5, 7 − 1.8, 8
    first = str(rows["q0"][7])  # the first turn, cut to 40 cells (a Japanese character takes two)
    assert first.startswith("Kyotoの観光地は？共通語 <<answer: 金閣") and first.endswith("…")
    assert str(rows["q1"][7]).startswith("富士山の高さは？ <<judge: 正確。")
    assert all(isinstance(r[7], Text) and r[7].cell_len <= QUESTION_CELLS for r in seen["rows"])
    assert "\n" not in str(rows["q0"][7])
    colour = {q: tuple(str(c.style) if isinstance(c, Text) else "" for c in r[2:6]) for q, r in rows.items()}
    assert colour == {"q2": ("red", "red", "", ""), "q1": ("yellow", "yellow", "", ""),
                      "q3": ("yellow", "green", "red", ""), "q0": ("green", "green", "", "")}
    assert [str(c) for c in rows["q3"][2:5]] == ["5.20", "7.00", "-1.80"]
    diff = {str(r[1]): (str(r[5]), str(r[5].style)) for r in seen["compared"]}
    assert diff == {"q0": ("-5.00", "red"), "q2": ("+4.00", "green"), "q1": ("+0.00", "dim"),
                    "q3": ("+0.00", "dim")}
    assert "rakuda / q2" in seen["first"] and "rakuda / q1" in seen["second"]  # down: the second question
    questions, detail = seen["widths"]
    assert detail > questions and questions >= 80 and detail >= 100  # 45 % / 55 % of 200 columns


def test_slash_searches_prompts_answers_and_judge_replies(tui_root):
    app = InspectApp(tui_root, tag="a")
    seen: dict = {}

    async def search(pilot, text: str | None, name: str) -> None:
        await pilot.press("slash")
        await pilot.pause()
        box = app.query_one("#search")
        seen.setdefault("box", []).append((box.display, app.focused is box))
        if text is None:
            box.value = ""
        else:
            await pilot.press(*text)
        await pilot.press("enter")
        await pilot.pause()
        seen[name] = (ids(app), app.sub_title, app.focused is app.query_one("#questions"), detail_text(app))

    async def steps(app, pilot):
        seen["all"] = (ids(app), app.sub_title)
        await search(pilot, "kYOTO", "prompt")
        await pilot.press("escape")
        await pilot.pause()
        seen["escaped"] = (ids(app), app.sub_title, app.query_one("#search").display)
        await search(pilot, "サーバーの応答", "answer")
        app.query_one("#search").value = ""
        await search(pilot, "zebra", "judge")
        app.query_one("#search").value = ""
        await search(pilot, "共通語", "two")
        app.query_one("#search").value = ""
        await search(pilot, "%", "percent")
        app.query_one("#search").value = ""
        await search(pilot, "_", "underscore")
        app.query_one("#search").value = ""
        await search(pilot, "qe/", "none")  # typed into the box: neither quit nor errors only
        await search(pilot, None, "cleared")  # an empty search clears it
        seen["box_after"] = app.query_one("#search").display

    run_pilot(app, steps)
    everything = ["q2", "q1", "q3", "q0"]
    assert seen["all"] == (everything, "m · a: 4 questions")
    assert all(shown and focused for shown, focused in seen["box"])  # / shows the box and types into it
    assert seen["prompt"][:3] == (["q0"], "m · a: 1 question matches “kYOTO”", True)
    assert "rakuda / q0" in seen["prompt"][3]
    assert seen["escaped"] == (everything, "m · a: 4 questions", False)
    assert seen["answer"][:2] == (["q1"], "m · a: 1 question matches “サーバーの応答”")
    assert seen["judge"][:2] == (["q2"], "m · a: 1 question matches “zebra”")
    assert "ZEBRA" in seen["judge"][3]
    assert seen["two"][:2] == (["q2", "q0"], "m · a: 2 questions match “共通語”")
    assert seen["percent"][0] == ["q3"] and seen["underscore"][0] == ["q3"]  # % and _ are literal
    assert seen["none"][:2] == ([], "m · a: 0 questions match “qe/”") and "no question matches" in seen["none"][3]
    assert not app.errors_only and app.return_code is None
    assert seen["cleared"][:3] == (everything, "m · a: 4 questions", True) and not seen["box_after"]


def test_search_is_done_in_duckdb_with_the_other_filters(tui_root):
    inspector = Inspector(tui_root, tag="a")
    run_id = inspector.runs[0].run_id
    rows = inspector.rows(run_id, search="共通語", sort="score ↓", limit=1)
    assert [(r["question_id"], r["total"]) for r in rows] == [("q0", 2)]  # counted before the limit
    assert rows[0]["question"].startswith("Kyotoの観光地は？")
    assert inspector.rows(run_id, search="共通語", errors_only=True) == []
    assert [r["question_id"] for r in inspector.rows(run_id, search="  ")] == ["q2", "q1", "q3", "q0"]
    assert inspector.rows(run_id, search="'; DROP TABLE answers; --") == []  # a parameter, not SQL
    assert [r["question_id"] for r in inspector.rows(run_id, search="Final Score: 2")] == ["q2"]
    assert [r["question_id"] for r in inspector.rows(run_id, search="Q3")] == ["q3"]  # an id, whole
    assert str(_one_line("一行目\n  二行目\t[b]", QUESTION_CELLS)) == "一行目 二行目 [b]"  # one line, literal
    assert str(_one_line(None, QUESTION_CELLS)) == ""
