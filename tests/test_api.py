"""shaberi.open(): the results root as polars DataFrames, the same numbers the command line prints."""

from __future__ import annotations

import json

import polars as pl
import pytest

import shaberi

from .conftest import shaberi as cli
from .conftest import write_rakuda


@pytest.fixture(scope="module")
def results(tmp_path_factory, _server):
    """Two families of two runs on five Rakuda questions, judged by two judges with known replies."""
    root = tmp_path_factory.mktemp("api")
    texts = [f"<<judge@j1: FINAL SCORE: {4 + i}>> <<judge@j2: FINAL SCORE: {6 + i % 2}>> 質問{i}" for i in range(5)]
    data = write_rakuda(root / "d", texts)
    for tag in ("a", "b"):
        proc = cli("run", "--model", "m", "--tag", tag, "--runs", "2", "--base-url", _server.base_url, "--judge",
                   "j1", "--judge", "j2", "--benchmark", "rakuda", "--results-dir", str(root / "r"),
                   "--data-dir", str(data))
        assert proc.returncode == 0, proc.stderr
    return root / "r"


def test_every_reader_returns_polars_frames_of_the_runs_asked_for(results):
    r = shaberi.open(results)
    runs = r.runs()
    assert isinstance(runs, pl.DataFrame)
    assert sorted(runs["tag"].to_list()) == ["a-run1", "a-run2", "b-run1", "b-run2"]
    assert r.runs(tag="a")["tag"].to_list() == ["a-run1", "a-run2"]  # the family, as every command selects it
    assert r.answers(tag="a").height == 10 and r.answers(tag="a-run1").height == 5
    judged = r.judgements(tag="a", judge="j1")
    assert judged.height == 10 and sorted(set(judged["score"].to_list())) == [4.0, 5.0, 6.0, 7.0, 8.0]
    assert r.judgements(tag="a").height == 20 and r.judgements(tag="a", history=True).height == 20
    assert r.scores(tag="a-run1", judge="j2")["score"].sum() == 6 + 7 + 6 + 7 + 6


def test_scores_are_the_numbers_the_command_line_prints(results):
    r = shaberi.open(results)
    mine = r.benchmark_scores(tag="a-run1", judge="j1").filter(pl.col("benchmark") == "rakuda")
    assert mine["score"].to_list() == [6.0]  # (4 + 5 + 6 + 7 + 8) / 5
    view = json.loads(cli("view", "--tag", "a-run1", "--judge", "j1", "--format", "json", "--results-dir",
                          str(results)).stdout)
    rakuda = next(row for row in view["scores"][0]["rows"] if row["benchmark"] == "Rakuda")
    assert rakuda["score"] == pytest.approx(mine["score"][0])
    stats = r.multi_run_stats(tag="a", judge="*").filter(pl.col("benchmark") == "rakuda")
    assert stats["runs"].to_list() == [2] and stats["mean"][0] == pytest.approx(6.2)  # (30 + 32) / 10 per run


def test_compare_and_sql(results):
    r = shaberi.open(results)
    diff = r.compare("a-run1", "b-run1", judge="j1")
    assert diff.filter(pl.col("benchmark") == "rakuda")["diff"].to_list() == [0.0]  # the same scripted scores
    counted = r.sql("SELECT judge, count(*) AS n FROM judgements GROUP BY judge ORDER BY judge")
    assert counted.to_dicts() == [{"judge": "j1", "n": 20}, {"judge": "j2", "n": 20}]
    assert r.sql("SELECT count(*) AS n FROM answers", tag="b")["n"][0] == 10


def test_a_folder_without_tables_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a Shaberi results root"):
        shaberi.open(tmp_path)
