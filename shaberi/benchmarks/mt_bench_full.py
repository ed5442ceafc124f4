"""Japanese MT-Bench, both turns (opt-in): 80 questions, 160 answers, judged 1–10 per turn.

Upstream columns: ``question_id``, ``category``, ``turns`` (two user turns); references from GPT-4's
answers file (``question_id``, ``choices[0].turns``). Each turn is its own question, ``<id>:1`` and
``<id>:2``; the second holds both user turns and points at the first (``extra.previous``), so it is
generated with the model's own turn-1 answer in the conversation and judged on the whole exchange.
As in MT-Bench, math, reasoning and coding answers are judged against the reference answer.
"""

from collections.abc import Iterator

from . import Question, _text, benchmark

REFERENCE_GUIDED = frozenset({"math", "reasoning", "coding"})


@benchmark("mt_bench_full", scale=(1, 10))
def convert(rows: list[dict], references: list[dict] | None = None) -> Iterator[Question]:
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
