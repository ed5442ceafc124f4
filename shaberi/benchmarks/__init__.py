"""The benchmark registry: each benchmark is one small module that turns upstream rows into questions.

A module registers itself with ``@BENCHMARKS.register(name, scale=(lo, hi), data={…}, prompts=FOLDER)`` on a
function mapping the upstream rows (dicts with the upstream's own column names) to ``Question`` objects (a
``Convert``): the one place naming its code, its data entry (where the file is, where it comes from, the
columns it needs) and its templates (``generation/<name>.jinja``, ``judging/<name>/`` in ``FOLDER``). A
plugin's benchmark registers the same way and is listed after the built-ins (``docs/reference/plugins.md``).
"""

from __future__ import annotations

import collections
import csv
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from ..errors import DataError
from ..extract import COMMON_RULES
from ..registry import Registry
from ..resources import PROMPTS, resource_dir, sha256_file

__all__ = ["BENCHMARKS", "BUILTIN_PROMPTS", "OVERALL", "Benchmark", "Convert", "Dataset", "Question", "load", "pull",
           "registry", "resolve"]

FORMATS = (".jsonl", ".json", ".csv", ".parquet")
BUILTIN_PROMPTS = resource_dir("prompts")  # shaberi's own template folder, the built-in benchmarks' ``prompts=``


@dataclass(frozen=True)
class Question:
    benchmark: str
    question_id: str
    turns: list[str]
    reference: str | None = None
    criteria: str | None = None
    category: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Convert(Protocol):
    """Upstream rows, with the upstream's own column names, to questions. A benchmark whose data entry names a
    ``references`` file also gets those rows, as ``references=``."""

    def __call__(self, rows: list[dict[str, Any]], /) -> Iterable[Question]: ...


@dataclass(frozen=True)
class Benchmark:
    name: str
    scale: tuple[int, int]  # the judge's score range
    convert: Convert
    data: Mapping[str, object]  # its data entry: file, columns, where it comes from (``_check_spec``)
    rules: tuple[str, ...]  # score-extraction rules, in order (see shaberi.extract)
    excluded: frozenset[str] = frozenset()  # question ids kept in the tables but left out of every score
    prompts: Path | None = None  # the folder of its templates (None: found on the template path)


@dataclass(frozen=True)
class Dataset:
    """One benchmark's questions plus the provenance recorded in ``runs``."""

    benchmark: str
    path: Path
    sha256: str
    rows: int
    questions: list[Question]
    known_version: bool

    def provenance(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "sha256": self.sha256,
            "rows": self.rows,
            "questions": len(self.questions),
            "known_version": self.known_version,
        }


def _check_spec(name: str, spec: Benchmark) -> None:
    """A benchmark that would fail only when run (a traceback, and a failed run row left behind) is refused when
    registered: a plugin bringing one cannot be loaded, one line naming it (``Registry``)."""
    low, high = spec.scale if isinstance(spec.scale, tuple) and len(spec.scale) == 2 else (None, None)
    if not (isinstance(low, int) and isinstance(high, int) and low < high):
        raise ValueError(f"benchmark {name!r}: scale must be (low, high), two integers with low < high, not "
                         f"{spec.scale!r}")
    data = spec.data
    if not isinstance(data, Mapping):
        raise ValueError(f"benchmark {name!r}: data must be a dict in the keys of docs/reference/plugins.md, not "
                         f"{type(data).__name__}")
    for key in ("file", "columns"):
        if key not in data:
            raise ValueError(f"benchmark {name!r}: its data entry has no {key!r} (docs/reference/plugins.md: 'file' "
                             "is the dataset's path under --data-dir without the suffix, 'columns' the columns it "
                             "needs)")
    texts = ("file", "title", "source", "hf_repo", "hf_revision", "hf_file", "references")
    if bad := next((k for k in texts if k in data and not _present_text(data[k])), None):
        raise ValueError(f"benchmark {name!r}: data[{bad!r}] must be a non-empty string, not {data[bad]!r}")
    lists = ("columns", "id_columns", "nullable", "sha256", "reference_columns", "reference_sha256")
    if bad := next((k for k in lists if k in data and not _names(data[k], nested=k == "columns")), None):
        raise ValueError(f"benchmark {name!r}: data[{bad!r}] must be a list of column names"
                         f"{' (a nested list: any one of them)' if bad == 'columns' else ''}, not {data[bad]!r}")
    if "hf_repo" in data and (missing := [k for k in ("hf_revision", "hf_file") if k not in data]):
        raise ValueError(f"benchmark {name!r}: data names an 'hf_repo' but no {' and no '.join(map(repr, missing))}")
    if "references" in data and "reference_columns" not in data:
        raise ValueError(f"benchmark {name!r}: data names a 'references' file but no 'reference_columns'")


def _present_text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _names(value: object, nested: bool = False) -> bool:
    return isinstance(value, list) and bool(value) and all(
        _present_text(v) or (nested and _names(v)) for v in value)


def _make(name: str, convert: Convert, *, scale: tuple[int, int], data: Mapping[str, object] | None = None,
          prompts: Path | str | None = None, rules: tuple[str, ...] = COMMON_RULES, excluded: Iterable[object] = ()
          ) -> Benchmark:
    """``BENCHMARKS.register(name, scale=…, data=…, prompts=…)`` on a ``Convert``: ``data``, its data entry
    (where its file is, where it comes from, the columns it needs); ``prompts``, the folder holding its
    ``generation/<name>.jinja`` and ``judging/<name>/`` (a plugin's is added to ``PROMPTS``). Both are
    required: one module names everything a benchmark is."""
    if data is None:
        raise ValueError(f"benchmark {name!r} has no data entry: register it with data={{'file': …, 'columns': "
                         "[…]} (docs/reference/plugins.md)")
    if prompts is None:
        raise ValueError(f"benchmark {name!r} names no template folder: register it with prompts=FOLDER, the "
                         f"folder holding generation/{name}.jinja and judging/{name}/ (docs/reference/plugins.md)")
    folder = Path(prompts)
    if folder != BUILTIN_PROMPTS and not PROMPTS.holds(folder):  # a plugin's: searched after shaberi's own
        PROMPTS.register(name, folder)
    return Benchmark(name, scale, convert, data, rules, frozenset(str(q) for q in excluded), folder)


BENCHMARKS: Registry[Benchmark] = Registry("benchmark", takes_all=True, make=_make, check=_check_spec)

# The benchmarks making the overall score and a run's completeness (the design's four); every other one,
# built-in or a plugin's, never changes it, so installing a plugin changes no stored run's score.
OVERALL = ("elyza", "tengu", "mt_bench", "rakuda")


def registry() -> dict[str, dict[str, Any]]:
    """Every benchmark's data entry, in registration order (the built-ins', then each plugin's), with
    ``in_overall``: whether it is one of the four that make the overall score."""
    return {name: dict(spec.data) | {"in_overall": name in OVERALL} for name, spec in BENCHMARKS.items()}


def resolve(spec: str) -> list[str]:
    """``all`` (every benchmark but the opt-in ones, in registration order, the plugins' last) or a
    comma-separated list of benchmark names, validated."""
    entries = registry()
    known = [n for n in entries if n in BENCHMARKS]
    everything = [n for n in known if not entries[n].get("opt_in")]
    return BENCHMARKS.resolve(spec, everything, [n for n in known if n not in everything])


def locate(name: str, data_dir: Path, key: str = "file") -> Path:
    entry = registry()[name]
    stem = data_dir / entry[key]
    found = [stem.with_suffix(ext) for ext in FORMATS if stem.with_suffix(ext).is_file()]
    if len(found) > 1:  # which one is the data? not ours to guess
        raise DataError(f"{name}: two files for one benchmark ({', '.join(str(f) for f in found)}); keep one")
    if found:
        return found[0]
    where = (f"put {entry['hf_repo']}'s {entry['hf_file']} there, or run: shaberi data pull --data-dir {data_dir}"
             if "hf_repo" in entry else f"it comes from {entry['source']}" if "source" in entry else
             "put the benchmark's data file there (its data entry names no source: see the plugin's documentation)")
    raise DataError(f"{name}: no dataset file at {stem}.{{{','.join(ext[1:] for ext in FORMATS)}}}; {where}")


def _origin(entry: Mapping) -> str:
    """Where a benchmark's file comes from, as its entry says (a plugin's may not say)."""
    return str(entry.get("hf_repo") or entry.get("source") or "the plugin's documentation (its data entry names no "
                                                                "source)")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines, JSON array, CSV or Parquet file, with the file's own column names."""
    return read_located(path)[0]


def read_located(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows, and where each one is: ``file:line`` (JSON Lines, CSV) or ``file row n`` (JSON array,
    Parquet), for error messages that point at the row. Regular files only: a device or a pipe (a link to
    /dev/zero) would be read without end."""
    if path.exists() and not path.is_file():
        raise DataError(f"{path}: not a regular file (a folder, a device or a pipe); give the data file itself")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows = pq.read_table(path).to_pylist()
            return rows, [f"{path} row {i}" for i in range(1, len(rows) + 1)]
        if path.suffix == ".csv":
            with open(path, newline="", encoding="utf-8-sig") as fh:
                reader = csv.DictReader(fh, strict=True)  # a stray quote is an error, not a merged row
                rows, where, start = [], [], 2
                try:
                    for row in reader:
                        rows.append(row)
                        where.append(f"{path}:{start}")
                        start = reader.line_num + 1
                except csv.Error as exc:
                    raise DataError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None
                return rows, where
        text = path.read_bytes()
        if path.suffix == ".json" and text.lstrip().startswith(b"["):
            rows = orjson.loads(text)
            return rows, [f"{path} row {i}" for i in range(1, len(rows) + 1)]
        numbered = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        rows, where = [], []
        for n, line in numbered:
            try:
                rows.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise DataError(f"{path}:{n}: not a JSON object ({exc})") from None
            where.append(f"{path}:{n}")
        return rows, where
    except (orjson.JSONDecodeError, UnicodeDecodeError, OSError, ValueError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


def load(name: str, data_dir: Path, limit: int | None = None) -> Dataset:
    """Load, validate and convert one benchmark's upstream file."""
    entry = registry()[name]
    path = locate(name, data_dir)
    rows = _checked_rows(name, path, entry["columns"], entry.get("id_columns", []), entry)
    extra = {}
    if "references" in entry:
        ref_path = locate(name, data_dir, "references")
        extra["references"] = _checked_rows(name, ref_path, entry["reference_columns"], ["question_id"], entry)
    try:
        questions = list(BENCHMARKS[name].convert(rows, **extra))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise DataError(f"{name}: {path}: a row {name} cannot read ({type(exc).__name__}: {exc}); check its ids and "
                        f"columns against {_origin(entry)}") from None
    for q in questions:
        if problem := _malformed(name, q):
            raise DataError(f"{name}: {path}: its Convert made a question {problem}; fix the benchmark's Convert "
                            "(a plugin's: docs/reference/plugins.md), or the row it came from")
    repeated = [q for q, n in collections.Counter(q.question_id for q in questions).items() if n > 1]
    if repeated:  # ids read as the benchmark reads them ('011' is 11; a row without an id takes its row number)
        raise DataError(f"{name}: {path}: question id {repeated[0]} is given to more than one row "
                        f"({_where_id(repeated[0], rows, entry.get('id_columns', []), path)}); every question "
                        "needs its own id")
    questions = questions[:limit]
    if not questions:
        raise DataError(f"{name}: {path} holds no questions; re-download it with: shaberi data pull")
    digest = sha256_file(path)
    return Dataset(name, path, digest, len(rows), questions, digest in entry.get("sha256", []))


def _malformed(name: str, q: object) -> str | None:
    """What is wrong with a question a ``Convert`` made, found before a run writes anything: an id that is not
    text would fail writing the questions, no turn or a blank one rendering the prompt (a traceback and a
    failed run row, before)."""
    if not isinstance(q, Question):
        return f"that is a {type(q).__name__}, not a shaberi.benchmarks.Question"
    if not (isinstance(q.question_id, str) and q.question_id.strip()):
        return f"whose question_id is {q.question_id!r} ({type(q.question_id).__name__}), not a non-empty string"
    said = f"(question_id {q.question_id!r})"
    if q.benchmark != name:
        return f"{said} of benchmark {q.benchmark!r}"
    if not isinstance(q.turns, list) or not q.turns:
        return f"{said} with no turns: give it the question text as turns=[text]"
    if blank := [t for t in q.turns if not (isinstance(t, str) and t.strip())]:
        return f"{said} with a turn that is not text or is blank ({blank[0]!r})"
    if field_ := next((f for f in ("reference", "criteria", "category")
                       if not isinstance(getattr(q, f), str | None)), None):
        return f"{said} whose {field_} is {type(getattr(q, field_)).__name__}, not a string or None"
    return None


def _checked_rows(name: str, path: Path, columns: list, id_columns: list[str], entry: dict[str, Any]) -> list[dict[str,
                  Any]]:
    """The file's rows, refused (pointing at the row) when one lacks a required column or its value (a CSV
    row cut short, a null: it would be asked as the text "None"), or repeats a question id: a repeated id
    would file one answer under another question's id. ``nullable`` columns may be empty."""
    rows, where = read_located(path)
    alternatives = [[c] if isinstance(c, str) else c for c in columns]
    nullable = set(entry.get("nullable", []))
    seen: dict[str, str] = {}
    for row, at in zip(rows, where, strict=True):
        if not isinstance(row, dict):
            raise DataError(f"{name}: {at}: not a JSON object")
        if missing := ["/".join(a) for a in alternatives
                       if not any(c in row and (c in nullable or _present(row[c])) for c in a)]:
            raise DataError(
                f"{name}: {at}: the row lacks the upstream column(s) {', '.join(missing)} "
                f"(it has {', '.join(row) or 'none'}); use the file from {_origin(entry)}"
            )
        key = next((c for c in id_columns if row.get(c) not in (None, "")), None)
        if key is not None:
            qid = str(row[key])
            if qid in seen:
                raise DataError(f"{name}: {at}: question id {qid} repeats {seen[qid]}; every question needs its own "
                                f"{key}")
            seen[qid] = at
    return rows


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


def _where_id(qid: str, rows: list[dict[str, Any]], id_columns: list[str], path: Path) -> str:
    """Where the rows that read as question ``qid`` are, as far as the file says."""
    def reads_as(row: dict[str, Any], index: int) -> bool:
        value = next((row[c] for c in id_columns if _present(row.get(c))), index)
        try:
            return str(int(value)) == qid
        except (TypeError, ValueError):
            return str(value) == qid

    hits = [i for i, row in enumerate(rows, start=1) if reads_as(row, i)]
    return ", ".join(f"row {i}" for i in hits[:5]) if hits else f"in {path.name}"


def pull(name: str, data_dir: Path) -> Path:
    """Download the registered upstream file from the Hugging Face hub into the data directory."""
    entry = registry()[name]
    if "hf_repo" not in entry:
        raise DataError(f"{name} is not on the Hugging Face hub; download it from {_origin(entry)} into "
                        f"{data_dir / Path(entry['file']).parent}")
    suffix = Path(entry["hf_file"]).suffix
    target = (data_dir / entry["file"]).with_suffix(suffix)
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # its retry chatter would bury our one-line error
        cached = hf_hub_download(entry["hf_repo"], entry["hf_file"], repo_type="dataset",
                                 revision=entry["hf_revision"])
    except Exception as exc:
        raise DataError(
            f"{name}: cannot download {entry['hf_repo']}/{entry['hf_file']} from the Hugging Face hub "
            f"({type(exc).__name__}); without internet, copy that file to {target} by hand"
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    for ext in FORMATS:  # one file per benchmark, so the loader cannot pick a stale one
        target.with_suffix(ext).unlink(missing_ok=True)
    shutil.copyfile(cached, target)
    return target


def _text(value: object) -> str | None:
    """Upstream cells may be None, NaN-as-empty (CSV) or numbers; questions hold text or None."""
    if value is None:
        return None
    s = str(value)
    return s if s.strip() else None


# Registration, in this order: ``all`` and every listing follow it.
from . import elyza, tengu, mt_bench, rakuda, mt_bench_full, mt_bench_80  # noqa: E402,F401,I001
