"""``shaberi leaderboard``: the original Shaberi table from the tables, for any tag (default ``legacy``).

Per model: ``Judges`` (how many judged it), ``Average (All)`` and the four benchmark columns pooled over
every judge's rows (``score_means`` judge ``*``: not a mean of per-judge means, as in the original),
then per judge ``Average (J)`` and its four columns; each Average is the mean of the four columns next
to it. ELYZA is × 2 and Tengu 61–65 are left out (the views do both). JA-MT is the 60-question set; a
model that only has the older 80-question set shows that instead, and ``JA-MT questions`` says which.
``Average (ex-GPT4)`` and ``GPT4 delta`` follow the original's arithmetic: the mean of every Average
column whose name does not contain "GPT4" (GPT4.1's is left out too; ``All`` is included), and its
difference from GPT4's relative to it.
``% JA`` is the share of Japanese characters (kana, kanji) among the letters of all of a
model's answers, summed from the counts stored with each answer (``shaberi/scripts.py``); the original
took it from whichever answer file it read first, so it can differ. ``JA-MT questions`` is empty for a
model with no MT-Bench at all. ``Complete`` counts the four benchmarks with a pooled score: complete rows
are ranked first, partial ones after them (their averages are over fewer benchmarks).
A question a legacy file repeats counts once; ``as_published`` counts every row, as the original tooling
did (the repeats are kept as superseded judgements, ``legacy.py``).
The command must answer in half a second on a 20-model tree: it defines only the views it needs and
shares one DuckDB database between finding the runs and reading them.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from .. import benchmarks as bm
from ..errors import UsageError
from ..tables.selection import find_runs
from ..tables.sql import connect

__all__ = ["JUDGE_TITLES", "columns", "leaderboard"]

# Column names of the original leaderboard for the judge folders it knew.
JUDGE_TITLES = {"gpt-4-turbo-preview": "GPT4", "gpt-4.1-2025-04-14": "GPT4.1", "gpt-5.1-2025-11-13": "GPT5.1",
                "llmjudge-athenev2": "AtheneV2", "llmjudge-llama33": "Llama 3.3", "llmjudge-tulu405": "Tulu405"}

GPT4 = "GPT4"


def columns() -> list[tuple[str, str]]:
    """(benchmark, column title) of the original leaderboard's benchmark columns, in its (alphabetical) order:
    ``leaderboard_column`` in data/datasets.toml."""
    return sorted(((name, entry["leaderboard_column"]) for name, entry in bm.registry().items()
                   if "leaderboard_column" in entry), key=lambda c: c[1])


# Every judged row as the original tooling read it: a legacy file's repeated rows included (superseded
# judgements of the same text), everything else as the lineage rule counts it.
_AS_PUBLISHED = """
    SELECT r.model, coalesce(h.judge, '*') AS judge, h.benchmark, avg(h.score * b.to_ten) AS score
    FROM judgement_history h JOIN runs r USING (run_id) JOIN benchmark_info b USING (benchmark)
    ANTI JOIN excluded_questions x ON x.benchmark = h.benchmark AND x.question_id = h.question_id
    WHERE h.strategy = '' AND (h.lineage = 'current' OR (h.parse_method = 'legacy' AND h.lineage = 'superseded'))
    GROUP BY GROUPING SETS ((r.model, h.judge, h.benchmark), (r.model, h.benchmark))"""


def published_differences(results_dir: Path, run_ids: list[str]) -> list[tuple[str, str, str, float, float]]:
    """(model, judge, benchmark title, score counting each question once, score as published) wherever the two
    differ, for these runs."""
    con = connect(results_dir, None, run_ids, upto="score_means")
    return con.execute(f"""
        SELECT r.model, s.judge, b.title, s.score, p.score FROM score_means s JOIN runs r USING (run_id)
        JOIN ({_AS_PUBLISHED}) p ON p.model = r.model AND p.judge = s.judge AND p.benchmark = s.benchmark
        JOIN benchmark_info b ON b.benchmark = s.benchmark
        WHERE abs(s.score - p.score) > 1e-12 ORDER BY r.model, s.judge = '*' DESC, s.judge, b.position""").fetchall()


def leaderboard(results_dir: Path, tag: str = "legacy", as_published: bool = False) -> tuple[list[str], list[list]]:
    con = duckdb.connect()
    runs = find_runs(results_dir, tag, match="tag", con=con)
    if not runs:
        members = sorted({r.tag for r in find_runs(results_dir, tag, match="family", con=con)})
        hint = (f"{tag!r} names the runs {', '.join(members[:3])}{' …' if len(members) > 3 else ''}: rank one of them "
                f"(--tag {members[0]})" if members else "import a tree with: shaberi import-legacy PATH")
        raise UsageError(f"no runs tagged {tag!r} under {results_dir}; {hint}")
    connect(results_dir, None, [r.run_id for r in runs], upto="score_means", con=con)
    query = _AS_PUBLISHED if as_published else (
        "SELECT r.model, s.judge, s.benchmark, s.score FROM score_means s JOIN runs r USING (run_id)")
    scores = {(m, j, b): s for m, j, b, s in con.execute(query).fetchall() if s is not None}
    judges = sorted({j for _, j, _ in scores if j != "*"}, key=lambda j: JUDGE_TITLES.get(j, j))
    board = columns()  # read once: the same columns for every row
    header = ["model_name", "Judges", "Average (ex-GPT4)", "Average (All)", *(f"{t} (All)" for _, t in board)]
    for j in judges:
        title = JUDGE_TITLES.get(j, j)
        header += [f"Average ({title})", *(f"{t} ({title})" for _, t in board)]
    header += ["GPT4 delta", "% JA", "JA-MT questions", "Complete"]
    ja = dict(con.execute(  # counted when each answer was written (shaberi/scripts.py)
        "SELECT model, sum(japanese_chars) / nullif(sum(letter_chars), 0) FROM answers GROUP BY model").fetchall())
    rows = []
    for model in sorted({r.model for r in runs}):
        # The original read whatever file its MT-Bench folder held, for some models the older 80-question
        # set: JA-MT shows the 60-question score, or the 80-question one where that is all a model has.
        has = {b for m, _, b in scores if m == model}
        ja_mt = "mt_bench" if "mt_bench" in has or "mt_bench_80" not in has else "mt_bench_80"
        shown = [ja_mt if b == "mt_bench" else b for b, _ in board]

        def block(judge: str, model: str = model, shown: list[str] = shown) -> list:
            values = [scores.get((model, judge, b)) for b in shown]
            present = [v for v in values if v is not None]
            return [sum(present) / len(present) if present else None, *values]

        pooled = block("*")
        averages = {"All": pooled[0]}
        row = [model, len({j for (m, j, _) in scores if m == model and j != "*"}), None, *pooled]
        for j in judges:
            values = block(j)
            averages[JUDGE_TITLES.get(j, j)] = values[0]
            row += values
        # As the original computed them: the mean of every Average column whose name lacks "GPT4" (so
        # GPT4.1 is left out too), "All" included; and its difference from GPT4's, relative to it.
        others = [v for title, v in averages.items() if GPT4 not in title and v is not None]
        row[2] = sum(others) / len(others) if len(others) > 1 else None  # "All" alone is no judge
        gpt4 = averages.get(GPT4)
        questions = {"mt_bench": "60", "mt_bench_80": "80"}.get(ja_mt) if ja_mt in has else ""
        complete = sum(v is not None for v in pooled[1:])
        row += [(row[2] - gpt4) / gpt4 if gpt4 and row[2] is not None else None, ja.get(model), questions,
                f"{complete}/{len(board)}"]
        rows.append(row)
    # Complete rows first: an average over fewer benchmarks does not rank against one over all four.
    rows.sort(key=lambda r: (r[-1] != f"{len(board)}/{len(board)}", -(r[3] or 0)))
    return header, rows
