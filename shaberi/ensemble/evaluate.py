"""quick-eval: strategies over a seeded sample of cached questions, graded, paired with the baseline.

Per dataset: the cache entry of the model (zero generation calls, ``entry``), a seeded sample of its questions
(``random.Random(f"{seed}:{dataset}")`` over the sorted question ids; a sample larger than the dataset is all of
it), every member answer graded (``grading``), each strategy's consensus answer for every sampled question
(``consensus``), graded too. The single-model baseline is sample 0 of the same entry, or of a separate entry
(``baseline``: e.g. a temperature-0 run cached the same way). Consensus answers and grades are stored in the
entry's tables (``answers`` rows with ``strategy`` set, ``judgements`` rows), keyed by what they depend on, so
evaluating again with another seed or sample size only computes what is new. The outcome is a plain
``result.Result`` (saved as JSON by the CLI) that ``gate`` and ``report`` read.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..errors import UsageError
from ..llm.client import LLM
from ..tables.store import Store
from . import cache
from .consensus import consensus as _consensus
from .entry import CachedEntry, sample_ids
from .gate import ALPHA
from .grading import Grading, grader_counts
from .result import DatasetOutcome, Result, accuracy
from .strategies import STRATEGIES

__all__ = ["quick_eval", "refuse_bad_request"]

# A vote's consensus answer costs nothing to make again: the journal is converted in large batches (32 MB at
# most), so an evaluation adds a part or two (and the free grades one per grading pass, ``Grading._write``), and a
# partition is compacted only once evaluations have left many (rewriting every member answer each time cost more
# than reading a few parts).
JOURNAL_ROWS = 100_000
COMPACT_PARTS = 8


def refuse_bad_request(strategies: list[str], sample: int, has_consensus: bool) -> None:
    """Bad input to an evaluation, refused before anything is read or graded."""
    if sample < 1:
        raise UsageError(f"--sample {sample} is out of range: it must be at least 1")
    if (needs := [s for s in strategies if STRATEGIES[s].templates]) and not has_consensus:
        raise UsageError(f"strategy {', '.join(needs)} calls a model: give --consensus-model MODEL[@BASE_URL]")


async def quick_eval(results_dir: Path, model: str, strategies: list[str], datasets: list[str], sample: int,
                     seed: int, *, n: int | None = None, temperature: float | None = None,
                     consensus: LLM | None = None, judge: LLM | None = None,
                     baseline: tuple[str, int | None, float | None] | None = None, alpha: float = ALPHA,
                     family_tests: int = 0, family: str = "", require_complete: bool = False) -> Result:
    """``baseline``: (model, n, temperature) of a separate cache entry whose sample 0 is the baseline.
    Datasets are evaluated concurrently: the consensus and judge clients' limits are shared by all of them.
    ``require_complete``: refuse (before anything is graded) a cache that cannot give ``sample`` questions
    (or all of them) with all N answers."""
    refuse_bad_request(strategies, sample, consensus is not None)
    store = Store(results_dir)
    result = Result(model, seed, sample, strategies, alpha=alpha, family_tests=family_tests, family=family)
    work = []
    for name in datasets:
        entry = cache.find(results_dir, model, name, n, temperature)
        base = cache.find(results_dir, baseline[0], name, baseline[1], baseline[2], baseline=True) if baseline \
            else None
        cached = CachedEntry(store, entry.run_id)
        if require_complete and (short := cached.short_of(entry, sample, seed)):
            raise UsageError(f"{name}: {short}; complete it with generate-cache (or drop --require-complete)")
        work.append((name, entry, base, cached))

    async def one(name: str, entry: cache.CacheEntry, base: cache.CacheEntry | None, cached: CachedEntry
                  ) -> DatasetOutcome:
        with store.lock(entry.run_id, f"quick-eval of {model!r} on {name!r}"):
            return await _dataset(store, entry, base, cached, strategies, sample, seed, consensus, judge)

    outcomes = await asyncio.gather(*(one(*w) for w in work))
    result.datasets = dict(zip(datasets, outcomes, strict=True))
    return result


async def _dataset(store: Store, entry: cache.CacheEntry, base: cache.CacheEntry | None, cached: CachedEntry,
                   strategies: list[str], sample: int, seed: int, consensus: LLM | None, judge: LLM | None
                   ) -> DatasetOutcome:
    ids = sample_ids([q for q in cached.questions if q in cached.members], sample, seed, entry.dataset)
    if not ids:
        raise UsageError(f"the cache {entry.run_id} holds no answers yet; run generate-cache again to fill it")
    grading = Grading(cached, judge)
    journal = store.journal(entry.run_id, batch_rows=JOURNAL_ROWS)
    try:
        members = {qid: cached.responses(qid) for qid in ids}
        width = max((len(r) for r in members.values()), default=0)
        await grading.grade([(qid, i, "", r) for qid in ids for i, r in enumerate(members[qid])], journal)
        outcome = DatasetOutcome(entry.run_id, width, ids, [], [], [])
        outcome.available, outcome.complete, outcome.asked = cached.coverage(entry.n, sample)
        outcome.questions = cached.size
        if base is not None and base.run_id != entry.run_id:  # its grades go to its own partition
            base_entry = CachedEntry(store, base.run_id)
            base_grading = Grading(base_entry, judge)
            with store.lock(base.run_id, f"quick-eval baseline {base.model!r}"):
                base_journal = store.journal(base.run_id)
                try:
                    await base_grading.grade([(qid, 0, "", (base_entry.responses(qid) or [None])[0])
                                              for qid in ids], base_journal)
                finally:
                    base_journal.close()
            base_grades = [base_grading.get(qid, 0, "") for qid in ids]
        else:
            base_grading = grading
            base_grades = [grading.get(qid, 0, "") for qid in ids]
        outcome.baseline = [g[0] for g in base_grades]
        outcome.baseline_attempted = [g[1] for g in base_grades]
        per_member = [[grading.get(qid, i, "")[0] for qid in ids if i < len(members[qid])] for i in range(width)]
        outcome.member_accuracy = [accuracy(m) for m in per_member]
        outcome.samples_mean = [accuracy([grading.get(qid, i, "")[0] for i in range(len(members[qid]))])
                                for qid in ids]
        for name in strategies:
            done = await _consensus(journal, cached, STRATEGIES[name](), ids, members, consensus, grading)
            await grading.grade([(qid, 0, name, done[qid]) for qid in ids], journal)
            grades = [grading.get(qid, 0, name) for qid in ids]
            outcome.strategies[name] = done.outcome
            done.outcome.correct, done.outcome.attempted = [g[0] for g in grades], [g[1] for g in grades]
    finally:
        journal.close()
    for table in ("answers", "judgements"):
        if len(store.parts(table, entry.run_id)) > COMPACT_PARTS:
            store.compact(table, entry.run_id)
    members.clear()
    cached.release_texts()  # before the counts open DuckDB beside them: 510 -> 451 MB at 60,160 answers
    separate = base.run_id if base is not None and base.run_id != entry.run_id else None
    outcome.graders = grader_counts(store, entry.run_id, ids, strategies, separate,
                                     grading.judges | (base_grading.judges if separate else {}))
    return outcome
