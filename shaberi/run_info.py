"""What identifies a run and what its ``runs`` row records.

A run is (model, tag); its ``run_id`` (``tables.ids``: the tables' key) is a readable, path-safe slug of both plus
a short hash of the exact pair, so two names that slug alike never share a partition.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import platform
import re
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .tables.ids import run_id_for, run_id_prefix

if TYPE_CHECKING:
    from .tables.rows import RunRecord

__all__ = ["RunInfo", "git_state", "key_fingerprint", "package_versions", "run_id_for", "run_id_prefix",
           "validate_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_RUN_TAG = re.compile(r"^(?P<base>.+)-run(?P<index>\d+)$")


def validate_name(kind: str, value: str) -> str:
    """Refuse names that are empty, control characters, or look like paths out of the results root."""
    if not value or not value.strip():
        raise UsageError(f"--{kind} must not be empty")
    if any(ord(c) < 32 for c in value):
        raise UsageError(f"--{kind} {value!r} contains control characters")
    parts = value.replace("\\", "/").split("/")
    if value.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:[\\/]", value) or ".." in parts:
        raise UsageError(
            f"--{kind} {value!r} looks like a path outside the results root; use a plain name such as "
            "'org/model' or 'baseline-v2'"
        )
    return value


def _now_us() -> int:
    """``store.now_us``, without importing the store (and pyarrow) into commands that only read."""
    from .tables.store import now_us

    return now_us()


def key_fingerprint(api_key: str | None) -> str | None:
    """Enough to tell two keys apart in ``runs``; never the key."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:12] if api_key else None


@cache
def git_state() -> tuple[str | None, bool | None]:
    """Commit and dirty flag of the shaberi checkout this code runs from (None outside a checkout)."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        )
        return commit.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


@cache
def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("shaberi", "aiohttp", "pyarrow", "duckdb", "polars", "jinja2", "orjson"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


@dataclass
class RunInfo:
    """The identity and configuration of one run, turned into its ``runs`` row."""

    model: str
    tag: str
    base_url: str
    api_key: str | None
    generation_config: dict[str, Any]
    benchmarks: list[str]
    datasets: dict[str, Any]
    prompt_hashes: dict[str, Any]
    judges: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()
    pass_config: dict[str, Any] = field(default_factory=dict)
    # prompt set label ("shaberi": its own prompts) -> provenance
    judge_prompts: dict[str, Any] = field(default_factory=dict)
    pricing: dict[str, Any] = field(default_factory=dict)  # model -> its --pricing entry (the run is priced with it)

    def __post_init__(self) -> None:
        self.run_id = run_id_for(self.model, self.tag)
        self.created_at = _now_us()

    @property
    def base_tag(self) -> str:
        """``exp`` for ``exp-run3``; the tag itself otherwise."""
        match = _RUN_TAG.match(self.tag)
        return match["base"] if match else self.tag

    def record(self, status: str, error: str | None = None, limits: dict[str, list[dict[str, Any]]] | None = None
               ) -> RunRecord:
        """The run's ``runs`` row as values (the row store imports pyarrow: only a command that writes needs it)."""
        from .tables.rows import RunRecord

        match = _RUN_TAG.match(self.tag)
        commit, dirty = git_state()
        return RunRecord(
            run_id=self.run_id, tag=self.tag, base_tag=self.base_tag, run_index=int(match["index"]) if match else 1,
            model=self.model, base_url=self.base_url, api_key_sha256=key_fingerprint(self.api_key),
            generation_config=self.generation_config, benchmarks=self.benchmarks, judges=list(self.judges),
            passes=list(self.passes), pass_config=self.pass_config, datasets=self.datasets,
            prompt_hashes=self.prompt_hashes, judge_prompts=self.judge_prompts, pricing=self.pricing,
            git_commit=commit, git_dirty=dirty, package_versions=package_versions(), concurrency_history=limits or {},
            status=status, error=error, created_at=self.created_at)

    def row(self, status: str, error: str | None = None, limits: dict[str, list[dict[str, Any]]] | None = None
           ) -> dict[str, Any]:
        """The ``runs`` row of ``record``."""
        from .tables.rows import runs

        return runs(self.record(status, error, limits))
