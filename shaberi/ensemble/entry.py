"""One cache entry as quick-eval reads it: its questions, member answers (texts left in Arrow until asked for),
stored grades and consensus answers; and the seeded sample of its questions."""

from __future__ import annotations

import random
from collections import defaultdict
from functools import partial
from typing import Any, NamedTuple

from ..benchmarks import Question
from ..tables.rows import RunRecord, decoded
from ..tables.store import Store
from . import cache

__all__ = ["CachedEntry", "How", "sample_ids"]


class How(NamedTuple):
    """How a grade was made, part of its identity: a grade made otherwise is made again."""

    prompt_hash: str | None  # a judge-model grader: what the judge was asked ("<grader>:<hash>")
    grader_version: str | None  # a rule grader: its rules' version


def sample_ids(ids: list[str], sample: int, seed: int, dataset: str) -> list[str]:
    ordered = sorted(ids, key=lambda q: (len(q), q))  # natural order for numeric ids
    if sample >= len(ordered):
        return ordered
    return sorted(random.Random(f"{seed}:{dataset}").sample(ordered, sample), key=lambda q: (len(q), q))



class CachedEntry:
    """One cache entry's questions, member answers and stored grades and consensus answers."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.run_id = run_id
        self.questions = {q["question_id"]: Question(q["benchmark"], q["question_id"], q["turns"], q["reference"],
                                                     q["criteria"], q["category"], q["extra"])
                          for q in map(partial(decoded, "questions"), store.read("questions", run_id).to_pylist())}
        # member texts stay in Arrow until a sampled question asks for them (12,032 questions × 5 long answers
        # as Python strings would be half a gigabyte for a sample of 500)
        answers = store.read("answers", run_id, ["question_id", "sample_index", "strategy", "content", "error",
                                                 "request_hash"])
        self._texts = answers.column("content")
        self.members: dict[str, dict[int, int | None]] = defaultdict(dict)  # qid -> sample -> row (None: error)
        self.failed = 0  # member rows that are errors
        self.consensus: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        columns = [answers.column(c).to_pylist() for c in ("question_id", "sample_index", "strategy", "error",
                                                            "request_hash")]
        for row, (qid, index, strategy, error, request_hash) in enumerate(zip(*columns, strict=True)):
            if strategy:
                self.consensus[(qid, strategy)] = (request_hash, self._texts[row].as_py())
            else:
                self.members[qid][index] = None if error else row
                self.failed += bool(error)
        graded = store.read("judgements", run_id, ["question_id", "sample_index", "strategy", "judge", "answer_hash",
                                                   "prompt_hash", "grader_version", "score", "parse_method", "error",
                                                   "judge_output"])
        self.grades = {(qid, index, strategy, judge, a_hash, How(prompt, version)): (score, method, error, output)
                       for qid, index, strategy, judge, a_hash, prompt, version, score, method, error, output
                       in zip(*(c.to_pylist() for c in graded.columns), strict=True)}

        datasets = store.read("runs", run_id).to_pylist()
        provenance: dict[str, Any] = next(iter(RunRecord.of(datasets[0]).datasets.values()), {}) if datasets else {}
        self.size = max(int(provenance.get("rows") or 0), len(self.questions))  # the dataset's, --limit or not

    def release_texts(self) -> None:
        """Let go of the member texts, their memory given back to the system: what is left of an evaluation
        needs only grades."""
        import pyarrow as pa

        del self._texts  # ``responses`` fails loudly after this
        pa.default_memory_pool().release_unused()

    def responses(self, qid: str) -> list[str | None]:
        got = self.members.get(qid, {})
        rows = [got.get(i) for i in range(max(got) + 1)] if got else []
        return [None if row is None else self._texts[row].as_py() for row in rows]

    def whole(self, qid: str, n: int) -> bool:
        """Whether the question has all ``n`` answers, none an error."""
        got = self.members.get(qid, {})
        return all(got.get(i) is not None for i in range(n))

    def coverage(self, n: int, sample: int) -> tuple[int, int, int]:
        """(questions with some answer, with all ``n`` and none an error, asked for: ``sample`` or the whole
        dataset)."""
        return (sum(1 for q in self.questions if q in self.members),
                sum(1 for q in self.questions if self.whole(q, n)), min(sample, self.size))

    def short_of(self, entry: cache.CacheEntry, sample: int, seed: int) -> str | None:
        """Why this cache cannot give ``sample`` questions with all N answers (every question the seeded sample
        draws, and as many as asked), or None."""
        available, complete, asked = self.coverage(entry.n, sample)
        drawn = sample_ids([q for q in self.questions if q in self.members], sample, seed, entry.dataset)
        if len(drawn) >= asked and all(self.whole(q, entry.n) for q in drawn):
            return None
        short = sum(1 for q in drawn if not self.whole(q, entry.n))
        return (f"{asked:,} questions asked, the cache {entry.run_id} holds all {entry.n} answers for {complete:,} of "
                f"the dataset's {self.size:,} (some answer for {available:,}; {self.failed:,} answers are errors), "
                f"and {short:,} of the {len(drawn):,} the seed draws lack some")
