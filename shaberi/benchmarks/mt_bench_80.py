"""The older 80-question one-shot Japanese MT-Bench (opt-in; found in legacy result trees).

Upstream (lightblue/japanes-mt-bench-oneshot) columns: ``Category``, ``Question``. Question ids are the
1-based order of first appearance. Judged 1–10, never pooled with the 60-question ``mt_bench``.
"""

from collections.abc import Iterator

from . import Question, _text, benchmark


@benchmark("mt_bench_80", scale=(1, 10))
def convert(rows: list[dict]) -> Iterator[Question]:
    seen: dict[str, int] = {}
    for row in rows:
        text = str(row["Question"])
        if text in seen:
            continue
        seen[text] = len(seen) + 1
        yield Question(benchmark="mt_bench_80", question_id=str(seen[text]), turns=[text],
                       category=_text(row.get("Category")))
