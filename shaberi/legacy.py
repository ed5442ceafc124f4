"""``shaberi import-legacy PATH``: original Shaberi result trees into the same tables as new runs.

    PATH/data/model_answers/<org__dataset>/<org__model>.json             JSON Lines despite the name
    PATH/data/judgements/judge_<judge>/<org__dataset>/<org__model>.json  + score, sometimes judge_output

One run per model (tag ``legacy``, model ``org/model``), one judge per ``judge_*`` folder. Question keys
as the design lists them: ELYZA and the 80-question MT-Bench by order of first appearance of the question
text (so a repeated question is the same question), Tengu by ``id`` or that order, MT-Bench by ``id``,
Rakuda by ``question_id``. A file in the 60-question MT-Bench folder that holds the older 80-question set
(``Category`` and no ``id``) is imported as ``mt_bench_80``, never pooled with the 60. Scores may be int,
float, null, or a dict holding ``score`` (a known bug; its ``judge_output`` goes with it). A score outside the
benchmark's judging scale, or not a real number (a bool, a string, NaN, inf), is no verdict: the row is imported
unscored with the reason in ``error``, never averaged by the views, and the report counts and names them. Only
``leaderboard --as-published`` counts such a score, as the original tooling did (``_published``): its
``multijudge-viz.py`` read each file with ``pandas.read_json``, which makes the score column numbers (true 1,
false 0, "7" 7), and averaged the column, NaN and null left out. The value it counted ends the row's ``error``
(``; as published: -7``, ``AS_PUBLISHED_MARK``); the score stays null. A repeated question counts once, with its
last row; its earlier rows are kept as superseded judgements (``prompt_hash`` ``legacy:repeat<k>``), which
``leaderboard --as-published`` counts as the original tooling did. The import report names the models whose
numbers differ between the two (repeats, set-aside scores). Tengu 61–65 are kept in the tables and left out of
scores by the views. Models are processed one at a time in each of a process per core (up to 8), so memory
follows the largest models, not the tree.

``--judge-prompts [JUDGE=]PATH`` says which prompts a judge folder's judgements were made with (the published
GPT-4.1 judgements: the original's 2025-04 prompts): they are stored under that prompt set's label (``gpt-4.1-2025-04-14
[original:8578939]``, ``judging.promptsets``), so that a new run judged with the same clone and judge lands in the
same leaderboard columns; unnamed, a judge's prompts are unknown and it keeps its bare name.

The tree is read twice: first checked whole, then imported, so that bad input (a file that is not a regular
file, a JSON array where JSON Lines are expected, a line over ``MAX_LINE`` bytes, a row without its question key,
a ``judge_output`` that is not text, a file none of whose scores is on the benchmark's scale) stops the import with
one line before anything is written. A JSON array is refused, not read: the original tooling read every file with
``pd.read_json(path, lines=True)``, which never reads its rows (``_rows``). An empty file (nothing but whitespace,
most often 0 bytes) holds no model's results: it is skipped, counted (``empty files``) and named in the report
(the first few), and adds no run, no judge and no file to the counts.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import stat
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeGuard

import orjson

from . import benchmarks as bm
from .errors import DataError, UsageError
from .extract import AS_PUBLISHED_MARK
from .judging.promptsets import PromptSet
from .reports.leaderboard import published_differences
from .run_info import RunInfo
from .tables.rows import AnswerKey, answer, judgement, question
from .tables.store import Store, now_us

__all__ = ["MAX_LINE", "ImportReport", "folders", "import_tree", "report_lines"]

TAG = "legacy"
MAX_LINE = 64 << 20  # bytes per JSON line: a longer one is no legacy row (a legacy row is a few kB)
_WARNED_PER_FILE = 3  # set-aside scores named by line per file; the rest are counted
_WARNED_EMPTY = 3  # empty files named; the rest are counted
_BOM = b"\xef\xbb\xbf"


def folders() -> dict[str, str]:
    """A legacy tree's dataset folder -> the benchmark it holds (``legacy_folder`` in the benchmark's data
    entry)."""
    return {entry["legacy_folder"]: name for name, entry in bm.registry().items() if "legacy_folder" in entry}


@dataclass
class ImportReport:
    models: int = 0
    files: int = 0
    answers: int = 0
    judgements: int = 0
    counts: Counter = field(default_factory=Counter)  # edge cases met, by kind
    warnings: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)  # run ids of models with repeated judged rows
    counted: list[str] = field(default_factory=list)  # run ids with set-aside scores --as-published counts
    as_published: int = 0  # set-aside scores --as-published counts (the original tooling averaged them)
    differences: list[str] = field(default_factory=list)  # where --as-published differs from the default

    def add(self, other: ImportReport) -> None:
        """Fold in what importing other models found (a worker's report)."""
        for f in fields(self):
            mine = getattr(self, f.name)
            if isinstance(mine, Counter):
                mine.update(getattr(other, f.name))
            else:
                setattr(self, f.name, mine + getattr(other, f.name))


def _files(root: Path, report: ImportReport) -> dict[str, list[tuple[str | None, str, Path]]]:
    """model -> [(judge or None for answers, dataset folder, path)], unknown folders reported and skipped; a
    path in a known folder that is not a regular file refused (``_regular``)."""
    by_model: dict[str, list[tuple[str | None, str, Path]]] = defaultdict(list)
    answers = sorted((root / "model_answers").glob("*/*.json"))
    judged = sorted((root / "judgements").glob("judge_*/*/*.json"))
    skipped: set[Path] = set()
    known = folders()
    for path in [*answers, *judged]:
        folder = path.parent.name
        if folder not in known:
            if path.parent not in skipped:
                skipped.add(path.parent)
                report.warnings.append(f"skipped unknown dataset folder {path.parent}")
            report.counts["unknown_folder_files"] += 1
            continue
        _regular(path)
        if _empty(path):  # no rows, so no model's results: no run (a phantom model with no scores) from it
            report.counts["empty_files"] += 1
            if report.counts["empty_files"] <= _WARNED_EMPTY:
                report.warnings.append(f"skipped empty file {path}: it holds no rows, so it adds no run")
            continue
        judge = path.parent.parent.name.removeprefix("judge_") if path.parts[-4] == "judgements" else None
        by_model[path.stem.replace("__", "/", 1)].append((judge, folder, path))
    return by_model


def _regular(path: Path) -> None:
    """Only regular files are read (a symlink to one is fine): a directory named ``*.json`` holds no rows, a
    dangling symlink none either, a device (``/dev/zero``) reads without end and a FIFO blocks."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        what = "a symlink to nothing" if path.is_symlink() else exc.strerror
        raise DataError(f"{path} cannot be read ({what}): remove it from the tree or make it a JSON Lines file, "
                        "then import again") from None
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "a special file")
        raise DataError(f"{path} is {kind}, not a JSON Lines file: move it out of the tree, then import again")


def _empty(path: Path) -> bool:
    """Whether a regular file holds nothing but whitespace (most often 0 bytes): no rows at all."""
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 16):
                if chunk.strip():
                    return False
    except OSError:
        return False  # read again by _rows, which says why it cannot be
    return True


@dataclass(frozen=True)
class _Row:
    """One legacy row, where it is, and for a judgement what it counts as."""

    line: int
    data: dict[str, Any]
    score: float | None = None  # None: no score (null, or set aside: ``problem`` says why)
    output: str | None = None  # the judge's reply
    problem: str | None = None  # why a score that was given is not imported as one
    published: float | None = None  # a set-aside score as the original tooling averaged it (``_published``)


def _rows(path: Path, report: ImportReport) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of a JSON Lines file; a line that is not a JSON object is reported and skipped, one
    over ``MAX_LINE`` bytes refused (read line by line, never more than that at once), and so is a file that is a
    JSON array (its first non-blank line opens one): the original tooling's ``pd.read_json(path, lines=True)``
    never read its rows (it fails on an array over several lines; one on a single line it makes one row of
    numbered columns, no score), and read by line it would be malformed lines, nothing imported, exit 0."""
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        with open(path, "rb") as fh:
            if b"\\u" in fh.read(4096):
                report.counts["ascii_escaped_files"] += 1
            fh.seek(0)
            started = False  # a non-blank line seen
            for number, line in enumerate(iter(lambda: fh.readline(MAX_LINE + 1), b""), start=1):
                if not started and line.strip():
                    started = True
                    if line.removeprefix(_BOM).lstrip().startswith(b"["):
                        raise DataError(f"{path} is a JSON array, where JSON Lines (one JSON object per line) are "
                                        "expected: the original tooling's pandas.read_json(path, lines=True) did not "
                                        "read its rows either; write one row per line, or remove it from the tree, "
                                        "then import again")
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    raise DataError(f"{path}:{number}: a line longer than {MAX_LINE / 2**20:g} MB, which no legacy row "
                                    "is: is it a JSON Lines file? Remove it from the tree, then import again")
                if not line.strip():
                    continue
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError:
                    try:  # Python's json wrote NaN and Infinity for the original tooling: a row, its score none
                        row = json.loads(line)
                    except ValueError:
                        row = None
                if not isinstance(row, dict):
                    report.counts["malformed_lines"] += 1
                    report.warnings.append(f"{path}:{number}: not a JSON object, line skipped")
                    continue
                rows.append((number, row))
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}; fix its permissions or remove it from the tree"
                        ) from None
    return rows


def _benchmark(folder: str, rows: list[tuple[int, dict[str, Any]]], report: ImportReport) -> str:
    name = folders()[folder]
    if name == "mt_bench" and rows and "id" not in rows[0][1] and "Category" in rows[0][1]:
        report.counts["mt_bench_80_files_in_60_folder"] += 1
        return "mt_bench_80"
    return name


def _keyed(name: str, path: Path, rows: list[_Row], report: ImportReport) -> dict[str, list[_Row]]:
    """question_id -> its rows, in file order (more than one for a repeated question). A row without its
    question key is refused: keyed by its position instead, it would be filed under another question."""
    keyed: dict[str, list[_Row]] = defaultdict(list)
    order: dict[str, int] = {}
    title = bm.registry()[name].get("title", name)
    by_id = "question_id" if name == "rakuda" else "id" if name == "mt_bench" or (
        name == "tengu" and rows and _present(rows[0].data.get("id"))) else None
    for row in rows:
        if by_id is not None:
            value = row.data.get(by_id)
            if not _id_like(value):
                said = "no " + by_id if not _present(value) else f"{by_id} {_shown(value)}, not a number or text"
                raise DataError(f"{path}:{row.line}: the row has {said}; {title} rows are keyed by {by_id}"
                                f"{' in this file (its first row has one)' if name == 'tengu' else ''}: give it "
                                "its question's id or remove the row, then import again")
            qid = str(value)
        else:  # ELYZA, MT-Bench 80, Tengu without id: order of first appearance of the question text
            text = row.data.get("Question", row.data.get("input"))
            if not isinstance(text, str) or not text.strip():
                raise DataError(f"{path}:{row.line}: the row has no question text (Question or input), by which "
                                f"{title} rows are keyed: add it or remove the row, then import again")
            qid = str(order.setdefault(text, len(order) + 1))
        if qid in keyed:
            report.counts["duplicate_rows"] += 1
        keyed[qid].append(row)
    if name == "tengu":
        report.counts["tengu_files_with_id" if by_id else "tengu_files_without_id"] += 1
    return keyed


def _id_like(value: object) -> bool:
    return (isinstance(value, str) and bool(value.strip())) or _integer(value)


def _integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is no 1


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


def _shown(value: object) -> str:
    """A JSON value as the file has it, short, for a message."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits
        text = str(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _file(judge: str | None, folder: str, path: Path, report: ImportReport) -> tuple[str, dict[str, list[_Row]]]:
    """One file's benchmark and keyed rows, a judgement file's scores read (``_score``): everything an import
    refuses is found here, so the check pass before writing calls it too."""
    located = _rows(path, report)
    name = _benchmark(folder, located, report)
    if judge is None:
        return name, _keyed(name, path, [_Row(n, row) for n, row in located], report)
    scale = bm.BENCHMARKS[name].scale
    rows = [_score(path, n, row, scale, report) for n, row in located]
    if (aside := [r for r in rows if r.problem]) and not any(r.score is not None for r in rows):
        raise DataError(f"{path}: none of its scores is on {bm.registry()[name].get('title', name)}'s "
                        f"{scale[0]}–{scale[1]} scale (line {aside[0].line}: {aside[0].problem}): is it another "
                        "benchmark's file, or scores on another scale? Fix or remove it, then import again")
    for row in aside[:_WARNED_PER_FILE]:
        report.warnings.append(f"{path}:{row.line}: {row.problem}: imported unscored")
    if len(aside) > _WARNED_PER_FILE:
        report.warnings.append(f"{path}: {len(aside) - _WARNED_PER_FILE} more scores set aside (imported unscored)")
    return name, _keyed(name, path, rows, report)


def _question(run_id: str, name: str, qid: str, row: dict[str, Any], at: int) -> dict[str, Any]:
    text = row.get("Question") if "Question" in row else row.get("input", row.get("text"))
    return question(run_id, name, qid, [str(text or "")], created_at=at,
                    reference=_text(row.get("output") if name == "elyza" else row.get("Answer")),
                    criteria=_text(row.get("eval_aspect") if name == "elyza" else row.get("Criteria")),
                    category=_text(row.get("category", row.get("Category"))))


def _text(value: object) -> str | None:
    return None if value is None or (isinstance(value, str) and not value.strip()) else str(value)


def _answer(run_id: str, model: str, name: str, qid: str, row: dict[str, Any], at: int, report: ImportReport
           ) -> dict[str, Any]:
    """The answer row; a ``ModelAnswer`` that is not text (a number, a dict) is an error row, never a text."""
    content = row.get("ModelAnswer")
    error = _text(row.get("ErrorType"))
    if error is None and content is None:
        error = "no ModelAnswer in the legacy file"
    elif error is None and not isinstance(content, str):
        report.counts["answers_not_text"] += 1
        error = f"legacy: ModelAnswer is {_shown(content)}, not text"
    attempts = row.get("ErrorCount")
    return answer(run_id, AnswerKey(name, qid), model, content=None if error else content, error=error,
                  error_type="legacy_error" if error else None, calls=1, created_at=at,
                  attempts=attempts if _integer(attempts) and 0 <= attempts < 2**31 else None)


def _score(path: Path, line: int, row: dict[str, Any], scale: tuple[int, int], report: ImportReport) -> _Row:
    """The row's score, if it is one: a real number (not a bool, a string, NaN or inf) on the benchmark's scale.
    Any other is set aside with the reason; a ``judge_output`` that is not text is refused."""
    score, output = row.get("score"), row.get("judge_output")
    if isinstance(score, dict):  # the known bug: the score and its reply nested in a dict
        report.counts["dict_scores"] += 1
        nested: dict[str, Any] = score
        score, output = nested.get("score"), nested.get("judge_output", output)
    if output is not None and not isinstance(output, str):
        raise DataError(f"{path}:{line}: judge_output is {_shown(output)}, not the judge's reply as text: make it a "
                        "string or null, then import again")
    if score is None:
        report.counts["null_scores"] += 1
        return _Row(line, row, None, output)
    low, high = scale
    if not _integer(score) and not (isinstance(score, float) and math.isfinite(score)):
        report.counts["scores_not_a_number"] += 1
        problem = f"score {_shown(score)} is not a number"
    elif not low <= score <= high:
        report.counts["scores_outside_the_scale"] += 1
        problem = f"score {_shown(score)} outside the {low}–{high} scale"
    else:
        if isinstance(score, float):
            report.counts["float_scores"] += 1
        return _Row(line, row, float(score), output)
    published = _published(score)
    report.as_published += published is not None
    return _Row(line, row, None, output, problem, published)


def _published(value: object) -> float | None:
    """A set-aside score as the original tooling averaged it; None where it did not. Its ``multijudge-viz.py``
    read each judgement file with ``pd.read_json(path, lines=True)``, which turns the score column into numbers
    as Python's ``float()`` reads each value (true 1, false 0, "7" and " 7 " 7, -7 and 1e308 as they are), then
    averaged the column with ``groupby(...).score.mean()``, which leaves NaN (null, "nan") out. Counted here:
    those finite numbers. Not counted: NaN, an infinity (the original's mean would be inf, no score), and what
    stopped the original (text that is no number, a list: the mean of such a column raises TypeError; an
    integer beyond 64 bits, which its JSON reader refuses)."""
    if isinstance(value, bool | float | str) or (_integer(value) and value.bit_length() <= 64):
        try:
            number = float(value)
        except (ValueError, OverflowError):
            return None
        return number if math.isfinite(number) else None
    return None


def import_tree(path: Path, results_dir: Path, prompts: dict[str | None, PromptSet] | None = None) -> ImportReport:
    """Import the tree; ``prompts``: the prompt set of each judge folder's judgements (key None: every judge's)."""
    root = path / "data" if (path / "data").is_dir() else path
    if not (root / "model_answers").is_dir() and not (root / "judgements").is_dir():
        raise DataError(f"{path} is not an original Shaberi result tree: expected {path}/data/model_answers and "
                        f"{path}/data/judgements")
    report = ImportReport()
    by_model = _files(root, report)
    judges = sorted({judge for files in by_model.values() for judge, _, _ in files if judge is not None})
    if unknown := sorted(j for j in prompts or {} if j is not None and j not in judges):
        raise UsageError(f"--judge-prompts names judge {unknown[0]!r}, which {path} has no judge_{unknown[0]} folder "
                         f"for; its judges: {', '.join(judges) or 'none'}")
    global _job
    store = Store(results_dir)
    # One pass: each model read once, its tables staged; published only once every model is, so that bad input
    # anywhere stops the import before anything is written.
    with store.staging() as staging:
        _job = (results_dir, prompts or {}, staging)
        with _mapper(len(by_model)) as each:  # models are independent
            staged = list(each(_stage_one, by_model.items()))
        for model, (part, run_id, tables) in zip(by_model, staged, strict=True):
            with store.lock(run_id, f"legacy import of {model!r}"):
                for table, path in tables.items():
                    store.replace(table, run_id, path)
            report.add(part)
    if differ := list(dict.fromkeys([*report.repeated, *report.counted])):
        report.differences = [
            f"{model}: {title} ({'all judges' if judge == '*' else judge}) {_shown_mean(ours)} by default, "
            f"{_shown_mean(published)} as published ({_shown_mean(published - ours, '+')})"
            for model, judge, title, ours, published in published_differences(results_dir, differ)
            if not abs(published - ours) <= 1e-9]  # not the rounding of two orders of summation (inf differs)
    return report


# What a worker imports into, with, and where it stages: set before the workers are forked, so nothing of it is
# pickled.
_job: tuple[Path, dict[str | None, PromptSet], Path] = (Path(), {}, Path())


@contextlib.contextmanager
def _mapper(models: int) -> Iterator[Callable[..., Iterator[Any]]]:
    """``map`` over a process per core for a tree of several models (forked: they start in milliseconds and
    inherit ``_job``); in this process for a small tree, a platform without fork, or a process running other
    threads (a notebook's kernel: a fork copies the locks they hold)."""
    cores = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    if models < 4 or cores < 2 or threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield map
        return
    with ProcessPoolExecutor(min(cores, models), mp_context=multiprocessing.get_context("fork")) as pool:
        try:
            yield pool.map
        except BaseException:
            pool.shutdown(cancel_futures=True)  # a model that failed stops the import: none after it is started
            raise


def _stage_one(item: tuple[str, list[tuple[str | None, str, Path]]]) -> tuple[ImportReport, str, dict[str, Path]]:
    """One model's tables staged (a worker's part of ``import_tree``): its report, run id and staged parts."""
    results_dir, prompts, staging = _job
    report = ImportReport()
    run_id, tables = _model_tables(*item, report, prompts)
    store = Store(results_dir)
    paths = {table: staging / f"{run_id}.{table}.parquet" for table in tables}
    for table, rows in tables.items():
        store.stage(table, rows, paths[table])
    return report, run_id, paths


def _shown_mean(value: float, sign: str = "") -> str:
    """A mean for the report: 4 decimals, or 4 digits when it is huge (a 1e308 the original averaged)."""
    return f"{value:{sign}.4f}" if abs(value) < 1e9 else f"{value:{sign}.4g}"


def _model_tables(model: str, files: list[tuple[str | None, str, Path]], report: ImportReport,
                  prompts: dict[str | None, PromptSet]) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """A model's files read into its run's rows: (run id, table -> rows)."""
    info = RunInfo(model=model, tag=TAG, base_url="", api_key=None, generation_config={}, benchmarks=[],
                   datasets={}, prompt_hashes={})
    at = now_us()
    questions: dict[tuple[str, str], dict[str, Any]] = {}
    answers: dict[tuple[str, str], dict[str, Any]] = {}
    judgements: dict[tuple[str, str, str, int], dict[str, Any]] = {}  # (benchmark, question, judge, repeats after it)
    judges: set[str] = set()
    for judge, folder, path in sorted(files, key=lambda f: (f[0] is not None, f[0] or "", f[1])):
        name, keyed = _file(judge, folder, path, report)
        report.files += 1
        for qid, repeats in keyed.items():
            row = repeats[-1].data
            if (name, qid) not in questions:
                questions[(name, qid)] = _question(info.run_id, name, qid, row, at)
            if judge is None or (name, qid) not in answers:  # answers files first; judgement files fill gaps
                answers[(name, qid)] = _answer(info.run_id, model, name, qid, row, at, report)
            if judge is None:
                continue
            prompt_set = prompts.get(judge) or prompts.get(None)
            label = prompt_set.judge(judge) if prompt_set else judge
            judges.add(label)
            if prompt_set is not None:
                info.judge_prompts[prompt_set.label or "shaberi"] = prompt_set.provenance()
            key = AnswerKey(name, qid)
            for k, each in enumerate(repeats):  # the last counts; the earlier ones are its history
                repeat = len(repeats) - 1 - k
                judgements[(name, qid, judge, repeat)] = judgement(
                    info.run_id, key, label, None, f"legacy:repeat{repeat}" if repeat else (
                        prompt_set.prompt_hash(name) if prompt_set else None), None,
                    prompt_set=prompt_set.label if prompt_set else None,
                    score=each.score, parse_method="legacy", judge_output=each.output,
                    error=None if each.score is not None else f"legacy: {each.problem or 'no score'}" + (
                        "" if each.published is None else f"{AS_PUBLISHED_MARK}{_number(each.published)}"),
                    created_at=at - repeat)
    info.benchmarks = sorted({name for name, _ in questions})
    info.judges = tuple(sorted(judges))
    report.models += 1
    report.answers += len(answers)
    report.judgements += sum(1 for key in judgements if key[3] == 0)
    if any(key[3] > 0 for key in judgements):
        report.repeated.append(info.run_id)
    if any(AS_PUBLISHED_MARK in (j["error"] or "") for j in judgements.values()):
        report.counted.append(info.run_id)
    return info.run_id, {"runs": [info.row("complete")], "questions": list(questions.values()),
                         "answers": list(answers.values()), "judgements": list(judgements.values())}


def _number(value: float) -> str:
    """A float as its shortest text that reads back as the same double (-7, 1, 2.5, 1e+308)."""
    text = repr(value)
    return text.removesuffix(".0")


def report_lines(report: ImportReport) -> list[str]:
    counts = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in sorted(report.counts.items()) if v)
    outside, not_number = report.counts["scores_outside_the_scale"], report.counts["scores_not_a_number"]
    aside = [] if not outside + not_number else [
        f"set aside {outside + not_number:,} scores ({outside:,} outside the benchmark's judging scale, "
        f"{not_number:,} not a number): their rows are imported unscored, the reason in judgements.error, and no "
        f"score counts them but shaberi leaderboard --as-published, which counts the {report.as_published:,} the "
        "original tooling averaged (numbers off the scale, true as 1, numeric text as its number)"]
    why = [*(["every row of a repeated question, which counts once here"] if report.repeated else []),
           *(["the set-aside scores it averaged"] if report.counted else [])]
    differ = [f"shaberi leaderboard --as-published counts as the original tooling did ({'; '.join(why)}), so these "
              "numbers differ:",
              *(f"  {d}" for d in report.differences)] if report.differences else []
    return [f"imported {report.models} models ({report.files} files): {report.answers:,} answers, "
            f"{report.judgements:,} judgements", *([counts] if counts else []), *aside, *report.warnings, *differ]
