"""``shaberi report --tag T [--compare T2] --out report.html``: one self-contained HTML file that shows why a
score moved.

Per tag (one run, or a ``{tag}-run1 … N`` family):

- the scores table of ``shaberi view`` (the same numbers: ``reports.view.build``), with the Overall row,
  the score without passes and a 95 % interval (over questions for one run, Student t; over runs for a
  family, ``multi_run_stats``); with several judges, every judge's own table too;
- per-category scores (Tengu, MT-Bench and Rakuda carry categories; ELYZA has none upstream): the mean of
  the questions' scores (each question's mean over judges and runs) with its t-interval over questions;
- judge agreement when several judges scored the answers (``reports.agreement``);
- the distribution of the judgements' scores per benchmark (a histogram, 0–10 rounded) and, for a family,
  each run's score against the family's interval;
- pass effects: per pass, the answers it checked and changed, by how much, the biggest examples;
- tokens and cost by stage, with a total.

With ``--compare``: the same for the other tag, a chart of both, the table ``shaberi compare`` prints (its own code:
difference, interval, verdict, p-value, MDE, what was left out), and the biggest movers per question,
ranked within each benchmark on its own scale (ELYZA's 1–5 is not doubled against Tengu's 0–10), for runs
and families alike (a family's question score is its mean over runs, shown with each run's score), with
both sides' answers and every judge's reply. Movers use the judges both tags have.

Everything is inline (CSS, SVG, a few lines of script to sort tables): the file opens without a network.
The page is ``templates/report.html.jinja``; Japanese text uses a CJK font stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import jinja2

from ..errors import UsageError
from ..resources import resource_dir
from ..tables.selection import Selector, left_out, parse_selectors, select
from ..tables.sql import connect, query
from .agreement import Agreement, agreement, ratings
from .compare import compare as run_compare
from .compare import other_texts, parse_sides, select_side
from .inspector import Detail, Inspector
from .output import write_atomic
from .view import Section, build, rank

__all__ = ["write_report"]

MOVERS = 5  # per benchmark
EXAMPLES = 3  # per pass
TEXT = 1500  # characters of a prompt shown with a mover


@dataclass
class Table:
    """One judge's scores (or all judges pooled) for a tag, rows as ``shaberi view`` has them."""

    judge: str
    # benchmark, title, score, baseline, low, high, n, null, errors, not_judged, sd, min, max, note
    rows: list[dict[str, Any]]


@dataclass
class Block:
    """One tag: a single run or a run family."""

    tag: str
    model: str
    runs: list[str]
    run_tags: list[str]
    family: bool
    status: str
    judges: list[str]
    tables: list[Table]  # pooled first, then each judge's when there are several
    notes: list[str] = field(default_factory=list)
    pooled: list[str] = field(default_factory=list)  # the judges its analyses pool: the headline's prompt set
    categories: list[dict[str, Any]] = field(default_factory=list)  # title, category, score, low, high, n
    histograms: list[dict[str, Any]] = field(default_factory=list)  # title, counts[0..10], null, total, peak
    spread: list[dict[str, Any]] = field(default_factory=list)  # family: title, mean, low, high, values [(tag, score)]
    agreement: Agreement | None = None
    passes: list[dict[str, Any]] = field(default_factory=list)  # pass_name, checked, changed, mean, min, max, examples
    tokens: list[dict[str, Any]] = field(default_factory=list)  # stage … cost_usd; the last row is the Total
    all_runs: int = 0  # a family's members, those left out of ``runs`` included
    label: str = ""  # how the page names it beside the others: the tag, the model, or MODEL@TAG
    complete: bool = False  # every benchmark of the overall has a score (view's Section.complete)

    @property
    def overall(self) -> float | None:
        return next((r["score"] for r in self.tables[0].rows if r["benchmark"] == "overall"), None)


def _interval(mean: float | None, values: list[float]) -> tuple[float | None, float | None]:
    """The 95 % t-interval of a mean over ``values`` (None when it has no width to estimate)."""
    if mean is None or len(values) < 2:
        return None, None
    from scipy import stats

    sem = stats.sem(values)
    if not sem > 0:
        return mean, mean
    low, high = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=sem)
    return float(low), float(high)


def _table(section: Section, family: bool, titles: dict[str, str]) -> Table:
    """A scores table as ``view`` has it (``view --clustered-se``): one run's interval is over its questions; a
    family's over its runs (``low``, ``high``) and over questions × runs (``qlow``, ``qhigh``), both about the
    number shown."""
    rows = []
    for values in section.rows:
        c = dict(zip(section.columns, values, strict=True))
        row = {"title": c["benchmark"], "benchmark": titles.get(c["benchmark"], "overall"), "note": c["note"],
               "qlow": c["ci_questions_low"], "qhigh": c["ci_questions_high"]}
        if family:
            row |= {"score": c["mean"], "sd": c["std_dev"], "low": c["ci_low"], "high": c["ci_high"], "min": c["min"],
                    "max": c["max"], "n": c["runs"], "baseline": c["baseline_mean"], "null": None, "errors": None,
                    "not_judged": None}
        else:
            row |= {"score": c["score"], "baseline": c["baseline"], "n": c["n"], "null": c["null"],
                    "errors": c["errors"], "not_judged": c["not_judged"], "low": c["ci_questions_low"],
                    "high": c["ci_questions_high"], "sd": None, "min": None, "max": None}
        rows.append(row)
    return Table(section.judge, rows)


def _block(results_dir: Path, inspector: Inspector, tag: str, model: str) -> Block:
    """One model's runs of a tag (a tag holding several models gives a block per model)."""
    chosen = select(results_dir, Selector(tag, model))
    report = build(results_dir, tag, model=model, clustered=True, every_judge=True)
    con = inspector.con(*chosen.run_ids)
    titles = dict(con.execute(query("report.titles")).fetchall())
    judges = [j for (j,) in con.execute(query("report.judges"), {"ids": chosen.run_ids}).fetchall()]
    section = report.sections[0]
    # what the block's analyses pool: the judges of the headline's prompt set, never two sets in one number
    (pool,) = (section.judge,) if section.judge.startswith("*") else con.execute(
        query("report.pool_of"), {"j": section.judge}).fetchall()[0]
    pooled = [j for (j,) in con.execute(query("report.pooled"), {"ids": chosen.run_ids, "pool": pool}).fetchall()]
    tables = [_table(s, chosen.family, titles) for s in report.sections]
    # A family member that did less than the others is left out of the scores (view): of everything else too.
    excluded = {run_id for run_id, _, _ in left_out(con, "*", model)} if chosen.family else set()
    counted = [r for r in chosen.runs if r.run_id not in excluded]
    runs = [r.run_id for r in counted]
    block = Block(tag, model, runs, [r.tag for r in counted], chosen.family, section.status, judges, tables,
                  notes=list(section.notes), all_runs=len(chosen.runs), complete=section.complete)
    block.pooled = pooled
    block.categories = _categories(con, runs, pooled)
    block.histograms = _histograms(con, runs, pooled)
    block.spread = _spread(con, runs, tag, model, pool) if chosen.family else []
    if len(pooled) > 1:
        block.agreement = agreement([r for r in ratings(con, runs) if r[2] in pooled])
        named = {b: t for t, b in titles.items()}  # shown by title, as everywhere in the report
        block.agreement.alpha_by_benchmark = {named.get(b, b): v for b, v in block.agreement.alpha_by_benchmark.items()}
    block.passes = _passes(con, runs)
    names = ["model", "stage", "requests", "cached_requests", "prompt", "completion", "cost", "priced"]
    block.tokens = [dict(zip(names, r, strict=True)) for r in report.tokens]
    return block


def _histograms(con: duckdb.DuckDBPyConnection, run_ids: list[str], judges: list[str]) -> list[dict[str, Any]]:
    """Per benchmark: how many of these judges' judgements scored 0, 1, … 10 (rounded), how many have no score,
    and how many of those stand for answers that errored (never sent to a judge)."""
    counts: dict[str, list[int]] = {}
    for title, bin_, answer_error, n in con.execute(query("report.histograms"),
                                                    {"ids": run_ids, "judges": judges}).fetchall():
        bins = counts.setdefault(title, [0] * 13)  # 0–10, then the null scores, then the answer errors among them
        bins[11 if bin_ is None else min(max(bin_, 0), 10)] += n
        bins[12] += n if bin_ is None and answer_error else 0
    return [{"title": t, "counts": c[:11], "null": c[11], "answer_errors": c[12], "total": sum(c[:12]),
             "peak": max(c[:11])} for t, c in counts.items()]


def _spread(con: duckdb.DuckDBPyConnection, run_ids: list[str], tag: str, model: str, pool: str
           ) -> list[dict[str, Any]]:
    """A family's run-to-run spread: per benchmark (and Overall) each run's score, with the family's mean and
    interval over its complete runs."""
    rows = con.execute(query("report.spread"),
                       {"ids": run_ids, "tag": tag, "model": model, "pool": pool}).fetchall()
    return [{"title": t, "mean": m, "low": lo, "high": hi,
             "values": [(f"run{i}", v) for i, v in zip(idx, values, strict=True)]}
            for t, m, lo, hi, idx, values in rows]


def _categories(con: duckdb.DuckDBPyConnection, run_ids: list[str], judges: list[str] | None = None
               ) -> list[dict[str, Any]]:
    """Per benchmark and category: the ``category_scores`` rule (each question's mean over judges and runs first,
    then the mean over the questions), over these runs, and these judges only when given; with its t-interval over
    the questions."""
    out = []
    for title, category, mean, n, scores in con.execute(query("report.categories"),
                                                        {"ids": run_ids, "judges": judges}).fetchall():
        low, high = _interval(mean, scores)
        out.append({"title": title, "category": category, "score": mean, "low": low, "high": high, "n": n})
    return out


def _passes(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[dict[str, Any]]:
    """Per pass: the answers it checked as they are now (``pass_coverage``: a model that failed or gave no readable
    verdict checked nothing), those it changed, the change on the 0–10 scale."""
    out = []
    coverage = {name: (int(c), int(f), int(u)) for name, c, f, u in con.execute(
        query("report.pass_checked"), {"ids": run_ids}).fetchall()}  # what counts as checked
    for name, changed, mean, low, high in con.execute(query("report.pass_changes"), {"ids": run_ids}).fetchall():
        checked, model_failed, unreadable = coverage.get(name, (0, 0, 0))
        examples = con.execute(query("report.pass_examples"), {"ids": run_ids, "name": name, "n": EXAMPLES}).fetchall()
        out.append({"pass_name": name, "checked": checked, "model_failed": model_failed, "unreadable": unreadable,
                    "changed": changed, "mean": mean, "min": low, "max": high,
                    "examples": [dict(zip(["title", "question_id", "judge", "delta", "reason", "answer"], e,
                                          strict=True)) for e in examples]})
    return out


@dataclass
class Mover:
    benchmark: str
    title: str
    question_id: str
    a: float | None  # 0–10, the question's mean over runs (and judges)
    b: float | None
    to_ten: float
    a_runs: list[tuple[str, float | None]]  # each run's score
    b_runs: list[tuple[str, float | None]]
    prompt: str = ""
    a_details: list[tuple[str, Detail]] = field(default_factory=list)
    b_details: list[tuple[str, Detail]] = field(default_factory=list)

    @property
    def difference(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def native(self) -> float | None:
        """The difference on the benchmark's own scale."""
        return None if self.difference is None else self.difference / self.to_ten


def _movers(inspector: Inspector, a: Block, b: Block, overlap: Overlap) -> tuple[list[dict[str, Any]], list[str]]:
    """Per benchmark, the questions whose score moved most between the tags (those that lost or gained a score
    altogether first), and what the ranking rests on."""
    con = inspector.con(*a.runs, *b.runs)
    shared = sorted(set(a.judges) & set(b.judges))
    notes = [f"judges both tags have: {', '.join(shared)}" if shared else
             "the tags share no judge: each side's judges are used (not like for like)"]
    per_run = con.execute(query("report.question_scores"), {"ids": a.runs + b.runs, "judges": shared}).fetchall()
    info = {bench: (title, to_ten) for bench, title, to_ten in con.execute(query("report.benchmarks")).fetchall()}
    keys = overlap.same  # a question one tag never asked, or asked as another text, did not move
    if only := len(overlap.a ^ overlap.b):
        notes.append(f"{only} question{'s' if only > 1 else ''} asked by one side only left out")
    if n := len(overlap.other):
        notes.append(f"{n} question{'s' if n > 1 else ''} asked under one id with other texts "
                     "(other data files?) left out")
    score = {(r, bench, q): s for r, bench, q, s in per_run}
    tag_of = dict(zip(a.runs + b.runs, a.run_tags + b.run_tags, strict=True))
    groups: dict[str, list[Mover]] = {}
    for bench, q in keys:
        if bench not in info:
            continue
        sides = []
        for block in (a, b):
            runs = [(tag_of[r], score.get((r, bench, q))) for r in block.runs]
            present = [s for _, s in runs if s is not None]
            sides.append((runs, sum(present) / len(present) if present else None))
        (a_runs, a_mean), (b_runs, b_mean) = sides
        if a_mean is None and b_mean is None:
            continue
        groups.setdefault(bench, []).append(Mover(bench, info[bench][0], q, a_mean, b_mean, info[bench][1],
                                                  a_runs, b_runs))
    found = []
    for bench in (b for b in info if b in groups):
        ranked = sorted(groups[bench], key=lambda m: (
            (m.a is None) == (m.b is None), -abs(m.difference or 0), len(m.question_id), m.question_id))
        top = [m for m in ranked if m.difference is None or m.difference != 0][:MOVERS]
        for m in top:
            m.a_details = [(tag_of[r], inspector.detail(r, bench, m.question_id)) for r in a.runs]
            m.b_details = [(tag_of[r], inspector.detail(r, bench, m.question_id)) for r in b.runs]
            turns = m.a_details[0][1].turns or m.b_details[0][1].turns
            m.prompt = "\n\n".join(turns)[:TEXT]
        if top:
            found.append({"title": info[bench][0], "movers": top, "questions": len(groups[bench])})
    unscored = sorted({bench for bench, _ in keys if bench in info and bench not in groups},
                      key=list(info).index)  # asked by both, scored on neither side
    notes += [f"{info[bench][0]}: no question scored on either side" for bench in unscored]
    return found, notes


def _category_rows(blocks: list[Block]) -> list[dict[str, Any]]:
    """One row per benchmark and category with every tag's score side by side (and the change, comparing)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for k, block in enumerate(blocks):
        for c in block.categories:
            row = rows.setdefault((c["title"], c["category"]), {"title": c["title"], "category": c["category"],
                                                                "tags": [None] * len(blocks)})
            row["tags"][k] = c
    for row in rows.values():
        scores = [c["score"] for c in row["tags"] if c is not None]
        row["difference"] = scores[1] - scores[0] if len(scores) == 2 else None
    return list(rows.values())


@dataclass
class Overlap:
    """The (benchmark, question id) pairs each tag asked, and those asked with other texts (not one question)."""

    a: set[tuple[str, str]]
    b: set[tuple[str, str]]
    other: set[tuple[str, str]]

    @property
    def same(self) -> set[tuple[str, str]]:
        return (self.a & self.b) - self.other


def _overlap(inspector: Inspector, a: Block, b: Block) -> Overlap:
    con = inspector.con(*a.runs, *b.runs)

    def asked(run_ids: list[str]) -> set[tuple[str, str]]:
        return set(con.execute(query("report.asked"), {"ids": run_ids}).fetchall())

    return Overlap(asked(a.runs), asked(b.runs), other_texts(con, a.runs, b.runs))


def _unlike(a: Block, b: Block, overlap: Overlap) -> list[str]:
    """What makes two tags' own scores not like for like: other questions, other judges."""
    both = len(overlap.same)
    notes = []
    if not len(overlap.a) == len(overlap.b) == both:
        notes.append(f"{a.label} asked {len(overlap.a)} questions, {b.label} {len(overlap.b)}, {both} of them the "
                     "same")
    if a.judges != b.judges:
        notes.append(f"{a.label} was judged by {', '.join(a.judges) or 'no judge'}, {b.label} by "
                     f"{', '.join(b.judges) or 'no judge'}")
    return notes


def _chart(blocks: list[Block]) -> dict[str, Any]:
    """Geometry of the SVG bar chart: one group per benchmark (and Overall), one bar per tag, 0–10 on x."""
    titles = list(dict.fromkeys(r["title"] for b in blocks for r in b.tables[0].rows))
    by_block = [{r["title"]: r for r in b.tables[0].rows} for b in blocks]
    bar, gap, left, width = 14, 10, 150, 420
    groups = []
    for i, title in enumerate(titles):
        top = 10 + i * (len(blocks) * bar + gap)
        bars = []
        for k, block in enumerate(blocks):
            row = by_block[k].get(title, {})
            score = row.get("score")
            low, high = row.get("low"), row.get("high")  # drawn within the scale (a 2-run t-interval is wide)
            bars.append({"y": top + k * bar, "w": 0 if score is None else width * score / 10, "score": score,
                         "low": None if low is None else left + width * max(low, 0) / 10,
                         "high": None if high is None else left + width * min(high, 10) / 10,
                         "tag": block.label, "k": k})
        groups.append({"title": title, "y": top, "bars": bars})
    height = 20 + len(titles) * (len(blocks) * bar + gap)
    return {"groups": groups, "height": height, "left": left, "width": width, "bar": bar,
            "ticks": [{"x": left + width * t / 10, "label": t} for t in range(0, 11, 2)]}


def write_report(results_dir: Path, tag: str, out: Path, compare: str | None = None, model: str | None = None,
                 model_a: str | None = None, model_b: str | None = None) -> Path:
    """The report of ``tag`` (one block per model it holds, the best Overall first), or with ``compare``: side
    ``tag`` against side ``compare``, each a tag or MODEL@TAG of one model (``model`` for both, ``model_a`` /
    ``model_b`` for one), as ``shaberi compare`` names them."""
    if compare:
        sides = parse_sides(results_dir, tag, compare, model, model_a, model_b)
        chosen = [select_side(results_dir, side, n) for side, n in zip(sides, "AB", strict=True)]
        if chosen[0].run_ids == chosen[1].run_ids:
            raise UsageError(f"--compare {compare!r} is --tag itself: name another tag or model to compare with")
        wanted = [(side.tag, c.models[0]) for side, c in zip(sides, chosen, strict=True)]
    else:
        wanted = list(dict.fromkeys((s.tag, m) for s in parse_selectors(results_dir, tag, model)
                                    for m in select(results_dir, s).models))
    inspector = Inspector(results_dir, None, model)
    blocks = [_block(results_dir, inspector, t, m) for t, m in wanted]
    if not compare:
        blocks.sort(key=lambda b: (*rank(b.complete, b.overall), b.model))  # as view ranks them
    several_models = len({b.model for b in blocks}) > 1
    several_tags = len({b.tag for b in blocks}) > 1
    for block in blocks:  # what tells the blocks apart
        block.label = (block.model if not (compare or several_tags) else f"{block.model}@{block.tag}") \
            if several_models else block.tag
    movers: list[dict[str, Any]] = []
    movers_notes: list[str] = []
    unlike: list[str] = []
    comparison, comparison_error = None, None
    if compare:
        try:  # the table ``shaberi compare`` prints, from its own code
            comparison = run_compare(results_dir, *sides)
        except UsageError as exc:  # nothing in common to compare: the page says why, the rest still stands
            comparison_error = str(exc)
        overlap = _overlap(inspector, blocks[0], blocks[1])
        movers, movers_notes = _movers(inspector, blocks[0], blocks[1], overlap)
        unlike = _unlike(blocks[0], blocks[1], overlap)
    category_judges = None
    if compare and blocks[0].pooled != blocks[1].pooled and (shared := sorted(set(blocks[0].pooled)
                                                                              & set(blocks[1].pooled))):
        category_judges = shared  # the change between two tags is over the judges both have
        for block in blocks:
            block.categories = _categories(inspector.con(*block.runs), block.runs, shared)
    totals = [t for b in blocks for t in b.tokens if t["stage"] == "Total"]
    tag_total = {k: sum(t[k] or 0 for t in totals) for k in ("requests", "cached_requests", "prompt", "completion",
                                                              "cost")} | {"priced": all(t["priced"] for t in totals)} \
        if several_models and not compare and totals else None  # the tag's, said as such: never a silent sum
    title = f"{blocks[0].label} vs {blocks[1].label}" if compare else (
        f"{tag} ({len(blocks)} models)" if several_models else f"{blocks[0].model} · {tag}")
    head_to_head = []
    if (results_dir / "tables" / "pairwise_ratings").is_dir():  # a pairwise job's partition is its own, not a run's
        from ..pairwise.report import sections

        head_to_head = sections(connect(results_dir), [r for b in blocks for r in b.runs])
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(resource_dir("templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    html = env.get_template("report.html.jinja").render(
        blocks=blocks, chart=_chart(blocks), categories=_category_rows(blocks), category_judges=category_judges,
        movers=movers, movers_notes=movers_notes, unlike=unlike, compare=compare, title=title, tag_total=tag_total,
        head_to_head=head_to_head, comparison=comparison, comparison_error=comparison_error,
        comparison_table=comparison.table() if comparison else None,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), results_dir=str(results_dir))
    return write_atomic(out, lambda tmp: tmp.write_text(html, encoding="utf-8"))
