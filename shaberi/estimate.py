"""``shaberi run --dry-run``: the calls a run would make, their tokens and cost, without any call.

Prompt tokens are estimated from the rendered prompts: one token per CJK character and one per four other
characters (no tokenizer runs offline: tiktoken downloads its encodings). Completion tokens use the mean
of this model's (or judge's) earlier answers in the results root when there are any, else a typical
length; the ``max_tokens`` bound is shown beside it. Prices come from the same table as the ``cost`` view.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from . import benchmarks as bm
from .generate import BenchmarkProgress, GenerationConfig, Progress, existing_answers, plan_calls
from .prompts import judge_messages
from .run import run_id_for
from .tables.sql import connect
from .tables.store import Store

__all__ = ["Estimate", "estimate", "estimate_tokens"]

_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
TYPICAL_COMPLETION = {"generation": 600, "judging": 300}


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


def estimate(results_dir: Path, model: str, tag: str, base_url: str, datasets: list[bm.Dataset],
             config: GenerationConfig, judges: list[str], judge_max_tokens: int,
             pricing: Path | None, generating: bool = True) -> list[Estimate]:
    """The generation row (unless ``generating`` is off: ``--rejudge``, ``--stages judge``) and one row per
    judge."""
    store = Store(results_dir)
    run_id = run_id_for(model, tag)
    progress = Progress()
    for ds in datasets:
        progress.benchmarks[ds.benchmark] = BenchmarkProgress(total=len(ds.questions) * config.samples)
    questions = [q for ds in datasets for q in ds.questions]
    planned = list(plan_calls(questions, model=model, base_url=base_url.rstrip("/"), config=config,
                         existing=existing_answers(store, run_id), rerun=False, retry_errors=2, progress=progress))
    reused = sum(b.cached for b in progress.benchmarks.values())
    prompt = sum(estimate_tokens(item.body.decode()) for item in planned)
    con = connect(results_dir, pricing)
    rows = [_priced(con, "generation", model, len(planned), reused, prompt, config.max_tokens,
                    _observed(con, "answers", "model", model))] if generating else []
    answers = len(questions) * config.samples
    for name in judges:
        sample = [judge_messages(q.benchmark, q, "回答" * 200, bm.BENCHMARKS[q.benchmark].scale) for q in questions]
        per_call = sum(estimate_tokens(m["content"]) for msgs in sample for m in msgs) / max(1, len(sample))
        rows.append(_priced(con, "judging", name, answers, 0, round(per_call * answers), judge_max_tokens,
                            _observed(con, "judgements", "judge", name)))
    return rows


def _observed(con: duckdb.DuckDBPyConnection, table: str, column: str, name: str) -> float | None:
    row = con.execute(f"SELECT avg(completion_tokens) FROM {table} WHERE {column} = ? AND completion_tokens > 0",
                      [name]).fetchone()
    return row[0] if row else None


def _priced(con: duckdb.DuckDBPyConnection, stage: str, model: str, calls: int, reused: int, prompt: int,
            max_tokens: int, observed: float | None) -> Estimate:
    typical = round((observed or TYPICAL_COMPLETION[stage]) * calls)
    price = con.execute("SELECT input, output FROM pricing WHERE model = price_model(?)", [model]).fetchone()
    input_price, output_price = price or (0.0, 0.0)
    cost = prompt / 1e6 * input_price
    return Estimate(stage, model, calls, reused, prompt, typical, calls * max_tokens, price is not None,
                    cost + typical / 1e6 * output_price, cost + calls * max_tokens / 1e6 * output_price)
