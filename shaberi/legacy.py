"""``shaberi import-legacy PATH``: original Shaberi result trees into the same tables as new runs.

    PATH/data/model_answers/<org__dataset>/<org__model>.json             JSON Lines despite the name
    PATH/data/judgements/judge_<judge>/<org__dataset>/<org__model>.json  + score, sometimes judge_output

One run per model (tag ``legacy``, model ``org/model``), one judge per ``judge_*`` folder. Question keys
as the design lists them: ELYZA and the 80-question MT-Bench by order of first appearance of the question
text (so a repeated question is the same question), Tengu by ``id`` or that order, MT-Bench by ``id``,
Rakuda by ``question_id``. A file in the 60-question MT-Bench folder that holds the older 80-question set
(``Category`` and no ``id``) is imported as ``mt_bench_80``, never pooled with the 60. Scores may be int,
float, null, or a dict holding ``score`` (a known bug; its ``judge_output`` goes with it). A repeated
question counts once, with its last row; its earlier rows are kept as superseded judgements (``prompt_hash``
``legacy:repeat<k>``), which ``leaderboard --as-published`` counts as the original tooling did, and the
import report names the models whose numbers differ between the two. Tengu 61–65 are kept in the tables
and left out of scores by the views. Models are processed one at a time, so memory follows the largest
model, not the tree.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from . import benchmarks as bm
from .errors import DataError
from .run import RunInfo
from .tables.rows import AnswerKey, answer, judgement, question
from .tables.schema import TABLES
from .tables.store import Store, now_us

__all__ = ["ImportReport", "folders", "import_tree", "report_lines"]

TAG = "legacy"


def folders() -> dict[str, str]:
    """A legacy tree's dataset folder -> the benchmark it holds (``legacy_folder`` in data/datasets.toml)."""
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
    differences: list[str] = field(default_factory=list)  # where --as-published differs from the default


def _files(root: Path, report: ImportReport) -> dict[str, list[tuple[str | None, str, Path]]]:
    """model -> [(judge or None for answers, dataset folder, path)], unknown folders reported and skipped."""
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
        judge = path.parent.parent.name.removeprefix("judge_") if path.parts[-4] == "judgements" else None
        by_model[path.stem.replace("__", "/", 1)].append((judge, folder, path))
    return by_model


def _rows(path: Path, report: ImportReport) -> Iterator[dict]:
    data = path.read_bytes()
    if b"\\u" in data[:4096]:
        report.counts["ascii_escaped_files"] += 1
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            report.counts["malformed_lines"] += 1
            report.warnings.append(f"{path}:{number}: not a JSON object, line skipped")
            continue
        if isinstance(row, dict):
            yield row


def _benchmark(folder: str, rows: list[dict], report: ImportReport) -> str:
    name = folders()[folder]
    if name == "mt_bench" and rows and "id" not in rows[0] and "Category" in rows[0]:
        report.counts["mt_bench_80_files_in_60_folder"] += 1
        return "mt_bench_80"
    return name


def _keyed(name: str, rows: list[dict], report: ImportReport) -> dict[str, list[dict]]:
    """question_id -> its rows, in file order (more than one for a repeated question)."""
    keyed: dict[str, list[dict]] = defaultdict(list)
    order: dict[str, int] = {}
    for index, row in enumerate(rows):
        if name == "mt_bench":
            qid = str(row["id"])
        elif name == "rakuda":
            qid = str(row["question_id"])
        elif name == "tengu" and row.get("id") not in (None, ""):
            qid = str(row["id"])
        else:  # ELYZA, MT-Bench 80, Tengu without id: order of first appearance of the question text
            text = str(row.get("Question") or row.get("input") or index)
            qid = str(order.setdefault(text, len(order) + 1))
        if qid in keyed:
            report.counts["duplicate_rows"] += 1
        keyed[qid].append(row)
    if name == "tengu":
        report.counts["tengu_files_with_id" if rows and "id" in rows[0] else "tengu_files_without_id"] += 1
    return keyed


def _question(run_id: str, name: str, qid: str, row: dict, at: int) -> dict:
    text = row.get("Question") if "Question" in row else row.get("input", row.get("text"))
    return question(run_id, name, qid, [str(text or "")], created_at=at,
                    reference=_text(row.get("output") if name == "elyza" else row.get("Answer")),
                    criteria=_text(row.get("eval_aspect") if name == "elyza" else row.get("Criteria")),
                    category=_text(row.get("category", row.get("Category"))))


def _text(value: object) -> str | None:
    return None if value is None or (isinstance(value, str) and not value.strip()) else str(value)


def _answer(run_id: str, model: str, name: str, qid: str, row: dict, at: int) -> dict:
    content = row.get("ModelAnswer")
    error = row.get("ErrorType") or (None if content is not None else "no ModelAnswer in the legacy file")
    return answer(run_id, AnswerKey(name, qid), model, content=None if error else str(content), error=error,
                  error_type="legacy_error" if error else None, attempts=row.get("ErrorCount"), calls=1, created_at=at)


def _score(row: dict, report: ImportReport) -> tuple[float | None, str | None]:
    score, output = row.get("score"), row.get("judge_output")
    if isinstance(score, dict):  # the known bug: the score and its reply nested in a dict
        report.counts["dict_scores"] += 1
        nested: dict = score
        score, output = nested.get("score"), nested.get("judge_output", output)
    if score is None:
        report.counts["null_scores"] += 1
        return None, output
    if isinstance(score, float):
        report.counts["float_scores"] += 1
    try:
        return float(score), output
    except (TypeError, ValueError):
        report.counts["unreadable_scores"] += 1
        return None, output


def import_tree(path: Path, results_dir: Path) -> ImportReport:
    root = path / "data" if (path / "data").is_dir() else path
    if not (root / "model_answers").is_dir() and not (root / "judgements").is_dir():
        raise DataError(f"{path} is not an original Shaberi result tree: expected {path}/data/model_answers and "
                        f"{path}/data/judgements")
    report = ImportReport()
    store = Store(results_dir)
    for model, files in _files(root, report).items():
        _import_model(store, model, files, report)
    if report.repeated:
        from .reports.leaderboard import published_differences

        report.differences = [
            f"{model}: {title} ({'all judges' if judge == '*' else judge}) {ours:.4f} counting each question once, "
            f"{published:.4f} as published ({published - ours:+.4f})"
            for model, judge, title, ours, published in published_differences(results_dir, report.repeated)]
    return report


def _import_model(store: Store, model: str, files: list[tuple[str | None, str, Path]], report: ImportReport) -> None:
    info = RunInfo(model=model, tag=TAG, base_url="", api_key=None, generation_config={}, benchmarks=[],
                   datasets={}, prompt_hashes={})
    at = now_us()
    questions: dict[tuple[str, str], dict] = {}
    answers: dict[tuple[str, str], dict] = {}
    judgements: dict[tuple[str, str, str, int], dict] = {}  # (benchmark, question, judge, repeats after it)
    judges: set[str] = set()
    for judge, folder, path in sorted(files, key=lambda f: (f[0] is not None, f[0] or "", f[1])):
        rows = list(_rows(path, report))
        report.files += 1
        name = _benchmark(folder, rows, report)
        for qid, repeats in _keyed(name, rows, report).items():
            row = repeats[-1]
            if (name, qid) not in questions:
                questions[(name, qid)] = _question(info.run_id, name, qid, row, at)
            if judge is None or (name, qid) not in answers:  # answers files first; judgement files fill gaps
                answers[(name, qid)] = _answer(info.run_id, model, name, qid, row, at)
            if judge is None:
                continue
            judges.add(judge)
            for k, each in enumerate(repeats):  # the last counts; the earlier ones are its history
                score, output = _score(each, report)
                repeat = len(repeats) - 1 - k
                judgements[(name, qid, judge, repeat)] = judgement(
                    info.run_id, AnswerKey(name, qid), judge, None, f"legacy:repeat{repeat}" if repeat else None, None,
                    score=score, parse_method="legacy", judge_output=output,
                    error=None if score is not None else "legacy: no score", created_at=at - repeat)
    info.benchmarks = sorted({name for name, _ in questions})
    info.judges = tuple(sorted(judges))
    with store.lock(info.run_id, f"legacy import of {model!r}"):
        store.replace("runs", info.run_id, [info.row("complete")])
        store.replace("questions", info.run_id, list(questions.values()))
        store.replace("answers", info.run_id, list(answers.values()))
        store.replace("judgements", info.run_id, list(judgements.values()) or TABLES["judgements"].schema.empty_table())
    report.models += 1
    report.answers += len(answers)
    report.judgements += sum(1 for key in judgements if key[3] == 0)
    if any(key[3] > 0 for key in judgements):
        report.repeated.append(info.run_id)


def report_lines(report: ImportReport) -> list[str]:
    counts = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in sorted(report.counts.items()) if v)
    differ = ["repeated questions count once here; the original tooling counted every row (shaberi leaderboard "
              "--as-published):", *(f"  {d}" for d in report.differences)] if report.differences else []
    return [f"imported {report.models} models ({report.files} files): {report.answers:,} answers, "
            f"{report.judgements:,} judgements", *([counts] if counts else []), *report.warnings, *differ]

