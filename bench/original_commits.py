"""Which commits of the original Shaberi work as a prompt set (``--judge-prompts``): every commit of a full clone that
touches its judging files, loaded and checked as a run checks it (every question of its benchmarks rendered, the
request probed for GPT-4.1 and GPT-5.1).

    python bench/original_commits.py PATH_TO_A_GIT_CLONE [--data-dir ../shared/datasets]

Prints one line per commit (date, benchmarks judged, think-block removal, the judge request) and the count that
work; the docs' list of working commits comes from this.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import subprocess
import tempfile
from pathlib import Path

from shaberi import benchmarks as bm
from shaberi.errors import UsageError
from shaberi.judging import promptsets

FILES = ("evaluation_datasets_config.py", "llm_functions.py", "judge_answers.py")
JUDGES = ("gpt-4.1-2025-04-14", "gpt-5.1-2025-11-13")


def git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clone", type=Path)
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get(
        "SHABERI_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "datasets")))
    args = parser.parse_args()
    questions = {b: [dataclasses.asdict(q) for q in bm.load(b, args.data_dir).questions]
                 for b in ("tengu", "elyza", "mt_bench", "rakuda", "mt_bench_80")}
    commits = git(args.clone, "log", "--reverse", "--format=%h %ad", "--date=short", "--", *FILES).split("\n")
    working = 0
    for line in filter(None, commits):
        commit, date = line.split()
        with tempfile.TemporaryDirectory() as tmp:
            for name in FILES:
                with contextlib.suppress(subprocess.CalledProcessError):  # a file not in this commit
                    (Path(tmp) / name).write_text(git(args.clone, "show", f"{commit}:{name}"), encoding="utf-8")
            try:
                prompts = promptsets.load(tmp)
                assert prompts.clone is not None
                judged = sorted(prompts.clone.evaluators)
                prompts.check(judged, questions, JUDGES)
            except UsageError as exc:
                print(f"{commit} {date} no: {str(exc).replace(tmp, '.')[:160]}")
                continue
            requests = {j: (r.api, dict(r.fields)) for j, r in prompts.clone._requests.items()}
            think = "think-block removal" if prompts.clone.think else "answers as they are"
            print(f"{commit} {date} yes: {', '.join(judged)}; {think}; {requests}")
            working += 1
    print(f"{working} of {len([c for c in commits if c])} commits work")


if __name__ == "__main__":
    main()
