"""The older 80-question one-shot Japanese MT-Bench (opt-in; found in legacy result trees).

Upstream (lightblue/japanes-mt-bench-oneshot) columns: ``Category``, ``Question``. Question ids are the
1-based order of first appearance. Judged 1–10, never pooled with the 60-question ``mt_bench``.

Templates: prompts/generation/mt_bench_80.jinja, prompts/judging/mt_bench_80/{primary,fallback}.jinja.
"""

from collections.abc import Iterator
from typing import Any

from . import BENCHMARKS, BUILTIN_PROMPTS, Question, _text

# Its data entry: where the file is under --data-dir, where it comes from, the columns it needs.
DATA = {
    "title": "MT-Bench (80, legacy)",
    "opt_in": True,  # not part of --benchmark all; legacy trees hold it inside the 60-question folder
    "file": "ja/ja_mt_bench_oneshot_80_legacy",
    "hf_repo": "lightblue/japanes-mt-bench-oneshot",
    "hf_revision": "refs/convert/parquet",
    "hf_file": "default/train/0000.parquet",
    "columns": ["Category", "Question"],
    "sha256": ["ca16aa9c0743f4098dc5097c5b75f93b4d1c3cb10a893fe378865834e038701f"],
    "legacy_folder": "lightblue__japanes-mt-bench-oneshot",
}


@BENCHMARKS.register("mt_bench_80", scale=(1, 10), data=DATA, prompts=BUILTIN_PROMPTS)
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    seen: dict[str, int] = {}
    for row in rows:
        text = str(row["Question"])
        if text in seen:
            continue
        seen[text] = len(seen) + 1
        yield Question(benchmark="mt_bench_80", question_id=str(seen[text]), turns=[text],
                       category=_text(row.get("Category")))
