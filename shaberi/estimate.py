"""``shaberi run --dry-run``: the calls a run would make, their tokens and cost, without any call.

The calls are those the run would make now: stored answers and judgements are counted as reused by the
same decisions the stages take (``generate.plan_calls``, ``judge.pending``), so a fully judged tag plans
no judge call. An answer still to be generated (or retried) is one judge call per judge: its text is new.

Prompt tokens are estimated from the rendered prompts: one token per CJK character and one per four other
characters (no tokenizer runs offline: tiktoken downloads its encodings). Completion tokens use the mean
of this model's (or judge's) earlier answers in the results root when there are any, else a typical
length; the ``max_tokens`` bound is shown beside it. Prices come from the same table as the ``cost`` view.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb

from . import benchmarks as bm
from .generate import BenchmarkProgress, GenerationConfig, Progress, existing_answers, plan_calls
from .judging import pending, rejudge_since
from .judging.original import Ask
from .judging.promptsets import SHABERI, PromptSet
from .llm.client import encode
from .prompts import judge_messages
from .run_info import run_id_for
from .tables.rows import AnswerKey, RunRecord, decoded
from .tables.sql import connect, query
from .tables.store import Store

__all__ = ["Estimate", "estimate", "estimate_pairwise", "estimate_tokens", "stored_questions"]

_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
TYPICAL_COMPLETION = {"generation": 600, "judging": 300, "pairwise": 400}  # a comparison reasons about two answers


def estimate_tokens(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


@dataclass
class Estimate:
    stage: str
    model: str
    calls: int
    reused: int
    prompt_tokens: int
    completion_tokens: int  # typical
    completion_bound: int  # calls × max_tokens
    priced: bool
    cost_usd: float  # typical
    cost_bound_usd: float


def stored_questions(results_dir: Path, model: str, tag: str, benchmarks: list[str] | None,
                     scope: set[tuple[str, str]] | None) -> list[bm.Question]:
    """A stored run's questions (what ``--stages judge`` and ``--rejudge`` judge: no data file needed)."""
    rows = Store(results_dir).read("questions", run_id_for(model, tag)).to_pylist()
    return [bm.Question(r["benchmark"], r["question_id"], list(r["turns"] or []), r["reference"], r["criteria"],
                        r["category"], decoded("questions", r)["extra"])
            for r in rows if r["benchmark"] in bm.BENCHMARKS and (benchmarks is None or r["benchmark"] in benchmarks)
            and (scope is None or (r["benchmark"], r["question_id"]) in scope)]


def _judge_sample(prompts: PromptSet, q: bm.Question) -> list[dict[str, Any]]:
    """The first judge request for ``q`` with an answer of about 400 characters, under ``prompts``."""
    if prompts.clone is not None:
        step = prompts.clone.read(q.benchmark, prompts.clone.row(q.benchmark, asdict(q), "回答" * 200), "judge", [])
        return step.messages if isinstance(step, Ask) else []
    return judge_messages(q.benchmark, q, "回答" * 200, bm.BENCHMARKS[q.benchmark].scale, (), prompts.folder)


def estimate(results_dir: Path, model: str, tag: str, base_url: str, items: list[bm.Question],
             config: GenerationConfig, judges: list[str], judge_max_tokens: int,
             pricing: Path | None, generating: bool = True, rejudge: bool = False,
             questions: set[tuple[str, str]] | None = None, rerun: bool = False,
             retry_errors: int = 2, prompts: PromptSet = SHABERI, judge_batch: bool = False,
             batch: bool = False) -> list[Estimate]:
    """The generation row (unless ``generating`` is off: ``--rejudge``, ``--stages judge``) and one row per
    judge, for these questions. ``questions``: the (benchmark, question id) pairs the judge stage is limited
    to (``--limit``). ``judge_batch``, ``batch``: the judges', the candidate's calls priced at their Batch API rates."""
    store = Store(results_dir)
    run_id = run_id_for(model, tag)
    progress = Progress()
    for name, n in Counter(q.benchmark for q in items).items():
        progress.benchmarks[name] = BenchmarkProgress(total=n * config.samples)
    placeholder = "回答" * 200  # a later turn's earlier answers: not generated yet, about this long
    planned = list(plan_calls(items, model=model, endpoint=base_url.rstrip("/"), config=config,
                              existing=existing_answers(store, run_id), rerun=rerun, retry_errors=retry_errors,
                              progress=progress, earlier=lambda q, s: [placeholder] * _turn(q, items))
                   ) if generating else []
    reused = sum(b.cached for b in progress.benchmarks.values())
    prompt = sum(estimate_tokens(encode(model, item.messages, config, **config.more(item.sample_index)).decode())
                 for item in planned)
    con = connect(results_dir, pricing)
    rows = [_priced(con, run_id, "generation", model, len(planned), reused, prompt, config.max_tokens,
                    _observed(con, "answer", model), batch)] if generating else []
    if not judges:
        return rows
    run = [RunRecord.of(r) for r in store.read("runs", run_id).to_pylist()]
    stored = pending(store, run_id, judges, rejudge=rejudge, benchmarks=sorted({q.benchmark for q in items}),
                     questions=questions, rejudged_since=rejudge_since(run[0]) if run and rejudge else None,
                     replaced=frozenset(AnswerKey(w.question.benchmark, w.question.question_id, w.sample_index)
                                        for w in planned), prompts=prompts
                     ) if run else {j: Counter[str]() for j in judges}
    sample = [_judge_sample(prompts, q) for q in items]
    per_call = sum(estimate_tokens(m["content"]) for msgs in sample for m in msgs) / max(1, len(sample))
    for name in judges:
        calls = stored[name]["call"] + len(planned)  # a new or retried answer is a new text to judge
        rows.append(_priced(con, run_id, "judging", name, calls, stored[name]["reused"], round(per_call * calls),
                            judge_max_tokens, _observed(con, "judge", name), judge_batch))
    return rows


def estimate_pairwise(results_dir: Path, prompts: list[list[dict[str, Any]]], reused: int, judge: str, max_tokens: int,
                      pricing: Path | None) -> Estimate:
    """``shaberi pairwise --dry-run``: the comparisons still to make (``prompts``: each one's messages), one call
    each before any fallback, their tokens and cost; ``reused``: the ones stored."""
    prompt = sum(estimate_tokens(m["content"]) for messages in prompts for m in messages)
    con = connect(results_dir, pricing)
    return _priced(con, None, "pairwise", judge, len(prompts), reused, prompt, max_tokens,
                   _observed(con, "judge", judge))


def _turn(question: bm.Question, items: list[bm.Question]) -> int:
    """How many turns come before this one in its conversation (``extra.previous`` links them)."""
    ids = {(q.benchmark, q.question_id): q for q in items}
    n, key = 0, question.extra.get("previous")
    while key is not None and (question.benchmark, key) in ids:
        n, key = n + 1, ids[(question.benchmark, key)].extra.get("previous")
    return n if key is None else n + 1


def _observed(con: duckdb.DuckDBPyConnection, kind: str, name: str) -> float | None:
    """The mean completion tokens of this model's stored answers (``kind`` answer) or judge's judgements (judge)."""
    row = con.execute(query(f"reports.observed_{kind}_tokens"), {"name": name}).fetchone()
    return row[0] if row else None


def _priced(con: duckdb.DuckDBPyConnection, run_id: str | None, stage: str, model: str, calls: int, reused: int,
            prompt: int, max_tokens: int, observed: float | None, batch: bool = False) -> Estimate:
    typical = round(min(observed or TYPICAL_COMPLETION[stage], max_tokens) * calls)  # never above the bound
    price = con.execute(query("reports.price"), {"run": run_id, "model": model, "batch": batch}).fetchone()
    input_price, output_price = price or (0.0, 0.0)
    cost = prompt / 1e6 * input_price
    return Estimate(stage, model, calls, reused, prompt, typical, calls * max_tokens, price is not None,
                    cost + typical / 1e6 * output_price, cost + calls * max_tokens / 1e6 * output_price)
