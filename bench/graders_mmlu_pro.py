"""The mcq grader over every recorded MMLU-Pro member response (five models × 12,032 questions), no model call.

    python bench/graders_mmlu_pro.py [--examples N]

Data: ``$SHABERI_DATA_DIR`` (default ../shared/datasets): ``gt/mmlu_pro/test.jsonl`` for the gold letters and
label sets, ``recorded/mmlu_pro/*.jsonl`` for the responses. Prints how many responses each rule of the
chain read, how many were unreadable (method ``none``), accuracy per model; then, against a copy of the
extractor as it was before issue 14 (kept here for the comparison only), how many extractions changed,
by cause (a lowercase letter read as an option, "answer is: X" missed, a formula such as ``P(D)`` read as
a choice, other), and how many grades flipped. ``--examples N`` prints N changed responses per cause.
"""

from __future__ import annotations

import os
import random
import re
import sys
import time
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

import orjson

from shaberi.ensemble import datasets as gt
from shaberi.ensemble.graders import GRADERS
from shaberi.ensemble.graders.mcq import RULES, rules

CAUSES = ["case", "answer is:", "formula", "hedged", "closing paragraph", "other"]


@cache
def _old_rules(labels: str) -> list[tuple[str, re.Pattern[str]]]:
    """The extractor before issue 14, verbatim: ``re.I`` on the answer rule, any ``(X)`` a choice."""
    x = f"[{re.escape(labels)}]"
    return [
        ("answer", re.compile(rf"(?:answer\s*(?:is|:)|(?:答え|正解)\s*(?:は|[:：])+)\s*\**\s*[\(\[]?({x})(?![A-Za-z])",
                              re.I)),
        ("boxed", re.compile(rf"\\boxed\{{\s*(?:\\text\{{)?\s*\(?({x})\)?\s*\}}")),
        ("parenthesised", re.compile(rf"\(({x})\)")),
        ("bare", re.compile(rf"^\W*({x})\W*$")),
    ]


def _old_extract(text: str, labels: str) -> tuple[str | None, str, re.Match[str] | None]:
    """(letter as found, before upper-casing; method; the match)."""
    for method, pattern in _old_rules(labels):
        found = list(pattern.finditer(text.strip()))
        if found:
            return found[-1].group(1), method, found[-1]
    return None, "none", None


def _cause(old: tuple[str | None, str, re.Match[str] | None], new_method: str, text: str, labels: str) -> str:
    letter, method, match = old
    if letter is not None and letter.islower():
        return "case"
    if new_method == "hedged":
        return "hedged"  # "(C) or (B)", "(A) for part a and (B) for part b": no single choice
    parenthesised = dict(rules(labels))["parenthesised"]
    if method == "parenthesised" and match is not None and parenthesised.match(match.string, match.start()) is None:
        return "formula"  # P(D), det(A), f(B), (E) = 30 psi: the new rule refuses this very match
    if method == "parenthesised" and new_method != "parenthesised":
        return "closing paragraph"  # (X) read only where the reply closes, and only when it names one letter
    if new_method == "answer":
        last = list(dict(rules(labels))["answer"].finditer(text))[-1]
        if re.search(r"(?i:is)\s*:", last.group(0)):
            return "answer is:"
    return "other"


def main() -> None:
    examples = int(sys.argv[sys.argv.index("--examples") + 1]) if "--examples" in sys.argv else 0
    data = Path(os.environ.get("SHABERI_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "datasets")
    questions = {q.question_id: q for q in gt.load("mmlu_pro", data).questions}
    responses = []
    for path in sorted((data / "recorded" / "mmlu_pro").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            row = orjson.loads(line)
            responses.append((str(row["question_id"]), str(row["model"]), row["response"] or ""))

    mcq = GRADERS["mcq"]
    by_rule: Counter[str] = Counter()
    right: Counter[str] = Counter()
    unreadable: Counter[str] = Counter()
    total: Counter[str] = Counter()
    old_right: Counter[str] = Counter()
    changed: Counter[str] = Counter()
    flips: Counter[tuple[str, str]] = Counter()  # (cause, "now right" | "now wrong")
    shown: dict[str, list[tuple[str, str, str | None, str | None, str]]] = defaultdict(list)
    started = time.perf_counter()
    for qid, model, text in responses:
        question = questions[qid]
        labels = "".join(question.extra["labels"])
        ok, found = mcq.grade(text, question)
        total[model] += 1
        by_rule[found.method] += 1
        right[model] += ok
        unreadable[model] += found.answer is None
        old = _old_extract(text, labels)
        old_answer = old[0].upper() if old[0] else None
        was_ok = old_answer == question.reference
        old_right[model] += was_ok
        if old_answer != found.answer:
            cause = _cause(old, found.method, text, labels)
            changed[cause] += 1
            if ok != was_ok:
                flips[(cause, "now right" if ok else "now wrong")] += 1
            shown[cause].append((model, qid, old_answer, found.answer, text))
    elapsed = time.perf_counter() - started

    n = len(responses)
    print(f"MMLU-Pro recorded responses: {n:,} ({len(total)} models × {len(questions):,} questions), graded in "
          f"{elapsed:.1f} s ({1e6 * elapsed / n:.0f} µs per response, with the old extractor alongside)")
    print("\nextracted by rule (strongest first):")
    for method in (*RULES, "hedged", "none"):
        label = {"none": "unreadable (none)", "hedged": "unreadable (hedged)"}.get(method, method)
        print(f"  {label:<18} {by_rule[method]:>7,}  {by_rule[method] / n:6.1%}")
    print("\nper model:                     accuracy (right)      before (right)   unreadable")
    for counts in (total, right, old_right, unreadable):
        counts["all"] = sum(counts.values())
    for model in [*sorted(set(total) - {"all"}), "all"]:
        t, now, before, unread = total[model], right[model], old_right[model], unreadable[model]
        print(f"  {model:<28} {now / t:6.2%} ({now:>6,})  {before / t:6.2%} ({before:>6,})  {unread:>6,} "
              f"({unread / t:.1%})")
    print(f"\nextractions changed against the old extractor: {sum(changed.values()):,}")
    for cause in CAUSES:
        print(f"  {cause:<12} {changed[cause]:>5,}  (grade now right {flips[(cause, 'now right')]}, "
              f"now wrong {flips[(cause, 'now wrong')]})")
    rng = random.Random(0)
    for cause in CAUSES if examples else []:
        print(f"\n--- {cause}: {min(examples, len(shown[cause]))} of {len(shown[cause])}")
        for model, qid, old_answer, new_answer, text in rng.sample(shown[cause], min(examples, len(shown[cause]))):
            print(f"{model} q{qid}: {old_answer} -> {new_answer} (gold {questions[qid].reference}): "
                  f"{text.strip()[-240:]!r}")


if __name__ == "__main__":
    main()
