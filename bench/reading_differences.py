"""How often the original Shaberi's score reading and Shaberi's own verdict grammar differ, on real judge replies.

    python bench/reading_differences.py [--data-dir ../shared/datasets] [--examples 3]

Every legacy judgement that kept its reply (``legacy/**/judge_output``: GPT-5.1's, under the 2025-11 prompts) is
read three ways: by each original version's own code (``shaberi.judging.original``, replaying the reply into its
evaluator; a reply it would ask its fallback call for counts as no score here, as the reply alone holds none), and
by ``shaberi.extract`` with the benchmark's rules. Printed per version: how many replies both read alike, how many
they read differently (both a score, not the same), and how many only one of them reads, with examples. Not a
speed figure: the counts say what a user switching readings should expect.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

from shaberi import benchmarks as bm
from shaberi.extract import extract
from shaberi.judging import promptsets
from shaberi.judging.original import Ask
from shaberi.judging.stage import original_extraction

FOLDERS = {"lightblue__tengu_bench": "tengu", "elyza__ELYZA-tasks-100": "elyza",
           "shisa-ai__ja-mt-bench-1shot": "mt_bench", "yuzuai__rakuda-questions": "rakuda"}
ROW = {"Question": "質問", "ModelAnswer": "回答", "Answer": None, "Criteria": "", "output": "", "eval_aspect": ""}


def replies(data: Path) -> list[tuple[str, str]]:
    """(benchmark, judge_output) of every legacy judgement that kept the reply."""
    found = []
    for path in sorted((data / "legacy").rglob("judgements/*/*/*.json")):
        if (name := FOLDERS.get(path.parent.name)) is None:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            score, output = row.get("score"), row.get("judge_output")
            if isinstance(score, dict):
                output = score.get("judge_output", output)
            if isinstance(output, str):
                found.append((name, output))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get(
        "SHABERI_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "datasets")))
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args()
    found = replies(args.data_dir)
    per = ", ".join(f"{b} {n}" for b, n in sorted(Counter(b for b, _ in found).items()))
    print(f"{len(found)} judge replies kept in legacy judgements ({per})")
    for version in sorted(p.name for p in (args.data_dir / "original").iterdir() if p.is_dir()):
        clone = promptsets.load(str(args.data_dir / "original" / version)).clone
        assert clone is not None
        kinds: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        for benchmark, output in found:
            spec = bm.BENCHMARKS[benchmark]
            step = clone.read(benchmark, ROW, "judge", [output])
            theirs = original_extraction(None if isinstance(step, Ask) else step, 1, spec).score
            ours = extract(output, spec.scale, spec.rules).score
            if theirs is not None and ours is not None:
                kind = "both alike" if theirs == ours else "differ"
            else:
                kind = "original only" if theirs is not None else "Shaberi only" if ours is not None else "neither"
            kinds[kind] += 1
            if kind not in ("both alike", "neither") and len(examples.setdefault(kind, [])) < args.examples:
                tail = output.strip()[-90:].replace("\n", " ⏎ ")
                examples[kind].append(f"{benchmark}: original {theirs}, Shaberi {ours}: …{tail}")
        total = len(found)
        print(f"\n{version} ({clone.label}): " + ", ".join(
            f"{k} {kinds[k]} ({kinds[k] / total:.1%})" for k in
            ("both alike", "differ", "original only", "Shaberi only", "neither")))
        for kind, lines in examples.items():
            for line in lines:
                print(f"  {kind}: {line}")


if __name__ == "__main__":
    main()
