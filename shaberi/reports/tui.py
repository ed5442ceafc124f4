"""``shaberi inspect`` (alias ``inspect-output``): a terminal browser of questions, answers, judge replies
and pass deltas, to see why a score moved.

Top row: the run (model · tag), the benchmark, the judge (or all judges, averaged), the sort order, and
what to compare with (another run of the same results root, or another judge). Left (45 %): the questions
of the run, sorted, searched and filtered in DuckDB (``shaberi.reports.inspector``), with the id (cut to 10
cells), the question's first turn on one line, score, score without passes (both coloured on the 0–10 scale:
red below 4, yellow below 7, green from 7), pass delta and difference (the other's score minus this one's;
both green above 0, red below), and error. Right (55 %): the
highlighted question: the prompt, the reference and criteria, the answer (reasoning apart), every judge's
reply with the parsed score and how it was parsed, and every pass delta with its reason. The subtitle says
how many questions the filters match.

Keys (the question list has the focus at start):

- ``↑`` ``↓`` ``PgUp`` ``PgDn`` ``Home`` ``End``: move through the questions; the detail follows.
- ``/``: search. Type, then ``Enter``: only the question with that id and the questions whose prompt, answer
  or any judge reply (or fallback reply) holds the text, case-insensitively, are listed; the box stays above
  the list holding the search (``/`` again edits it). ``Escape``, or ``Enter`` on an empty search, clears it.
- ``e``: errors only (again: every question).
- ``Tab`` / ``Shift+Tab``: to the selectors and the detail pane and back.
- ``q``: quit.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Input, Select, Static

from .inspector import ALL_JUDGES, SORTS, Detail, Inspector

__all__ = ["InspectApp", "render_detail"]

NONE = "—"
QUESTION_CELLS = 40  # the question column, in terminal cells (a Japanese character takes two)
ID_CELLS = 10  # Rakuda's ids are 22 characters: cut, they would leave the question no room (the detail has it whole)
ERROR_CELLS = 30


def _num(value: float | None, signed: bool = False) -> str:
    return "" if value is None else (f"{value:+.2f}" if signed else f"{value:.2f}")


def _score_cell(value: float | None) -> Text:
    """A 0–10 score, coloured: red below 4, yellow below 7, green from 7 (as shown, to two decimals)."""
    if value is None:
        return Text("")
    shown = round(value, 2)
    style = "red" if shown < 4 else "yellow" if shown < 7 else "green"
    return Text(_num(value), style=style, justify="right")


def _signed_cell(value: float | None) -> Text:
    """A delta or difference, coloured by its sign (green up, red down, dim none)."""
    if value is None:
        return Text("")
    shown = round(value, 2)
    style = "green" if shown > 0 else "red" if shown < 0 else "dim"
    return Text(_num(value, signed=True), style=style, justify="right")


def _one_line(text: str | None, cells: int) -> Text:
    """Text on one line (whitespace runs collapsed), cut to ``cells`` terminal cells with an ellipsis;
    plain Text, never markup."""
    line = Text(" ".join((text or "").split()), no_wrap=True, overflow="ellipsis")
    line.truncate(cells, overflow="ellipsis")
    return line


def render_detail(d: Detail) -> Text:
    """The detail panel (also what the tests read). Built from Text pieces, never from markup: answers and
    judge replies hold arbitrary brackets (truncated JSON, ``[0, 1)``, ``[/b]``, ``[[8]]``)."""
    out = Text()

    def line(*parts: str | tuple[str, str]) -> None:
        out.append("\n" if out else "")
        out.append_text(Text.assemble(*parts))

    def head(title: str) -> None:
        line("")
        line((title, "bold"))

    line((f"{d.benchmark} / {d.question_id}", "bold"), f"  ({d.category})" if d.category else "")
    for i, turn in enumerate(d.turns, start=1):
        head(f"Prompt{f' (turn {i})' if len(d.turns) > 1 else ''}")
        line(turn)
    if d.reference:
        head("Reference")
        line(d.reference)
    if d.criteria:
        head("Criteria")
        line(d.criteria)
    line("")
    line(("Answer", "bold"), f"  (finish_reason: {d.finish_reason})" if d.finish_reason else "")
    line((f"error: {d.answer_error}", "red") if d.answer_error else d.answer or "")
    if d.reasoning:
        head("Reasoning (not judged)")
        line((d.reasoning, "dim"))
    for j in d.judgements:
        score = NONE if j["score"] is None else f"{j['score']:g}"
        line("")
        line((f"Judge {j['judge']}", "bold"), f": score {score}",
             f" (scale {j['score_scale']})" if j["score_scale"] else "",
             f", parsed by {j['parse_method'] or NONE}",
             f", prompt {j['prompt_hash']}" if j.get("prompt_hash") else "",
             (f"  {j['error']}", "red") if j["error"] else "")
        line(j["judge_output"] if j["judge_output"] else ("(no judge reply stored)", "dim"))
        if j["fallback_output"]:
            line(("Fallback reply:", "italic"))
            line(j["fallback_output"])
    if d.history:
        head("Earlier judgements (history, not counted)")
        for h in d.history:
            score = NONE if h["score"] is None else f"{h['score']:g}"
            why = "of an earlier answer text" if h["lineage"] == "stale" else "superseded by a later judgement"
            line(f"{h['judge']}: score {score}, prompt {h['prompt_hash'] or NONE}, {why}")
    if d.passes:
        head("Pass deltas")
        for p in d.passes:
            line(f"{p['pass_name']}: {p['delta']:+.2f}  {p['reason'] or 'nothing found'}")
    return out


class InspectApp(App):
    TITLE = "shaberi inspect"
    CSS = """
    #filters { height: 3; }
    #filters Select { width: 1fr; }
    #list { width: 45%; }
    #search { display: none; }
    #questions { height: 1fr; }
    #detail-scroll { width: 55%; border-left: solid $accent; padding: 0 1; }
    """
    AUTO_FOCUS = "#questions"  # the arrow keys move through the questions at once
    BINDINGS: ClassVar = [
        Binding("slash", "search", "search"),
        Binding("escape", "clear_search", "clear search", show=False),
        Binding("e", "toggle_errors", "errors only"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, results_dir: Path, tag: str | None = None, model: str | None = None) -> None:
        super().__init__()
        self.inspector = Inspector(results_dir, tag, model)
        self.run_id = self.inspector.runs[0].run_id
        self.errors_only = False
        self.search: str | None = None
        self.keys: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        runs = [(Text(r.label), r.run_id) for r in self.inspector.runs]  # Text: names are never markup
        yield Header()
        with Horizontal(id="filters"):
            yield Select(runs, value=self.run_id, allow_blank=False, id="run")
            yield Select([], prompt="all benchmarks", id="benchmark")
            yield Select([("all judges", ALL_JUDGES)], value=ALL_JUDGES, allow_blank=False, id="judge")
            yield Select([(s, s) for s in SORTS], value="score ↑", allow_blank=False, id="sort")
            yield Select([], prompt="compare with…", id="compare")
        with Horizontal():
            with Vertical(id="list"):
                yield Input(placeholder="search prompts, answers and judge replies (Enter: search, Escape: clear)",
                            id="search")
                yield DataTable(id="questions", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="detail-scroll"):
                yield Static(id="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#questions", DataTable).add_columns("benchmark", "id", "score", "w/o pass", "pass Δ",
                                                            "diff", "error", "question")
        self._run_changed()

    def _run_changed(self) -> None:
        judges = self.inspector.judges(self.run_id)
        self.query_one("#benchmark", Select).set_options([(Text(b), b) for b in self.inspector.benchmarks(self.run_id)])
        judge = self.query_one("#judge", Select)
        pools = self.inspector.pools(self.run_id) or [ALL_JUDGES]  # never two prompt sets in one mean
        judge.set_options([*((Text("all judges" + p[1:]), p) for p in pools), *((Text(j), j) for j in judges)])
        judge.value = pools[0]
        others = [(Text(f"run {r.label}"), f"run:{r.run_id}") for r in self.inspector.runs if r.run_id != self.run_id]
        self.query_one("#compare", Select).set_options(others + [(Text(f"judge {j}"), f"judge:{j}") for j in judges])
        self.refresh_rows()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "run" and event.value != self.run_id and event.value != Select.NULL:
            self.run_id = str(event.value)
            self._run_changed()
        elif event.select.id != "run":
            self.refresh_rows()

    def _value(self, name: str) -> str | None:
        value = self.query_one(f"#{name}", Select).value
        return None if value == Select.NULL else str(value)

    def refresh_rows(self) -> None:
        compare = self._value("compare") or ""
        kind, _, other = compare.partition(":")
        rows = self.inspector.rows(self.run_id, self._value("benchmark"), self._value("judge") or ALL_JUDGES,
                                   self._value("sort") or "score ↑", other if kind == "run" else None,
                                   other if kind == "judge" else None, self.errors_only, search=self.search)
        table = self.query_one("#questions", DataTable)
        table.clear()
        self.keys = []
        for r in rows:
            table.add_row(Text(r["benchmark"]), _one_line(r["question_id"], ID_CELLS), _score_cell(r["score"]),
                          _score_cell(r["original"]),
                          _signed_cell(r["pass_delta"]) if r["pass_delta"] else "",
                          _signed_cell(r["difference"]), _one_line(r["error"], ERROR_CELLS),
                          _one_line(r["question"], QUESTION_CELLS))  # last: the numbers stay in view
            self.keys.append((r["benchmark"], r["question_id"]))
        total = rows[0]["total"] if rows else 0
        found = f"{total} question{'' if total == 1 else 's'}"
        if self.search:
            found += f" {'matches' if total == 1 else 'match'} “{self.search}”"
        shown = f" (the first {len(rows)} shown)" if total > len(rows) else ""
        self.sub_title = f"{self.inspector.run(self.run_id).label}: {found}{shown}"
        self.show_detail(0)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail(event.cursor_row)

    def show_detail(self, index: int) -> None:
        panel = self.query_one("#detail", Static)
        if not self.keys or index >= len(self.keys):
            panel.update(Text(f"no question matches “{self.search}”" if self.search else "no questions here"))
            return
        benchmark, question_id = self.keys[index]
        panel.update(render_detail(self.inspector.detail(self.run_id, benchmark, question_id)))

    def action_toggle_errors(self) -> None:
        self.errors_only = not self.errors_only
        self.refresh_rows()

    def action_search(self) -> None:
        """``/``: show the search box (holding the current search) and type into it."""
        box = self.query_one("#search", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "search":
            return
        self._set_search(event.value.strip() or None)

    def action_clear_search(self) -> None:
        """``Escape``: drop the search (if any) and go back to the questions."""
        self._set_search(None)

    def _set_search(self, text: str | None) -> None:
        box = self.query_one("#search", Input)
        if text is None:
            box.value = ""
            box.display = False
        self.query_one("#questions", DataTable).focus()
        if text != self.search:
            self.search = text
            self.refresh_rows()
