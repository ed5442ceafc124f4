"""``shaberi leaderboard``: the original Shaberi table from the tables, for any tag (default ``legacy``).

Per model: ``Judges`` (how many judged it), ``Average (All)`` and the four benchmark columns pooled over
every judge's rows (``score_means`` judge ``*``: not a mean of per-judge means, as in the original),
then per judge ``Average (J)`` and its four columns; each Average is the mean of the four columns next
to it. ELYZA is × 2 and Tengu 61–65 are left out (the views do both). JA-MT is the 60-question set; a
model that only has the older 80-question set shows that instead, and ``JA-MT questions`` says which.
``Average (ex-GPT4)`` and ``GPT4 delta`` (only when a GPT-4 judge, title ``GPT4`` in ``JUDGE_TITLES``, judged
some of the ranked runs) follow the original's arithmetic: the mean of every Average column whose name does
not contain "GPT4" (GPT4.1's is left out too; ``All`` is included), and its difference from GPT4's relative
to it.
``% JA`` is the share of Japanese characters (kana, kanji) among the letters of all of a
model's answers, summed from the counts stored with each answer (``shaberi/unicode_scripts.py``); the original
took it from whichever answer file it read first, so it can differ. ``JA-MT questions`` is empty for a
model with no MT-Bench at all. ``Complete`` counts the four benchmarks with a pooled score: complete rows
are ranked first, partial ones after them (their averages are over fewer benchmarks).
A question a legacy file repeats counts once, and a legacy score off its benchmark's scale or no real number
is set aside (unscored); ``as_published`` counts as the original tooling did (``multijudge-viz.py``: pandas
means of the files' score columns): every row, repeats included, and each set-aside score it averaged, as it
averaged it (``legacy._published``). Its means are one function, ``published_mean``, for every format and for the
import report.

A non-finite number (inf, -inf, nan: only --as-published makes one) is shown as the text ``inf``, ``-inf`` or
``nan`` in every format: JSON has no infinity (orjson writes null, which reads as "missing"), so the board as
shown (``Board.select``) holds it as a ``NonFinite``, a ``str`` that ``float()`` reads back: the table, Markdown
and csv print it, json writes it as that string, the workbook as that text in the cell. ``board`` itself (the
Python API) keeps the float.

A tag that names no run but a family ``{tag}-run1 … N`` ranks the family: every score column is the mean
over its complete runs with the 95 % t-interval, straight from ``multi_run_stats`` (an Average is the mean
of each run's Average; a run not complete for a judge, or for every judge in the pooled columns, is left
out, and ``notes`` names it). ``Runs`` (and ``Runs (J)`` per judge) says how many runs count; each score
column ``X`` is followed by ``X CI low`` and ``X CI high`` (empty with one run). Per model, as every reader
takes a tag (``selection.select_runs``): its run tagged so, or else its family. ``Average (ex-GPT4)`` and
``GPT4 delta`` are then computed from the means.

A row is a model's judgements under one prompt set (``_by_prompt_set``): the judge columns are the judges' names,
whatever prompts they were given, and a ``Prompts`` column (when the board holds another set than Shaberi's own, or
an import's unnamed one) says whose a row is, so that a run judged with the original's prompts ranks among imported
results; a row's ``All`` pools its own set's judges (``pooled_judge``), never two sets.

Which columns are shown (``Board.select``): ``pooled`` (model, Runs, Judges, Average (All), the four (All)
columns, % JA, JA-MT questions, Complete), ``all`` (the wide table above, what the original's output.csv
held), or chosen judges' blocks after the pooled ones. The command shows ``pooled`` in the terminal
formats (table, markdown, where an interval reads ``6.12 ± 0.31``) and ``all`` in the exports (csv, json,
xlsx). ``write_xlsx`` writes the workbook with XlsxWriter: a bold header row (the original's fill,
#DDE8CB), panes frozen below it and right of the model column, fitted widths, numbers as numbers (``0.00``;
``% JA`` and ``GPT4 delta`` as ``0.0%``, as the original formatted them; a non-finite one as its text, ``inf``),
missing values as empty cells, and
a 3-colour scale per score column, Excel's default (red #F8696B low, yellow #FFEB84 at the median, green
#63BE7B high), and, as the original's ``multijudge-viz.py`` (output-multi.xlsx) marked it, each score
column's best value in bold green (#127622). The original had no colour scale; its % JA below 50 % / 80 %
in red / brown is not reproduced.
The command must answer in half a second on a 20-model tree: it defines only the views it needs and
shares one DuckDB database between finding the runs and reading them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Literal, NamedTuple

import duckdb

from .. import benchmarks as bm
from ..errors import UsageError
from ..extract import AS_PUBLISHED_MARK
from ..tables.selection import RunRef, Selector, parse_selectors, require_root, select, tags_there
from ..tables.sql import connect, query, score_means
from .output import write_atomic

__all__ = ["FORMATS", "JUDGE_TITLES", "Board", "Column", "NonFinite", "board", "columns",
           "judge_title", "leaderboard", "output_format", "published_differences", "published_mean", "write_xlsx"]

# Column names of the original leaderboard for the judge folders it knew.
JUDGE_TITLES = {"gpt-4-turbo-preview": "GPT4", "gpt-4.1-2025-04-14": "GPT4.1", "gpt-5.1-2025-11-13": "GPT5.1",
                "llmjudge-athenev2": "AtheneV2", "llmjudge-llama33": "Llama 3.3", "llmjudge-tulu405": "Tulu405"}

GPT4 = "GPT4"
FORMATS = ("table", "markdown", "csv", "json", "xlsx")
_SUFFIXES = {".xlsx": "xlsx", ".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown"}
# Excel's default 3-colour scale (XlsxWriter's too), low to high.
COLOR_SCALE = {"type": "3_color_scale", "min_color": "#F8696B", "mid_color": "#FFEB84", "max_color": "#63BE7B"}


def judge_title(judge: str) -> str:
    """A judge's column title: the original's name for the judge folders it knew (``JUDGE_TITLES``), ``All`` for
    the pooled rows, with a prompt set's label after it (``GPT4.1 [original:8578939]``, ``All [original:8578939]``:
    ``judging.promptsets``)."""
    name, _, label = judge.partition(" [")
    title = "All" if name == "*" else JUDGE_TITLES.get(name, name)
    return f"{title} [{label}" if label else title


def columns() -> list[tuple[str, str]]:
    """(benchmark, column title) of the original leaderboard's benchmark columns, in its (alphabetical) order:
    ``leaderboard_column`` in each benchmark module's DATA entry."""
    return sorted(((name, entry["leaderboard_column"]) for name, entry in bm.registry().items()
                   if "leaderboard_column" in entry), key=lambda c: c[1])


class NonFinite(str):
    """A non-finite number as the board shows it: the text ``inf``, ``-inf`` or ``nan`` (``float()`` reads it back),
    so that every format says what it is (module docstring); JSON has no infinity."""

    __slots__ = ()

    @classmethod
    def of(cls, value: object) -> object:
        """``value``, or its NonFinite where it is a non-finite float."""
        if isinstance(value, float) and not math.isfinite(value):
            return cls("nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
        return value


class Column(NamedTuple):
    """A leaderboard column: its ``name``; ``kind`` text, count, score (a mean: coloured in the workbook), low /
    high (a score's interval), ratio (a share: % in the workbook); ``block`` which columns it belongs with:
    '' every view, '*' the pooled ones, a judge's name, or GPT4 (the comparison with the GPT-4 judge)."""

    name: str
    kind: Literal["text", "count", "score", "low", "high", "ratio"]
    block: str


@dataclass
class Board:
    """The wide leaderboard of one tag: ``rows`` in rank order, one value per column (None: missing)."""

    tag: str
    columns: list[Column]
    rows: list[list]
    family: bool = False
    judges: list[str] = field(default_factory=list)  # in column order
    notes: list[str] = field(default_factory=list)  # the family members left out; what --as-published counted

    @property
    def header(self) -> list[str]:
        return [c.name for c in self.columns]

    def select(self, judges: str) -> Board:
        """The columns of ``judges``: 'pooled', 'all', or judge names or titles, comma-separated (their blocks
        after the pooled ones). Anything else is a UsageError naming the judges there are."""
        wanted = judges.strip()
        pooled = {"", *(c.block for c in self.columns if c.block.startswith("*"))}  # every prompt set's pool
        if wanted.lower() == "all":
            blocks = None
        elif wanted.lower() == "pooled":
            blocks = pooled
        else:
            names = {n.lower(): j for j in self.judges for n in (j, judge_title(j))}
            asked = [n.strip() for n in wanted.split(",") if n.strip()]
            unknown = [n for n in asked if n.lower() not in names]
            if unknown or not asked:
                there = ", ".join(f"{j} ({judge_title(j)})" if judge_title(j) != j else j for j in self.judges)
                raise UsageError(f"--judges {', '.join(unknown) or repr(judges)}: not a judge of tag {self.tag!r}; "
                                 f"give pooled, all or judges among: {there or 'none'}")
            blocks = pooled | {names[n.lower()] for n in asked}
        keep = [i for i, c in enumerate(self.columns) if blocks is None or c.block in blocks]
        return Board(self.tag, [self.columns[i] for i in keep], [[NonFinite.of(r[i]) for i in keep] for r in self.rows],
                     self.family, self.judges, self.notes)

    def split(self) -> list[tuple[str, Board]]:
        """The board as one table per block, for a terminal: every judge's block on its own (titled by the judge,
        its columns named without it), each beside the columns that say whose a row is (model, Tag, Prompts),
        so that ``--judges all`` fits a terminal's width; a board of the pooled block alone stays one table."""
        who = [i for i, c in enumerate(self.columns) if c.block == "" and c.kind == "text"
               and c.name in ("model_name", "Tag", "Prompts")]
        blocks = list(dict.fromkeys(c.block for c in self.columns if c.block not in ("", "*", GPT4)))
        if not blocks:
            return [("", self)]
        pooled = [i for i, c in enumerate(self.columns) if c.block in ("", "*")]
        parts = [("All (each row's judges pooled)", "*", pooled)]
        parts += [(f"{judge_title(j)} ({j})" if judge_title(j) != j else j, j,
                   who + [i for i, c in enumerate(self.columns) if c.block == j]) for j in blocks]
        if gpt4 := [i for i, c in enumerate(self.columns) if c.block == GPT4]:
            parts.append(("GPT4 comparison", GPT4, who + gpt4))
        tables = []
        for title, block, keep in parts:
            suffix = f" ({judge_title(block)})"  # the table's title names the judge: its columns need not
            columns = [c._replace(name=c.name.replace(suffix, "")) if c.block == block else c
                       for c in (self.columns[i] for i in keep)]
            tables.append((title, Board(self.tag, columns, [[r[i] for i in keep] for r in self.rows], self.family,
                                        self.judges, self.notes)))
        return tables

    def text(self) -> tuple[list[str], list[list[str]]]:
        """Header and cells for a terminal or Markdown table: numbers to two decimals, shares (% JA, GPT4
        delta) in per cent, a family's interval in its score's cell (``6.12 ± 0.31``, or ``9.80 (9.10–10.00)``
        when clipped at the scale's end; its own columns dropped)."""
        at = {c.name: i for i, c in enumerate(self.columns)}
        shown = [i for i, c in enumerate(self.columns) if c.kind not in ("low", "high")]
        cells = []
        for row in self.rows:
            line = []
            for i in shown:
                value, column = row[i], self.columns[i]
                high = row[at[f"{column.name} CI high"]] if f"{column.name} CI high" in at else None
                if value is None:
                    line.append("")
                elif isinstance(value, int | str) or not math.isfinite(value):  # inf: as every format shows it
                    line.append(str(NonFinite.of(value)))
                elif column.kind == "ratio":  # a share, as the workbook shows it
                    line.append(f"{value:.1%}")
                elif high is not None:  # an interval clipped at the scale's end is not symmetric
                    low = row[at[f"{column.name} CI low"]]
                    line.append(f"{value:.2f} ± {high - value:.2f}" if abs(high + low - 2 * value) < 1e-9
                                else f"{value:.2f} ({low:.2f}–{high:.2f})")
                else:  # a 1e308 --as-published counted: its digits, not 300 of them
                    line.append(f"{value:.2f}" if abs(value) < 1e9 else f"{value:.4g}")
            cells.append(line)
        return [self.columns[i].name for i in shown], cells


# Every judged row as the original tooling read it is published_rows(AS_PUBLISHED_MARK) (sql/016_published.sql).
# Averaged in DOUBLE, as pandas did: a 1e308 it counted is no error.


def published_mean(values: Iterable[float | None]) -> float | None:
    """The mean of ``values`` (None skipped; None for none) as --as-published takes it, the one rule of every format
    and of the import report: the exact sum rounded once to a double (inf beyond its range), divided by the count;
    an inf among the values makes it inf, inf and -inf nan. Independent of their order.

    Each value is the score as pandas held it (× ``to_ten`` in doubles, as the original multiplied ELYZA's column by
    2 before averaging: 1e308 × 2 is inf). That is pandas' ``groupby(...).score.mean()`` to the last bit wherever its
    sum does not overflow midway. Where it does, pandas' answer depends on the order and layout of its frame (1e308,
    1e308, -1e308 first in a file of 40: 2.5e306 from the file alone, nan once the frame holds a NaN or other models'
    rows), and a DuckDB ``avg`` gave inf or 2.5e306 by the plan's order, so formats and the import report disagreed;
    here it is 2.5e306 everywhere. The Averages of these means are ``published_mean`` too (pandas' ``mean(axis=1)``).
    """
    present = [float(v) for v in values if v is not None]
    if not present:
        return None
    if not all(math.isfinite(v) for v in present):
        total = sum(v for v in present if not math.isfinite(v))  # inf, -inf, or nan (inf + -inf), as pandas sums
    else:
        try:
            total = math.fsum(present)
        except OverflowError:  # a partial sum beyond the doubles (1e308 + 1e308): the exact sum, rounded once
            exact = sum(map(Fraction, present), Fraction(0))
            try:
                total = float(exact)
            except OverflowError:
                total = math.copysign(math.inf, exact)
    return total / len(present)


def _published_means(con: duckdb.DuckDBPyConnection, tags: list[str] | None = None
                     ) -> dict[tuple[str, str, str, str], float]:
    """(tag, model, judge or '*', benchmark) -> ``published_mean`` of the rows --as-published counts, each the value
    pandas averaged (the score × ``to_ten`` in doubles: ELYZA's × 2 of a 1e308 is inf); '*' pools every judge's
    rows of its prompt set (``pooled_judge``). Computed here alone: the board, in every format, and the import
    report read these numbers."""
    values: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for tag, model, judge, benchmark, published, to_ten in con.execute(
            query("leaderboard.published"), {"tags": tags, "mark": AS_PUBLISHED_MARK}).fetchall():
        scaled = [v * to_ten for v in published]  # in Python's doubles: an overflow is inf, never an error
        values[(tag, model, judge, benchmark)] += scaled
        name, sep, label = judge.rpartition(" [")  # the pool of its prompt set, as pooled_judge makes it
        values[(tag, model, f"* [{label}" if sep and name else "*", benchmark)] += scaled
    return {key: mean for key, found in values.items() if (mean := published_mean(found)) is not None}


def published_differences(results_dir: Path, run_ids: list[str]) -> list[tuple[str, str, str, float, float]]:
    """(model, judge, benchmark title, score counting each question once, score as published) wherever the two
    differ, for these runs; the published score is the board's (``_published_means``), to the last bit."""
    con = connect(results_dir, None, run_ids, upto="score_means")
    published = _published_means(con)
    return [(model, judge, title, ours, theirs) for tag, model, judge, benchmark, title, ours in con.execute(
        query("leaderboard.own_scores")).fetchall()
        if (theirs := published.get((tag, model, judge, benchmark))) is not None
        and not abs(theirs - ours) <= 1e-12]  # inf and nan differ


class _Stat(NamedTuple):
    mean: float
    low: float | None = None
    high: float | None = None
    runs: int = 1


def leaderboard(results_dir: Path, tag: str | list[str] = "legacy", as_published: bool = False
                ) -> tuple[list[str], list[list]]:
    """The wide table (every column) of ``board``: header and rows."""
    found = board(results_dir, tag, as_published)
    return found.header, found.rows


def board(results_dir: Path, tag: str | list[str] = "legacy", as_published: bool = False) -> Board:
    """The leaderboard of the runs tagged ``tag``, or of the family ``{tag}-run1 … N`` (module docstring); several
    tags rank their rows together, a ``Tag`` column saying whose each is."""
    con = duckdb.connect()
    runs: list[RunRef] = []
    families: set[tuple[str, str]] = set()  # (tag, model) ranked as a family {tag}-run1 … N
    ranked: dict[tuple[str, str], None] = {}  # (tag, model): a row each, in the order the tags were given
    for text in dict.fromkeys([tag] if isinstance(tag, str) else tag):
        for t, model in [(s.tag, s.model) for s in parse_selectors(results_dir, text)]:
            try:  # per model: its run tagged so, or its family (selection.select_runs, as every reader)
                chosen = select(results_dir, Selector(t, model), con=con)
            except UsageError:
                require_root(results_dir)
                if model is not None or "@" in t.strip("@"):  # select named both readings of a MODEL@TAG
                    raise
                hint = "; rank your runs with --tag TAG, or import a tree with: shaberi import-legacy PATH" \
                    if t == "legacy" else ""
                raise UsageError(f"no runs tagged {t!r} (nor {t}-run1 … N) under {results_dir}; "
                                 f"{tags_there(results_dir, con)}{hint}") from None
            if as_published and chosen.families:
                raise UsageError(f"--as-published counts the rows of imported legacy files; {t!r} is a run family, "
                                 "ranked from multi_run_stats")
            runs += chosen.runs
            families |= {(t, m) for m in chosen.families}
            ranked |= dict.fromkeys((t, m) for m in sorted(chosen.models))
    tags = list(dict.fromkeys(t for t, _ in ranked))
    family = bool(families)
    connect(results_dir, None, list(dict.fromkeys(r.run_id for r in runs)),
            upto="multi_run_stats" if family else "score_means", con=con, cache=("runs",))  # runs: read 3 times
    scores: dict[tuple[str, str, str, str], _Stat] = {}  # (tag, model, judge, benchmark)
    judged: set[tuple[str, str, str]] = set()  # (tag, model, judge)
    notes: list[str] = []
    if family:
        family_tags = sorted({t for t, _ in families})
        scores |= {(t, m, j, b): _Stat(s, lo, hi, n) for t, m, j, b, s, lo, hi, n in con.execute(
            query("leaderboard.family_stats"), {"tags": family_tags}).fetchall()
            if (t, m) in families}
        judged |= {(t, m, j) for t, m, j in con.execute(query("leaderboard.family_judges"),
                                                        {"tags": family_tags}).fetchall()
            if (t, m) in families}
        notes = [f"{model}: {member} left out ({'; '.join(why)})" for base, model, member, why in con.execute(
            query("leaderboard.left_out"), {"tags": family_tags}).fetchall() if (base, model) in families]
    if singles := [k for k in ranked if k not in families]:
        single_tags = sorted({t for t, _ in singles})
        found = _published_means(con, single_tags).items() if as_published else (
            ((t, m, j, b), sc) for t, m, j, b, sc in con.execute(query("leaderboard.single_scores"),
                                                                  {"tags": single_tags}).fetchall())
        single = {(t, m, j, b): _Stat(sc) for (t, m, j, b), sc in found if sc is not None and (t, m) in singles}
        scores |= single
        judged |= {(t, m, j) for t, m, j, b in single if not j.startswith("*")}
    if as_published:
        notes.append(_published_note(con, sorted({t for t, _ in singles})))
    imported = set(con.execute(query("leaderboard.imported")).fetchall())
    rows_of, cells_of, judges_of = _by_prompt_set(ranked, imported, scores, judged)
    prompt_sets = list(dict.fromkeys(p for _, _, p in rows_of))
    labelled = len(prompt_sets) > 1 or prompt_sets[0] not in (SHABERI_PROMPTS, UNNAMED_PROMPTS)
    if len(prompt_sets) > 1:
        notes.append(f"rows judged under {len(prompt_sets)} prompt sets ({', '.join(prompt_sets)}) share the judge "
                     "columns, each row's Prompts saying which; a row's (All) pools its own prompt set's judges only")
    # An Average of the published means: published_mean, as every published number (a 1e308 the original counted
    # is beyond score_mean's decimals); otherwise score_mean, the one rule of every view (all asked at once).
    means_of = (lambda groups: [published_mean(g) for g in groups]) if as_published else score_means
    judges = sorted({j for _, j in judges_of}, key=judge_title)
    gpt4 = any(judge_title(j) == GPT4 for j in judges)
    board_columns = columns()  # read once: the same columns for every row

    def score(name: str, block: str) -> list[Column]:
        scored = [Column(name, "score", block)]
        return [*scored, Column(f"{name} CI low", "low", block), Column(f"{name} CI high", "high", block)] \
            if family else scored

    head = [Column("model_name", "text", ""), *([Column("Tag", "text", "")] if len(tags) > 1 else []),
            *([Column("Prompts", "text", "")] if labelled else []), *([Column("Runs", "count", "")] if family else []),
            Column("Judges", "count", ""), *([Column("Average (ex-GPT4)", "score", GPT4)] if gpt4 else [])]
    for j in ["*", *judges]:
        title = judge_title(j)
        head += [Column(f"Runs ({title})", "count", j)] if family and j != "*" else []
        head += score(f"Average ({title})", j)
        for _, t in board_columns:
            head += score(f"{t} ({title})", j)
    head += [*([Column("GPT4 delta", "ratio", GPT4)] if gpt4 else []), Column("% JA", "ratio", ""),
             Column("JA-MT questions", "text", ""), Column("Complete", "text", "")]
    # per tag, then per family (its members' answers, overriding a tag of the same name as before)
    ja = {(t, m): v for _, t, m, v in con.execute(query("leaderboard.japanese_share")).fetchall()}

    has_of: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for k, _, b in cells_of:
        has_of[k].add(b)
    judge_count: dict[tuple[str, str, str], int] = defaultdict(int)
    for k, _ in judges_of:
        judge_count[k] += 1

    def shown_of(key: tuple[str, str, str]) -> tuple[str, list[str]]:
        """The original read whatever file its MT-Bench folder held, for some models the older 80-question set:
        JA-MT shows the 60-question score, or the 80-question one where that is all a model has."""
        has = has_of[key]
        ja_mt = "mt_bench" if "mt_bench" in has or "mt_bench_80" not in has else "mt_bench_80"
        return ja_mt, [ja_mt if b == "mt_bench" else b for b, _ in board_columns]

    shown_at = {key: shown_of(key) for key in rows_of}
    # a single run's block Average is the mean of its cells (score_mean: as run_scores computes it, the same number)
    plain = [(key, j) for key in rows_of if key[:2] not in families for j in ["*", *judges]]
    block_mean = dict(zip(plain, means_of([[s.mean for b in shown_at[key][1] if (s := cells_of.get((key, j, b)))]
                                           for key, j in plain]), strict=True))

    def block(key: tuple[str, str, str], judge: str) -> tuple[list, float | None, int]:
        """The block's cells, its Average and how many runs count."""
        stats = [cells_of.get((key, judge, b)) for b in shown_at[key][1]]
        if key[:2] in families:
            average = cells_of.get((key, judge, "overall"))
            runs = average.runs if average else max((s.runs for s in stats if s), default=0)
            cells = [v for s in [average, *stats] for v in ((s.mean, s.low, s.high) if s else (None,) * 3)]
            return cells, average.mean if average else None, runs
        mean = block_mean[key, judge]
        values = [mean, *(s.mean if s else None for s in stats)]
        return [v for x in values for v in ((x, None, None) if family else (x,))], mean, 1

    rows: list[list] = []
    ex_gpt4_of: list[tuple[list, list[float], float | None]] = []  # (row, the Averages it takes, GPT4's)
    for key in rows_of:
        t, model, prompts = key
        ja_mt, shown = shown_at[key]
        pooled, mean_all, runs_all = block(key, "*")
        averages = {"All": mean_all}
        row: list = [model, *([t] if len(tags) > 1 else []), *([prompts] if labelled else []),
                     *([runs_all] if family else []), judge_count[key]]
        row += [None] if gpt4 else []
        row += pooled
        for j in judges:
            cells, averages[judge_title(j)], runs_j = block(key, j)
            row += [runs_j, *cells] if family else cells
        complete = sum(cells_of.get((key, "*", b)) is not None for b in shown)
        if gpt4:
            # As the original computed them: the mean of every Average column whose name lacks "GPT4" (so
            # GPT4.1 is left out too), "All" included; and its difference from GPT4's, relative to it.
            others = [v for title, v in averages.items() if GPT4 not in title and v is not None]
            ex_gpt4_of.append((row, others, averages.get(GPT4)))
            row += [None]  # GPT4 delta, below
        questions = {"mt_bench": "60", "mt_bench_80": "80"}.get(ja_mt) if ja_mt in has_of[key] else ""
        row += [ja.get((t, model)), questions, f"{complete}/{len(board_columns)}"]
        rows.append(row)
    if gpt4:
        at, delta_at = head.index(Column("Average (ex-GPT4)", "score", GPT4)), head.index(Column("GPT4 delta",
                                                                                                "ratio", GPT4))
        for (row, _, base), ex_gpt4 in zip(ex_gpt4_of, means_of(o if len(o) > 1 else [] for _, o, _ in ex_gpt4_of),
                                           strict=True):  # "All" alone is no judge
            row[at] = ex_gpt4
            row[delta_at] = (ex_gpt4 - base) / base if base and ex_gpt4 is not None else None
    # Complete rows first: an average over fewer benchmarks does not rank against one over all four. Ranked by
    # Average (All): each row's own pool (a row's Prompts says which prompt set it is).
    average_at = [c.name for c in head].index("Average (All)")

    def rank(r: list) -> tuple[bool, bool, float]:  # a nan Average last, as pandas sorts
        average = r[average_at] or 0
        return r[-1] != f"{len(board_columns)}/{len(board_columns)}", math.isnan(average), \
            0 if math.isnan(average) else -average

    rows.sort(key=rank)
    return Board(", ".join(tags), head, rows, family, judges, notes)


# What a row's Prompts says when its judges carry no prompt set's label: a run's are Shaberi's own prompts, an
# imported tree's are not known (``import-legacy`` without ``--judge-prompts``).
SHABERI_PROMPTS, UNNAMED_PROMPTS = "shaberi", "unknown"


def _by_prompt_set(ranked: dict[tuple[str, str], None], imported: set[tuple[str, str]],
                   scores: dict[tuple[str, str, str, str], _Stat], judged: set[tuple[str, str, str]]
                   ) -> tuple[list[tuple[str, str, str]], dict[tuple[tuple[str, str, str], str, str], _Stat],
                              set[tuple[tuple[str, str, str], str]]]:
    """Rows by (tag, model, prompt set) and columns by judge name: a judge's judgements under another prompt set
    (``gpt-4.1 [original:8578939]``, ``* [original:8578939]`` for its pool: ``judging.promptsets``) go in the
    judge's own columns, on a row of their own labelled with the set, so that a new run judged with the
    original's prompts ranks among imported results, and no pool mixes two sets (``pooled_judge``)."""

    def split(t: str, m: str, judge: str) -> tuple[tuple[str, str, str], str]:
        name, sep, label = judge.rpartition(" [")
        if sep and label.endswith("]"):
            return (t, m, label[:-1]), name
        return (t, m, UNNAMED_PROMPTS if (t, m) in imported else SHABERI_PROMPTS), judge

    by_set = {(*split(t, m, j), b): v for (t, m, j, b), v in scores.items()}
    judged_by_set = {split(t, m, j) for t, m, j in judged}
    found = {k for k, _, _ in by_set} | {k for k, _ in judged_by_set}
    order = {tm: i for i, tm in enumerate(ranked)}
    rows = sorted(found, key=lambda k: (order[k[:2]], k[2]))
    scored = {k[:2] for k in found}
    rows += [(t, m, UNNAMED_PROMPTS if (t, m) in imported else SHABERI_PROMPTS)  # a ranked model with no score
             for t, m in ranked if (t, m) not in scored]
    return rows, by_set, judged_by_set


def _published_note(con: duckdb.DuckDBPyConnection, tags: list[str]) -> str:
    """The one line saying how many set-aside legacy scores --as-published counted, as the original did."""
    row = con.execute(query("leaderboard.published_note"), {"tags": tags, "mark": AS_PUBLISHED_MARK}).fetchone()
    outside, counted = row if row else (0, 0)
    others = f" and {counted - outside:,} that are no number (true as 1, numeric text as its number)" \
        if counted > outside else ""
    return (f"--as-published counts {outside:,} score{'' if outside == 1 else 's'} outside their benchmark's judging "
            f"scale{others}, as the original tooling averaged them; the default leaderboard sets them aside")


def output_format(fmt: str | None, out: Path | None) -> str:
    """The format to write: ``fmt`` (one of FORMATS), else the suffix of ``out``, else table. A workbook needs a
    file, a terminal table needs a terminal, and a format the file name contradicts is refused."""
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(map(repr, FORMATS))}")
    suffix = out.suffix.lower() if out is not None else ""
    implied = _SUFFIXES.get(suffix)
    if out is not None and fmt is None and implied is None:
        raise UsageError(f"--out {out}: name a .xlsx, .csv, .json or .md file, or say which with --format")
    if fmt is not None and implied is not None and fmt != implied:
        raise UsageError(f"--format {fmt} and --out {out} disagree: a {suffix} file holds {implied}")
    chosen = fmt or implied or "table"
    if chosen == "xlsx" and out is None:
        raise UsageError("--format xlsx writes a workbook: name it with --out (e.g. --out board.xlsx)")
    if chosen == "table" and out is not None:
        raise UsageError("--format table is for the terminal; --out writes xlsx, csv, json or markdown")
    return chosen


def write_xlsx(path: Path, shown: Board) -> Path:
    """The board as a workbook (module docstring): header, frozen panes, fitted widths, numbers as numbers,
    missing values empty, a 3-colour scale over each score column."""
    import xlsxwriter  # type: ignore[import-untyped]  # no type information published

    def write(tmp: Path) -> None:
        book = xlsxwriter.Workbook(str(tmp))
        sheet = book.add_worksheet("Leaderboard")
        formats = {"header": book.add_format({"bold": True, "bg_color": "#DDE8CB", "text_wrap": True,
                                              "valign": "top"}),
                   "text": book.add_format({"bold": True}), "score": book.add_format({"num_format": "0.00"}),
                   "ratio": book.add_format({"num_format": "0.0%"}), "count": None}
        formats["low"] = formats["high"] = formats["score"]
        best = book.add_format({"bold": True, "font_color": "#127622"})  # the original's mark of a column's best
        rendered = {"score": "{:.2f}", "low": "{:.2f}", "high": "{:.2f}", "ratio": "{:.1%}"}
        for col, column in enumerate(shown.columns):
            sheet.write_string(0, col, column.name, formats["header"])
            width = len(column.name) if column.kind == "text" else max(min(len(column.name), 14), 6)
            cell_format = formats[column.kind] if column.kind != "text" or col == 0 else None
            for n, row in enumerate(shown.rows, start=1):
                value = NonFinite.of(row[col])  # inf as its text, as every format shows it
                if value is None or value == "":
                    continue  # an empty cell, not a zero or an empty string
                if isinstance(value, str) and value.isdigit():  # JA-MT questions: 60 or 80, a number
                    sheet.write_number(n, col, int(value), cell_format)
                elif isinstance(value, str):
                    sheet.write_string(n, col, value, cell_format)
                    width = max(width, len(value))
                else:
                    sheet.write_number(n, col, value, cell_format)
                    width = max(width, len(rendered.get(column.kind, "{}").format(value)))
            sheet.set_column(col, col, min(width, 60) + 2)
            if column.kind == "score" and shown.rows:
                sheet.conditional_format(1, col, len(shown.rows), col, dict(COLOR_SCALE))
                sheet.conditional_format(1, col, len(shown.rows), col, {"type": "top", "value": 1, "format": best})
        sheet.freeze_panes(1, 1)
        book.close()

    return write_atomic(path, write)
