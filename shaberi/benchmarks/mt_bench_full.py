"""Japanese MT-Bench, both turns (opt-in): 80 questions, 160 answers, judged 1–10 per turn.

Upstream columns: ``question_id``, ``category``, ``turns`` (two user turns); references from GPT-4's
answers file (``question_id``, ``choices[0].turns``). Each turn is its own question, ``<id>:1`` and
``<id>:2``; the second holds both user turns and points at the first (``extra.previous``), so it is
generated with the model's own turn-1 answer in the conversation and judged on the whole exchange.
As in MT-Bench, math, reasoning and coding answers are judged against the reference answer.

Templates: prompts/generation/mt_bench_full.jinja, prompts/judging/mt_bench_full/{primary,fallback}.jinja.
"""

from collections.abc import Iterator
from typing import Any

from . import BENCHMARKS, BUILTIN_PROMPTS, Question, _text

REFERENCE_GUIDED = frozenset({"math", "reasoning", "coding"})


# Its data entry: where the file is under --data-dir, where it comes from, the columns it needs.
DATA = {
    "title": "MT-Bench (2 turns)",
    "opt_in": True,  # not part of --benchmark all
    # Not on the Hugging Face hub: get question.jsonl and reference_answer/gpt-4.jsonl from Stability-AI's
    # FastChat fork (fastchat/llm_judge/data/japanese_mt_bench) and save them under these names.
    "file": "ja/ja_mt_bench_full_2turn",
    "references": "ja/ja_mt_bench_reference_gpt4",
    "source": "Stability-AI/FastChat fastchat/llm_judge/data/japanese_mt_bench: question.jsonl and "
              "reference_answer/gpt-4.jsonl",
    "columns": ["question_id", "category", "turns"],
    "id_columns": ["question_id"],
    "reference_columns": ["question_id", "choices"],
    "sha256": ["8f56c8bd5ff93d2120409bc8f77f0020e673c74548c9637f2aace12a323834e5"],
    "reference_sha256": ["0631685c4ebc66390970588b658e4d19047fafb0a00ec1d841616686c07b0d6b"],
}


@BENCHMARKS.register("mt_bench_full", scale=(1, 10), data=DATA, prompts=BUILTIN_PROMPTS)
def convert(rows: list[dict[str, Any]], references: list[dict[str, Any]] | None = None) -> Iterator[Question]:
    refs = {int(r["question_id"]): r["choices"][0]["turns"] for r in references or []}
    for row in rows:
        if not isinstance(row["turns"], list):
            raise ValueError(f"question {row['question_id']}: turns is not a list of user turns")
        qid, turns = int(row["question_id"]), [str(t) for t in row["turns"]]
        category = _text(row.get("category"))
        for n in range(1, len(turns) + 1):
            ref = refs.get(qid, [])
            yield Question(
                benchmark="mt_bench_full",
                question_id=f"{qid}:{n}",
                turns=turns[:n],
                reference=_text(ref[n - 1]) if len(ref) >= n else None,
                category=category,
                extra={"turn": n, "reference_guided": category in REFERENCE_GUIDED}
                | ({"previous": f"{qid}:{n - 1}"} if n > 1 else {}),
            )
