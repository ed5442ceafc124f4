"""A results root whose path holds ``[``, ``]``, ``*``, ``?`` or spaces (issue #29). DuckDB, and fsspec on object
storage, read every path they are given as a glob pattern: under ``res [1]/`` a pattern matched nothing (``sql`` said
a part 'was replaced', the API raised DuckDB's error, a run on S3 could neither be read nor resumed), and ``a*/`` read
its sibling ``ab/`` as well. Each test runs the same evaluation under a plain path and compares: same numbers, exit 0,
no traceback, and a resume that calls nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

import shaberi
from shaberi.reports.inspector import Inspector
from shaberi.tables.sql import connect
from shaberi.testing import LoopbackServer

from .conftest import said, write_rakuda
from .conftest import shaberi as cli

SCORES = [7, 4, 9]  # the judge's verdicts: Rakuda 6.666666667 in every run
TEXTS = [f"質問{i} <<answer: 回答{i}です。>> <<judge: 理由{i}。\\nFINAL SCORE: {s}>>" for i, s in enumerate(SCORES)]
# What a reader prints; the results root itself stands as ROOT where a command names it.
READERS = {
    "scores": ["sql", "SELECT run_id, benchmark, judge, score, n, n_null FROM benchmark_scores ORDER BY ALL",
               "--format", "json"],
    "counts": ["sql", "SELECT (SELECT count(*) FROM raw_answers) AS answers, (SELECT count(*) FROM raw_judgements) "
               "AS judgements, (SELECT sum(requests) FROM token_usage) AS requests, "
               "(SELECT list(tag ORDER BY tag) FROM runs) AS tags", "--format", "json"],
    "view": ["view", "--tag", "default", "--format", "csv"],
    "family": ["view", "--tag", "fam", "--format", "csv"],
    "compare": ["compare", "default", "other", "--format", "json"],
    "leaderboard": ["leaderboard", "--format", "csv"],
}
# Columns that hold when something was done, not what.
VOLATILE = {"created_at", "updated_at", "started_at", "finished_at", "latency_ms", "duration_s", "stages",
            "concurrency_history", "elapsed_s"}


def ok(*args: str) -> str:
    """Run the command line; it must succeed and say nothing about a replaced part or a traceback."""
    done = cli(*args)
    assert done.returncode == 0, (args, done.stderr)
    assert "Traceback" not in done.stderr and "was replaced" not in done.stderr, (args, done.stderr)
    return done.stdout


def evaluate(root: Path | str, server: LoopbackServer, data: Path,
             tags: tuple[list[str], ...] = ([], ["--tag", "other"], ["--tag", "fam", "--runs", "2"])) -> None:
    """Runs default, other and the family fam-run1/2 of model m on Rakuda, judged by j; then the default run again,
    which must call nothing."""
    args = ["--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
            "--results-dir", str(root), "--data-dir", str(data)]
    before = server.stats()["calls"]
    for extra in tags:
        ok("run", *args, *extra)
    runs = sum(int(t[t.index("--runs") + 1]) if "--runs" in t else 1 for t in tags)
    assert server.stats()["calls"] - before == runs * 2 * len(TEXTS)  # an answer and a verdict per question
    ok("run", *args)
    assert server.stats()["calls"] - before == runs * 2 * len(TEXTS), "the resume called the server"


def stable(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame without the columns that say when, in one order."""
    keys = [c for c in ("run_id", "base_tag", "model", "judge", "benchmark") if c in frame.columns]
    return frame.select([c for c in frame.columns if c not in VOLATILE]).sort(keys)


def read_all(root: Path, tmp: Path, data_dir: Path) -> dict[str, object]:
    """What every reader shows of ``root``: the commands' outputs, the export's metrics, the report, the Python API
    and the inspector."""
    legacy = ok("import-legacy", str(data_dir / "legacy" / "samples"), "--results-dir", str(root))
    seen: dict[str, object] = {"import": legacy.replace(str(root), "ROOT")}
    for name, args in READERS.items():
        seen[name] = ok(*args, "--results-dir", str(root)).replace(str(root), "ROOT")
    ok("export", "--results-dir", str(root))
    seen["metrics"] = json.loads((root / "m" / "default" / "artifacts" / "shaberi" / "metrics.json").read_text())
    report = tmp / f"{root.parent.name}.html"
    ok("report", "--tag", "default", "--out", str(report), "--results-dir", str(root))
    seen["report"] = "Rakuda" in report.read_text(encoding="utf-8")

    results = shaberi.open(root)
    seen["api_runs"] = results.runs().select("run_id", "model", "tag", "base_tag", "run_index", "status").sort("run_id")
    seen["api_scores"] = stable(results.benchmark_scores())
    seen["api_family"] = stable(results.multi_run_stats(tag="fam"))
    seen["api_compare"] = results.compare("default", "other")
    seen["api_sql"] = results.sql("SELECT count(*) AS n, sum(score) AS total FROM judgements", tag="default").rows()
    inspector = Inspector(root, tag="default")
    seen["inspector"] = [(r["question_id"], r["score"]) for r in inspector.rows(inspector.runs[0].run_id, "rakuda")]
    return seen


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_rakuda(tmp_path_factory.mktemp("data"), TEXTS)


@pytest.fixture(scope="module")
def plain(_server, data, data_dir, tmp_path_factory) -> tuple[Path, dict[str, object]]:
    """The evaluation under a plain path, and what its readers show."""
    _server.reset()
    base = tmp_path_factory.mktemp("plain")
    evaluate(base / "results" / "r", _server, data)
    return base / "results" / "r", read_all(base / "results" / "r", base, data_dir)


@pytest.mark.parametrize("folder", ["my res [1]"])  # a space and a glob's brackets, in one name
def test_every_reader_of_a_root_under_brackets_or_spaces_shows_what_a_plain_root_shows(
        folder, plain, server, data, data_dir, tmp_path):
    root = tmp_path / folder / "r"
    evaluate(root, server, data)
    seen, expected = read_all(root, tmp_path, data_dir), plain[1]
    assert seen.keys() == expected.keys()
    for name in seen:
        if isinstance(seen[name], pl.DataFrame):
            assert seen[name].equals(expected[name]), (name, seen[name], expected[name])
        else:
            assert seen[name] == expected[name], (name, seen[name], expected[name])
    # and those are the judge's numbers, not two equal failures
    scores = {(r["run_id"].split("__")[0], r["judge"]): (r["score"], r["n"]) for r in json.loads(seen["scores"])
              if r["benchmark"] == "rakuda" and not r["run_id"].startswith("legacy")}
    assert scores == {(tag, judge): (6.666666667, 3) for tag in ("default", "other", "fam-run1", "fam-run2")
                      for judge in ("j", "*")}
    assert seen["api_sql"] == [(3, 20.0)]
    assert seen["inspector"] == [(f"q{i}", float(s)) for i, s in sorted(enumerate(SCORES), key=lambda x: x[1])]
    assert seen["report"] is True


def test_a_root_reads_nothing_of_the_siblings_its_name_would_match_as_a_pattern(plain, server, data, tmp_path):
    """``res [1]`` as a pattern matches ``res 1``, ``a*`` matches ``ab``: copies of the same root that a later run
    changed. Each root reads its own parts only, through the command line and the Python API."""
    source, _ = plain
    query = ("SELECT (SELECT count(*) FROM raw_answers) AS answers, (SELECT sum(requests) FROM token_usage) "
             "AS requests, (SELECT list(DISTINCT tag ORDER BY tag) FROM runs) AS tags")
    expected = ok("sql", query, "--format", "json", "--results-dir", str(source))
    for own, sibling in (("res [1]", "res 1"), ("a*", "ab"), ("q?", "qq")):
        for folder in (own, sibling):
            shutil.copytree(source, tmp_path / folder / "r")
        ok("run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j", "--tag",
           "extra", "--results-dir", str(tmp_path / sibling / "r"), "--data-dir", str(data))
        root = tmp_path / own / "r"
        assert ok("sql", query, "--format", "json", "--results-dir", str(root)) == expected, own
        files = shaberi.open(root).sql("SELECT DISTINCT _file FROM raw_answers UNION SELECT DISTINCT _file FROM "
                                       "raw_runs")["_file"].to_list()
        assert files and all(f.startswith(f"{root}/") for f in files), (own, files)
        assert "extra" not in shaberi.open(root).runs()["tag"].to_list()


def test_a_part_gone_under_a_bracketed_root_is_named_by_its_own_path(plain, tmp_path):
    """A part replaced between the listing and the read: the message names the file as it is on the disk."""
    root = tmp_path / "res [1]" / "r"
    shutil.copytree(plain[0], root)
    (run_id,) = [r for r in shaberi.open(root).runs()["run_id"].to_list() if r.startswith("default__")]
    con = connect(root, run_ids=[run_id], memo=False)  # the reader's message; a memo answers from what it listed
    parts = sorted((root / "tables" / "judgements" / f"run_id={run_id}").glob("part-*.parquet"))
    for part in parts:
        part.unlink()
    with pytest.raises(duckdb.Error) as caught:
        con.execute("SELECT count(*) FROM judgements").fetchall()
    told = said(caught.value)
    assert told in [(f"{p} was replaced by a run being written while this command read it: run the same command "
                     "again", 1) for p in parts], (told, str(caught.value))


def test_an_object_storage_root_under_brackets_runs_resumes_and_reads(s3, tmp_path, monkeypatch, server, data, plain):
    """On S3, fsspec globs the whole path of a listing and of a delete: under ``res [1]/`` the run's own parts were
    not found (its manifest failed, a resume raised deleting a replaced part, every reader saw no rows)."""
    monkeypatch.setenv("SHABERI_STATE_DIR", str(tmp_path / "state"))
    root = s3.bucket("brackets") + "/team/res [1]/r"
    evaluate(root, server, data, tags=([],))
    scores = ["sql", "SELECT run_id, judge, score, n FROM benchmark_scores WHERE run_id LIKE 'default%' "
              "ORDER BY ALL", "--format", "csv"]
    assert ok(*scores, "--results-dir", root) == ok(*scores, "--results-dir", str(plain[0]))
    assert ok(*READERS["view"], "--results-dir", root) == ok(*READERS["view"], "--results-dir", str(plain[0]))
    assert shaberi.open(root).sql("SELECT count(*) AS n, sum(score) AS total FROM judgements",
                                  tag="default").rows() == [(3, 20.0)]


