"""The verdict grammar (shaberi.extract) over every legacy judge reply that kept its text.

    python bench/judge_replies.py [LEGACY_DIR]     (default: ../shared/datasets/legacy)

Prints how many replies give a score and by which format, how many would go to the fallback prompt and
why, and every reply whose score differs from the score the original tooling stored beside it. Rows
whose file kept no ``judge_output`` are counted, not read. Also times the extractor (replies per second),
against a floor measured in the same run: NFKC-normalising each reply and searching it once.
"""

from __future__ import annotations

import re
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

import orjson

from shaberi import benchmarks as bm
from shaberi.extract import extract
from shaberi.legacy import folders


def replies(root: Path) -> list[tuple[str, str, str, float | None, str]]:
    """(file, benchmark, reply, stored score, answer) for every legacy row whose reply text was kept."""
    out, known = [], folders()
    for path in sorted(root.rglob("judgements/*/*/*.json")):
        if path.parent.name not in known:
            continue
        name = known[path.parent.name]
        for line in path.read_bytes().splitlines():
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            score, reply = row.get("score"), row.get("judge_output")
            if isinstance(score, dict):  # the original tooling's known bug: score and reply nested
                score, reply = score.get("score"), score.get("judge_output", reply)
            out.append((str(path.relative_to(root)), name, reply or "",
                        None if score is None else float(score), str(row.get("ModelAnswer") or "")))
    return out


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / \
        "datasets" / "legacy"
    rows = replies(root)
    kept = [r for r in rows if r[2].strip()]
    by_rule: Counter[str] = Counter()
    fallback: Counter[str] = Counter()
    differ: list[str] = []
    start = time.perf_counter()
    for file, name, reply, stored, answer in kept:
        spec = bm.BENCHMARKS[name]
        got = extract(reply, spec.scale, spec.rules, answer)
        if got.ok:
            by_rule[f"{name:9} {got.method}"] += 1
            if got.score != stored:
                differ.append(f"  {file}: stored {stored}, read {got.score:g} ({got.method})")
        else:
            reason = (got.reason or "").split(":")[0].split("(")[0].strip()
            fallback[f"{name:9} {reason}"] += 1
            if stored is not None:
                differ.append(f"  {file}: stored {stored:g}, read none -> fallback ({got.reason})")
    seconds = time.perf_counter() - start
    start = time.perf_counter()  # the floor: what any reader does, normalise the reply and search it once
    for _, _, reply, _, _ in kept:
        re.search(r"FINAL\s*SCORE\s*:?\s*(\d+)", unicodedata.normalize("NFKC", reply))
    floor = time.perf_counter() - start
    print(f"legacy judgement rows      {len(rows)} in {root}")
    print(f"  with the reply's text    {len(kept)}  (the rest kept only a score: nothing to read)")
    print(f"give a score               {sum(by_rule.values())}")
    for rule, n in sorted(by_rule.items()):
        print(f"  {rule:32} {n}")
    print(f"need the fallback prompt   {sum(fallback.values())}")
    for reason, n in sorted(fallback.items()):
        print(f"  {reason:32} {n}")
    print(f"differ from the stored score  {len(differ)}")
    print("\n".join(differ))
    print(f"extractor speed            {len(kept) / seconds:,.0f} replies/s, {seconds / floor:.1f}× the floor "
          f"(NFKC and one regex search: {len(kept) / floor:,.0f} replies/s)")


if __name__ == "__main__":
    main()
