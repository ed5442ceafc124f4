"""``shaberi report --tag T [--compare T2] --out report.html``: one self-contained HTML file.

Per run: the score table with 95 % intervals (over questions for one run, Student t; over runs for a
``{tag}-runN`` family, from ``multi_run_stats``), a bar chart per benchmark with the intervals as
whiskers (inline SVG, both tags side by side), the biggest per-question movers between the two tags
with both answers and every judge's reply, and tokens and cost by stage. Everything is inline (CSS,
SVG, a few lines of script to sort tables): the file opens without a network. Partial runs read fine:
a benchmark that was not run says so, errored answers and legacy imports without judge replies are
shown as such. The page is ``templates/report.html.jinja``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import jinja2

from ..errors import UsageError
from ..resources import resource_dir
from ..status import effective, worst, writer_alive
from ..tables.selection import left_out, select_runs
from .inspector import Detail, Inspector

__all__ = ["write_report"]

MOVERS = 10


@dataclass
class Block:
    """One tag's scores: a single run or a run family."""

    tag: str
    model: str
    runs: list[str]
    status: str  # ok, partial, failed, running or interrupted (the worst of a family's)
    rows: list[dict] = field(default_factory=list)  # benchmark, title, score, low, high, n, null, errors, note
    tokens: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the numbers leave out


def _block(inspector: Inspector, tag: str, model: str | None) -> Block:
    chosen = select_runs(inspector.results_dir, tag, model)
    if len(chosen.models) > 1:  # one report is one model's: say so rather than show the first one alone
        raise UsageError(f"tag {tag!r} holds several models ({', '.join(chosen.models)}); choose one with --model")
    status = worst([effective(r.status, writer_alive(inspector.results_dir, r.run_id)) for r in chosen.runs])
    if not chosen.family:
        run = chosen.runs[0]
        block = Block(tag, run.model, [run.run_id], status)
        con = inspector.con(run.run_id)
        stats = con.execute("""
            WITH q AS (SELECT benchmark, question_id, avg(score_10) AS s FROM scores
                       WHERE run_id = $run AND strategy = '' AND sample_index = 0 GROUP BY ALL)
            SELECT benchmark, avg(s), stddev_samp(s), count(s), count(*) - count(s) FROM q GROUP BY 1""",
                            {"run": run.run_id}).fetchall()
        from scipy import stats as st

        by = {}
        for bench, mean, sd, n, null in stats:
            low = high = None
            if n and n > 1 and sd is not None:
                low, high = (float(x) for x in st.t.interval(0.95, n - 1, loc=mean, scale=sd / n ** 0.5))
            by[bench] = {"score": mean, "low": low, "high": high, "n": n, "null": null}
        errors = dict(con.execute("SELECT benchmark, count(error) FROM answers WHERE run_id = $run GROUP BY 1",
                                  {"run": run.run_id}).fetchall())
    else:
        block = Block(tag, chosen.runs[0].model, chosen.run_ids, status)
        con = inspector.con(*block.runs)
        by = {b: {"score": m, "low": lo, "high": hi, "n": n, "null": 0} for b, m, lo, hi, n in con.execute(
            "SELECT benchmark, mean, ci_low, ci_high, runs FROM multi_run_stats WHERE base_tag = $tag AND judge = '*' "
            "AND model = $model", {"tag": tag, "model": block.model}).fetchall()}
        errors = {}
        if excluded := left_out(con, "*", block.model):
            block.notes.append("left out, not every question answered and judged: "
                               + ", ".join(f"{t} ({', '.join(b)})" for _, t, b in excluded))
    lineage = {b: (n, stale, prompts) for b, n, stale, prompts in con.execute(  # what the scores leave out
        "SELECT benchmark, sum(n_not_judged), sum(n_stale), flatten(list(prompt_hashes)) FROM benchmark_scores "
        "WHERE list_contains($ids, run_id) AND judge = '*' GROUP BY 1", {"ids": block.runs}).fetchall()}
    for bench, title in con.execute("SELECT benchmark, title FROM benchmark_info WHERE in_overall OR benchmark IN "
                                    "(SELECT DISTINCT benchmark FROM answers) ORDER BY position").fetchall():
        got = by.get(bench)
        notes = ["not run" if got is None else ("no scores" if got["score"] is None else "")]
        not_judged, stale, prompts = lineage.get(bench, (0, 0, []))
        if not_judged:
            notes.append(f"{not_judged} not judged" + (f" ({stale} stale)" if stale else ""))
        if prompts:
            notes.append("judging prompt " + ", ".join(sorted(set(prompts))))
        note = "; ".join(n for n in notes if n)
        block.rows.append({"benchmark": bench, "title": title, **(got or {"score": None, "low": None, "high": None,
                                                                        "n": 0, "null": 0}),
                           "errors": errors.get(bench, 0), "note": note})
    cursor = con.execute("SELECT stage, sum(requests), sum(prompt_tokens), sum(completion_tokens), sum(cost_usd), "
                         "bool_and(priced) FROM cost WHERE list_contains($ids, run_id) GROUP BY 1 ORDER BY 1",
                         {"ids": block.runs})
    block.tokens = [dict(zip(["stage", "requests", "prompt", "completion", "cost", "priced"], r, strict=True))
                    for r in cursor.fetchall()]
    return block


def _movers(inspector: Inspector, a: Block, b: Block) -> tuple[list[tuple[dict, Detail, Detail]], str | None]:
    if len(a.runs) != 1 or len(b.runs) != 1:
        return [], "per-question movers need two single runs (not run families)"
    rows = inspector.rows(a.runs[0], sort="difference", compare_run=b.runs[0], limit=10**9)
    # A question that lost (or gained) its score altogether moved most: it left the average.
    changed = [r for r in rows if (r["score"] is None) != (r["other_score"] is None)]
    changed += [r for r in rows if r["difference"]][: max(0, MOVERS - len(changed))]
    found = [(r, inspector.detail(a.runs[0], r["benchmark"], r["question_id"]),
              inspector.detail(b.runs[0], r["benchmark"], r["question_id"])) for r in changed[:MOVERS]]
    return found, None if found else "no question scored differently"


def _chart(blocks: list[Block]) -> dict:
    """Geometry of the SVG bar chart: one group per benchmark, one bar per tag, 0–10 on x."""
    titles = {r["benchmark"]: r["title"] for b in blocks for r in b.rows}
    benchmarks = list(titles)
    by_block = [{r["benchmark"]: r for r in b.rows} for b in blocks]
    bar, gap, left, width = 14, 10, 150, 420
    groups = []
    for i, name in enumerate(benchmarks):
        title = titles[name]
        top = 10 + i * (len(blocks) * bar + gap)
        bars = []
        for k, block in enumerate(blocks):
            row = by_block[k].get(name, {})
            score = row.get("score")
            bars.append({"y": top + k * bar, "w": 0 if score is None else width * score / 10, "score": score,
                         "low": None if row.get("low") is None else left + width * row["low"] / 10,
                         "high": None if row.get("high") is None else left + width * row["high"] / 10,
                         "tag": block.tag, "k": k})
        groups.append({"title": title, "y": top, "bars": bars})
    height = 20 + len(benchmarks) * (len(blocks) * bar + gap)
    return {"groups": groups, "height": height, "left": left, "width": width, "bar": bar,
            "ticks": [{"x": left + width * t / 10, "label": t} for t in range(0, 11, 2)]}


def write_report(results_dir: Path, tag: str, out: Path, compare: str | None = None, model: str | None = None) -> Path:
    inspector = Inspector(results_dir, None, model)
    blocks = [_block(inspector, tag, model)]
    if compare:
        blocks.append(_block(inspector, compare, model or blocks[0].model))
    movers, movers_note = _movers(inspector, *blocks) if compare else ([], None)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(resource_dir("templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    html = env.get_template("report.html.jinja").render(
        blocks=blocks, chart=_chart(blocks), movers=movers, movers_note=movers_note, compare=compare,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), results_dir=str(results_dir))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
