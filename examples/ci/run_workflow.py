"""Run a GitHub Actions workflow's jobs here, step by step, as the runner would: the CI gate tried locally.

    python examples/ci/run_workflow.py WORKFLOW.yml [--repo DIR] [--work DIR]

Every job (each matrix combination a job of its own, in ``needs`` order) starts from a fresh clone of the
repository's committed HEAD (``--repo``, a git repository, default the current directory: what is not
committed is not there, as on a runner) and runs its ``run`` steps with bash (``-e``, the workflow's,
job's and step's ``env``, ``GITHUB_STEP_SUMMARY``). What a hosted runner provides is provided by this
machine instead, and said: ``actions/checkout`` is the clone, ``actions/setup-python`` and a step with
``id: install`` are this Python environment (shaberi already installed). ``actions/upload-artifact`` /
``download-artifact`` copy files through ``--work``/artifacts, emptied first (an upload that matches no
file is a warning, as on GitHub). Expressions: ``${{ matrix.X }}``, ``${{ vars.X }}`` and
``${{ secrets.X }}`` (the latter two from this environment's variables of the same name); ``if:
always()`` / ``success()`` / ``failure()``. Anything else (other expressions, ``working-directory``,
``shell``, ``continue-on-error``, a matrix ``include``/``exclude``, other actions) is refused before any
job runs, not guessed.

Prints one line per job (``ok`` or ``FAILED``, with each step's exit code) and the step summaries;
exits 1 when any job failed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml  # type: ignore[import-untyped]

EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
LOCAL = {"actions/checkout", "actions/setup-python"}


class Unsupported(Exception):
    """The workflow uses something this runner does not emulate."""


def expand(text: str, matrix: dict[str, str]) -> str:
    def value(m: re.Match[str]) -> str:
        scope, _, name = m[1].partition(".")
        if scope == "matrix" and name in matrix:
            return str(matrix[name])
        if scope in ("vars", "secrets") and name:
            return os.environ.get(name, "")
        raise Unsupported(f"expression ${{{{ {m[1]} }}}}")

    return EXPRESSION.sub(value, text)


def runs(condition: str | None, failed: bool) -> bool:
    condition = (condition or "success()").strip()
    condition = EXPRESSION.sub(lambda m: m[1], condition)
    if condition not in ("always()", "success()", "failure()"):
        raise Unsupported(f"if: {condition}")
    return condition == "always()" or (condition == "failure()") == failed


STEP_KEYS = {"name", "id", "uses", "with", "run", "env", "if"}
JOB_KEYS = {"name", "runs-on", "needs", "if", "env", "steps", "strategy"}
ACTIONS = LOCAL | {"actions/upload-artifact", "actions/download-artifact"}


def check(spec: dict) -> None:
    """Refuse, before anything runs, what this runner would otherwise run differently from GitHub."""
    for name, job in spec["jobs"].items():
        if extra := set(job) - JOB_KEYS:
            raise Unsupported(f"job {name}: {', '.join(sorted(extra))}")
        strategy = job.get("strategy") or {}
        if extra := set(strategy) - {"matrix", "fail-fast"}:
            raise Unsupported(f"job {name}: strategy.{', '.join(sorted(extra))}")
        axes = strategy.get("matrix") or {}
        if extra := {"include", "exclude"} & set(axes):
            raise Unsupported(f"job {name}: matrix {', '.join(sorted(extra))}")
        runs(job.get("if"), False)
        for step in job.get("steps", []):
            if extra := set(step) - STEP_KEYS:
                raise Unsupported(f"job {name}: step key {', '.join(sorted(extra))}")
            if "uses" in step and step["uses"].split("@")[0] not in ACTIONS:
                raise Unsupported(f"job {name}: action {step['uses']}")
            runs(step.get("if"), False)
            for text in [step.get("run", ""), *map(str, (step.get("env") or {}).values()),
                         *map(str, (step.get("with") or {}).values())]:
                for m in EXPRESSION.finditer(text):
                    scope, _, key = m[1].partition(".")
                    if not ((scope == "matrix" and key in axes) or (scope in ("vars", "secrets") and key)):
                        raise Unsupported(f"expression ${{{{ {m[1]} }}}}")


def matrix_of(job: dict) -> list[dict[str, str]]:
    axes = (job.get("strategy") or {}).get("matrix") or {}
    if not axes:
        return [{}]
    names = list(axes)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]


def order(jobs: dict[str, dict]) -> list[str]:
    done: list[str] = []
    while len(done) < len(jobs):
        ready = [name for name, job in jobs.items() if name not in done and all(
            need in done for need in ([job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", [])))]
        if not ready:
            raise Unsupported("a cycle in needs")
        done += ready
    return done


def run_job(name: str, job: dict, matrix: dict[str, str], env: dict[str, str], repo: Path, work: Path
            ) -> tuple[bool, list[str], str]:
    """(failed, one word per step, the step summary)."""
    workspace = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work)) / "repo"
    subprocess.run(["git", "clone", "--quiet", str(repo), str(workspace)], check=True)
    summary = workspace.parent / f"{workspace.name}.summary.md"
    summary.touch()
    job_env = env | {k: expand(str(v), matrix) for k, v in (job.get("env") or {}).items()}
    failed, words = False, []
    for step in job.get("steps", []):
        label = step.get("name") or step.get("id") or step.get("uses") or step["run"].splitlines()[0]
        if not runs(step.get("if"), failed):
            words.append(f"{label}: skipped")
            continue
        uses = (step.get("uses") or "").split("@")[0]
        options = {k: expand(str(v), matrix) for k, v in (step.get("with") or {}).items()}
        if uses in LOCAL or step.get("id") == "install":
            words.append(f"{label}: this machine's")
        elif uses == "actions/upload-artifact":
            target = work / "artifacts" / options["name"]
            target.mkdir(parents=True, exist_ok=True)
            found = list(workspace.glob(options["path"]))
            for path in found:
                shutil.copy2(path, target / path.name)
            words.append(f"{label}: uploaded {len(found)} file(s)" if found else
                         f"{label}: warning: no files were found with the provided path: {options['path']}")
        elif uses == "actions/download-artifact":
            target = workspace / options.get("path", ".")
            for folder in sorted((work / "artifacts").glob(options.get("pattern", options.get("name", "*")))):
                into = target if options.get("merge-multiple") == "True" else target / folder.name
                shutil.copytree(folder, into, dirs_exist_ok=True)
            words.append(f"{label}: downloaded")
        elif "run" in step:
            step_env = job_env | {k: expand(str(v), matrix) for k, v in (step.get("env") or {}).items()}
            done = subprocess.run(["bash", "-e", "-c", expand(step["run"], matrix)], cwd=workspace,
                                  env=os.environ | step_env | {"GITHUB_STEP_SUMMARY": str(summary)})
            words.append(f"{label}: exit {done.returncode}")
            failed = failed or done.returncode != 0
        else:
            raise Unsupported(f"step uses {uses}")
    return failed, words, summary.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workflow", type=Path)
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the repository to check out [default: .]")
    parser.add_argument("--work", type=Path, default=None, help="where jobs run and artifacts go [default: a "
                        "temporary directory]")
    args = parser.parse_args(argv)
    spec = yaml.safe_load(args.workflow.read_text())
    if not (args.repo / ".git").exists():
        print(f"error: --repo {args.repo} is not a git repository (a job checks out a commit); git init and commit",
              file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="workflow-"))
    shutil.rmtree(work / "artifacts", ignore_errors=True)  # this run's artifacts only
    work.mkdir(parents=True, exist_ok=True)
    env = {k: str(v) for k, v in (spec.get("env") or {}).items()}
    jobs: dict[str, dict] = spec["jobs"]
    outcome: dict[str, bool] = {}
    try:
        check(spec)
        for name in order(jobs):
            job = jobs[name]
            needs = [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", [])
            needs_failed = any(outcome[n] for n in needs)
            if not runs(job.get("if"), needs_failed):
                print(f"job {name}: skipped (a job it needs failed)", flush=True)
                outcome[name] = False
                continue
            any_failed = False
            for matrix in matrix_of(job):
                title = expand(job.get("name", name), matrix)
                failed, words, summary = run_job(name, job, matrix, env, args.repo.resolve(), work)
                print(f"job {title}: {'FAILED' if failed else 'ok'} ({'; '.join(words)})", flush=True)
                if summary.strip():
                    print(summary, flush=True)
                any_failed |= failed
            outcome[name] = any_failed
    except Unsupported as exc:
        print(f"error: {args.workflow} uses {exc}, which this local runner does not emulate", file=sys.stderr)
        return 2
    return int(any(outcome.values()))


if __name__ == "__main__":
    sys.exit(main())
