"""``shaberi pairwise``: choose the pairs, judge them (``stage``), then fit ratings per benchmark and overall, with
the judge's position bias (``bias``) and the agreement with the absolute scores, all read from the views of
``sql/080_pairwise.sql``; the fit is stored (``pairwise_ratings``) for the report and the API.

Agreement: Spearman's rank correlation (scipy) between the runs' overall ratings and their absolute scores (every
judge pooled, the mean over the compared benchmarks), and the pairs the two order differently.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

from .. import benchmarks as bm
from ..errors import RunLockedError, UsageError
from ..judging import JudgeConfig
from ..llm.client import ChatClient, ClientConfig
from ..llm.endpoints import ModelAt, check_base_url, resolve_api_key
from ..llm.transport import Transport
from ..prompts import pairwise_hash
from ..tables.rows import pairwise_rating
from ..tables.sql import connect, query
from ..tables.store import Store, now_us
from .bias import Position, position
from .design import Design, against, all_pairs, sampled
from .ratings import Ratings, Verdict, fit
from .stage import PairwiseProgress, Scope, Side, Work, compared_benchmarks, judge_pairs, plan, sides

__all__ = ["Agreement", "PairwiseRequest", "Result", "planned", "prepare", "run", "summarize"]


@dataclass(frozen=True)
class PairwiseRequest:
    results_dir: Path
    tags: list[str]
    judge: ModelAt
    judge_api_key_env: str | None = None
    benchmarks: list[str] | None = None
    reference: str | None = None
    opponents: int | None = None
    seed: int = 0
    bootstrap: int = 1000
    client: ClientConfig = field(default_factory=ClientConfig)
    judging: JudgeConfig = field(default_factory=JudgeConfig)
    judge_prompts: str | None = None  # a folder laid out like prompts/judging/ (its pairwise.jinja)
    transport: Transport | None = None


@dataclass(frozen=True)
class Agreement:
    rho: float | None
    p_value: float | None
    runs: int  # with both a rating and a score
    disagree: list[tuple[str, str]]  # (tag rated higher, tag scored higher)
    scores: dict[str, float]


@dataclass
class Result:
    job: str
    sides: list[Side]
    design: Design
    progress: PairwiseProgress
    ratings: dict[str, Ratings] = field(default_factory=dict)  # benchmark ('*': all of them) -> ratings
    position: Position | None = None
    agreement: Agreement | None = None
    one_order: int = 0  # questions of the pairs with a verdict in one order only (not counted)
    no_order: int = 0  # ... in neither


def _design(req: PairwiseRequest, tags: list[str]) -> Design:
    if req.reference is not None and req.opponents is not None:
        raise UsageError("--reference and --opponents choose the pairs two different ways: give one of them")
    if req.reference is not None:
        return against(tags, req.reference)
    if req.opponents is not None:
        return sampled(tags, req.opponents, req.seed)
    return all_pairs(tags)


def prepare(req: PairwiseRequest) -> tuple[Store, list[Side], Design, Scope]:
    """Check the input, writing nothing: (store, sides, design, scope)."""
    check_base_url(req.judge.base_url, f"--judge {req.judge.name}@{req.judge.base_url}: its URL")
    if req.bootstrap < 0:
        raise UsageError(f"--bootstrap {req.bootstrap} must be 0 or more")
    store = Store(req.results_dir)
    chosen = sides(store, req.tags)
    design = _design(req, [s.tag for s in chosen])
    for name in req.benchmarks or list(bm.BENCHMARKS):
        pairwise_hash(name, req.judge_prompts)  # a benchmark without a pairwise template: one line, nothing written
    compared = compared_benchmarks(store, chosen, design, req.benchmarks)
    return store, chosen, design, Scope.of(chosen, design, req.judge.name, compared)


def planned(req: PairwiseRequest, store: Store, chosen: list[Side], design: Design) -> Work:
    """The comparisons still to make (under the job's lock: what a killed run of it journaled is stored by then)."""
    return plan(store, chosen, design, req.judge.name, req.benchmarks, req.judge_prompts)


async def run(req: PairwiseRequest) -> Result:
    """Judge what the design still needs, then fit and store the ratings. Raises UsageError before any write."""
    store, chosen, design, scope = prepare(req)
    job = scope.job
    key = resolve_api_key(req.judge.base_url, req.judge_api_key_env, "--judge-api-key-env")
    client = ChatClient(req.judge.base_url, key, req.client, transport=req.transport,
                        option=f"--judge {req.judge.name}@{req.judge.base_url}", key_option="--judge-api-key-env")
    client.models.add(req.judge.name)
    try:
        _recover_others(store, job)
        with store.lock(job, f"pairwise job {job} ({', '.join(req.tags)})"):
            work = planned(req, store, chosen, design)
            if work.items:  # nothing to ask: the endpoint need not even be up to fit the stored verdicts again
                await client.check()
                await judge_pairs(store, job, work, req.judge.name, client, req.judging)
            result = summarize(store, scope, chosen, design, work.progress, req.bootstrap, req.seed)
            _store_ratings(store, scope, result, design)
    finally:
        await client.aclose()
    return result


def _recover_others(store: Store, job: str) -> None:
    """Store what other pairwise jobs, killed mid-way, journaled (those whose lock is free), so that this job reuses
    their comparisons instead of paying for them again; a job still running stores its own."""
    base = store.state / "journal"
    for folder in sorted(base.glob("pairwise-*")) if base.is_dir() else []:
        if folder.name != job and any(folder.glob("*.jsonl")):
            with contextlib.suppress(RunLockedError), store.lock(folder.name, f"pairwise job {folder.name}"):
                pass  # taking the lock stores its journal


def summarize(store: Store, scope: Scope, chosen: list[Side], design: Design, progress: PairwiseProgress,
              bootstrap: int = 1000, seed: int = 0) -> Result:
    """Ratings per benchmark and overall, position bias and agreement, from the views, over the job's scope only."""
    from scipy import stats

    con = connect(store.root)
    runs = [s.run_id for s in chosen]
    tag = {s.run_id: s.tag for s in chosen}
    tags = [s.tag for s in chosen]
    anchor = tag[scope.anchor]
    rows = con.execute(query("pairwise.outcomes"), scope.params()).fetchall()
    verdicts: dict[str, list[Verdict]] = {}
    for benchmark, question, first, second, outcome, _ in rows:
        v = Verdict(f"{benchmark}/{question}", tag[first], tag[second], float(outcome))
        verdicts.setdefault(benchmark, []).append(v)
        verdicts.setdefault("*", []).append(v)
    result = Result(scope.job, chosen, design, progress)
    for benchmark, found in sorted(verdicts.items()):
        result.ratings[benchmark] = fit(tags, found, anchor, bootstrap, seed)
    for _, one, none in con.execute(query("pairwise.unsettled"), scope.params()).fetchall():
        result.one_order, result.no_order = result.one_order + one, result.no_order + none
    result.position = position(con, scope)
    compared = sorted({b for b in verdicts if b != "*"})
    by_run: dict[str, list[float]] = {}
    for run_id, _, score in con.execute(query("pairwise.scores"), {"runs": runs, "benchmarks": compared}).fetchall():
        by_run.setdefault(run_id, []).append(score)
    overall = result.ratings.get("*")
    if overall is not None:
        scores = {tag[r]: sum(v) / len(v) for r, v in by_run.items()}
        rated = {t: overall.rating[overall.tags.index(t)] for t in scores}
        both = sorted(t for t in scores if not math.isnan(rated[t]))
        rho = p = None
        x, y = [rated[t] for t in both], [scores[t] for t in both]
        if len(both) >= 3 and len(set(x)) > 1 and len(set(y)) > 1:  # else no rank correlation (scipy: nan, a warning)
            test = stats.spearmanr(x, y)
            rho, p = float(test.statistic), float(test.pvalue)
        disagree = [(x, y) if rated[x] > rated[y] else (y, x) for x, y in itertools.combinations(both, 2)
                    if (rated[x] - rated[y]) * (scores[x] - scores[y]) < 0]
        result.agreement = Agreement(rho, p, len(both), disagree, scores)
    return result


def _store_ratings(store: Store, scope: Scope, result: Result, design: Design) -> None:
    """One fit's rows, all with the fit's time and the job's scope: the view shows the latest fit whole."""
    run_of, stamp = {s.tag: s.run_id for s in result.sides}, now_us()
    opponents = {r: sorted({y for x, y in scope.pairs if x == r} | {x for x, y in scope.pairs if y == r})
                 for r in run_of.values()}
    rows = []
    for benchmark, r in result.ratings.items():
        for k, t in enumerate(r.tags):
            n = sum(r.comparisons[k])
            won = sum((rate or 0.0) * c for rate, c in zip(r.win_rate[k], r.comparisons[k], strict=True))
            rated = [None if math.isnan(v) else v for v in (r.rating[k], r.low[k], r.high[k])]
            rows.append(pairwise_rating(scope.job, scope.judge, benchmark, run_of[t], t, stamp, rating=rated[0],
                                        low=rated[1], high=rated[2], open_low=r.open_low[k], open_high=r.open_high[k],
                                        comparisons=n, win_rate=won / n if n else None,
                                        anchor=r.anchor, design=design.described, regularised=r.regularised,
                                        bootstrap=r.bootstrap, seed=r.seed, compared_with=opponents[run_of[t]],
                                        benchmarks=list(scope.benchmarks)))
    if rows:
        store.write_part("pairwise_ratings", scope.job, rows)
