"""Ground-truth datasets for the ensemble pipeline, registered by name, read with their upstream columns.

Each file here turns one upstream file into ``Question`` rows (``benchmark`` = the dataset name): the
prompt in ``turns[0]`` (options lettered for multiple choice), the gold answer in ``reference``, and in
``extra`` the grader that decides correctness and, for multiple choice, the label set. Files live under
the data directory (``--data-dir`` / ``SHABERI_DATA_DIR``) at ``gt/<path>.{jsonl,json,csv,parquet}``;
GPQA, HLE and HalluMix are not redistributable and are read from the user's own copy at the same kind
of path. The generation prompt of each is ``prompts/generation/<name>.jinja``. Each registers with
``@DATASETS.register(name, path=…, columns=(…), grader=…, source=…)`` on its ``Convert``, as a plugin's does
(``docs/reference/plugins.md``).
"""

from __future__ import annotations

import itertools
import random
import string
from dataclasses import dataclass
from pathlib import Path

from ...benchmarks import FORMATS, Convert, Dataset, Question, read_rows
from ...errors import DataError, UsageError
from ...registry import Registry
from ...resources import sha256_file

__all__ = ["DATASETS", "GTDataset", "letters", "load", "resolve"]


@dataclass(frozen=True)
class GTDataset:
    name: str
    path: str  # under the data directory, without the suffix
    columns: tuple[str, ...]  # upstream columns the loader needs
    grader: str  # numeric | math | mcq | llm, or a plugin's (a question may name its own in extra["grader"])
    source: str  # where a user gets the file
    convert: Convert


def _make(name: str, convert: Convert, *, path: str, columns: tuple[str, ...], grader: str, source: str
          ) -> GTDataset:
    """``DATASETS.register(name, path=…, columns=…, grader=…, source=…)`` on a ``Convert``."""
    return GTDataset(name, path, tuple(columns), grader, source, convert)


DATASETS: Registry[GTDataset] = Registry("dataset", make=_make)


def letters(n: int) -> list[str]:
    return list(string.ascii_uppercase[:n])


def lettered(question: str, options: list[str]) -> tuple[str, list[str]]:
    """The question followed by ``A. …`` lines, and the labels used."""
    labels = letters(len(options))
    return question.strip() + "\n\n" + "\n".join(f"{label}. {str(o).strip()}" for label, o in zip(
        labels, options, strict=True)), labels


def shuffled(key: str, options: list[str]) -> list[str]:
    """Options in a fixed pseudo-random order (the same on every machine): upstream lists the right one first."""
    order = list(options)
    random.Random(key).shuffle(order)
    return order


def mcq(benchmark: str, qid: object, prompt: str, labels: list[str], gold: str, category: str | None = None,
        **extra: object) -> Question:
    return Question(benchmark, str(qid), [prompt], reference=gold, category=category,
                    extra={"grader": "mcq", "labels": labels} | extra)


def resolve(spec: str) -> list[str]:
    """A comma list of dataset names, validated (there is no ``all``)."""
    return DATASETS.resolve(spec)


def locate(name: str, data_dir: Path) -> Path:
    """The dataset's file under ``data_dir``/gt."""
    spec = DATASETS[name]
    stem = Path(data_dir) / "gt" / spec.path
    path = next((p for ext in FORMATS if (p := Path(f"{stem}{ext}")).is_file()), None)
    if path is None:
        raise DataError(f"{name}: no file at {stem}.{{jsonl,json,csv,parquet}}; get it from {spec.source}")
    return path


def load(name: str, data_dir: Path, limit: int | None = None) -> Dataset:
    if limit is not None and limit < 1:
        raise UsageError(f"--limit {limit} is out of range: it must be at least 1")
    spec = DATASETS[name]
    path = locate(name, data_dir)
    rows = read_rows(path)
    if rows and (missing := [c for c in spec.columns if c not in rows[0]]):
        raise DataError(f"{name}: {path} lacks the upstream column(s) {', '.join(missing)} (it has "
                        f"{', '.join(rows[0])}); use the file from {spec.source}")
    questions = list(itertools.islice(spec.convert(rows), limit))
    if not questions:
        raise DataError(f"{name}: {path} holds no questions")
    return Dataset(name, path, sha256_file(path), len(rows), questions, known_version=False)


from . import arc, gpqa, gsm8k, hallumix, hellaswag, hle, math500, mmlu_pro, simpleqa, truthfulqa  # noqa: E402,F401
