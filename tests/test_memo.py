"""The views computed once per run (shaberi.tables.memo): what they read back is what the views compute, after
every kind of write, through merges, from a read-only connection; a key that leaves out a table the view reads is
caught; where entries cannot be written the views are computed."""

from __future__ import annotations

import os

import pytest

from shaberi.tables import memo
from shaberi.tables.selection import find_runs
from shaberi.tables.sql import connect
from shaberi.tables.store import Store

T = 1_700_000_000_000_000


def run_row(run_id: str, status: str = "complete", at: int = T) -> dict:
    return {"run_id": run_id, "tag": f"t{run_id}", "base_tag": f"t{run_id}", "run_index": 1, "model": f"m{run_id}",
            "status": status, "created_at": T, "updated_at": at}


def answer(run_id: str, qid: str, text: str, at: int = T) -> dict:
    return {"run_id": run_id, "benchmark": "elyza", "question_id": qid, "sample_index": 0, "strategy": "",
            "model": f"m{run_id}", "content": text, "answer_hash": f"h-{text}", "created_at": at}


def judgement(run_id: str, qid: str, judge: str, score: float | None, text: str, at: int = T) -> dict:
    return {"run_id": run_id, "benchmark": "elyza", "question_id": qid, "sample_index": 0, "strategy": "",
            "judge": judge, "score": score, "answer_hash": f"h-{text}", "created_at": at}


def delta(run_id: str, qid: str, value: float, at: int = T) -> dict:
    return {"run_id": run_id, "benchmark": "elyza", "question_id": qid, "sample_index": 0, "strategy": "",
            "judge": "", "pass_name": "lang_mixing", "delta": value, "created_at": at}


def rows(con, view: str) -> list[tuple]:
    return sorted(con.execute(f"SELECT * FROM {view}").fetchall(), key=repr)


def same_as_computed(root, read_only: bool = False) -> None:
    """Every memoized view, read back, equals the view computed from the parts (the cold entries, then the warm)."""
    computed = connect(root, memo=False)
    for _ in range(2):
        remembered = connect(root, read_only=read_only)
        for view in memo.PER_RUN_VIEWS:
            assert rows(remembered, view) == rows(computed, view), view


@pytest.fixture
def lake(tmp_path):
    store = Store(tmp_path / "r")
    for run in ("r1", "r2", "r3"):
        store.write_part("runs", run, [run_row(run)])
        store.write_part("answers", run, [answer(run, "1", f"{run}はい"), answer(run, "2", f"{run} yes")])
        store.write_part("judgements", run, [judgement(run, "1", "A", 4, f"{run}はい"),
                                             judgement(run, "2", "A", 2, f"{run} yes"),
                                             judgement(run, "1", "B", 3, f"{run}はい")])
    # r3 has no answers of its own in one view: no rows is an entry too
    store.write_part("pass_deltas", "r2", [delta("r2", "1", -1)])
    return store


def writes(store: Store) -> list:
    """One write to each table a memoized view reads, each changing what the view gives for r1."""
    return [
        lambda: store.write_part("runs", "r1", [run_row("r1", "failed", T + 1)]),  # run_rows
        lambda: store.write_part("judgements", "r1", [judgement("r1", "2", "A", 5, "r1 yes", T + 2)]),  # a rejudge
        lambda: store.write_part("judgements", "r1", [judgement("r1", "2", "B", None, "r1 yes", T + 2)]),  # coverage
        lambda: store.write_part("pass_deltas", "r1", [delta("r1", "2", -2, T + 3)]),  # score_means
        lambda: store.write_part("answers", "r1", [answer("r1", "1", "r1 いいえ、違います", T + 4)]),  # stale, letters
        lambda: store.write_part("runs", "r1", [run_row("r1", "failed", T + 5) | {"judges": ["A", "C"]}]),  # coverage
        lambda: store.write_part("questions", "r1", [{"run_id": "r1", "benchmark": "elyza", "question_id": "3",
                                                      "turns": ["q"], "created_at": T}]),
        lambda: store.compact("judgements", "r1"),  # the same rows in other parts
        lambda: store.replace("runs", "r2", [run_row("r2", "partial", T + 6)]),
    ]


def test_the_entries_are_the_views_after_every_kind_of_write(lake):
    same_as_computed(lake.root)
    for write in writes(lake):
        write()
        same_as_computed(lake.root)
    con = connect(lake.root)
    # the stale answer and the rejudge are there: r1's judgements of question 1 are stale, the earlier score of
    # question 2 superseded by the rejudge
    lineage = dict(((q, j, s), lin) for q, j, s, lin in con.execute(
        "SELECT question_id, judge, score, lineage FROM judgement_history WHERE run_id = 'r1'").fetchall())
    assert lineage == {("1", "A", 4): "stale", ("1", "B", 3): "stale", ("2", "A", 2): "superseded",
                       ("2", "A", 5): "current", ("2", "B", None): "current"}


def test_a_key_that_leaves_out_a_table_the_view_reads_is_caught(lake, monkeypatch):
    """The check above fails for a wrong declaration: score_means keyed without pass_deltas reads back the means
    from before the delta."""
    same_as_computed(lake.root)
    monkeypatch.setitem(memo.PER_RUN_VIEWS, "score_means", ("answers", "judgements"))
    lake.write_part("pass_deltas", "r1", [delta("r1", "2", -1, T + 3)])
    with pytest.raises(AssertionError, match="score_means"):
        same_as_computed(lake.root)


def test_find_runs_reads_the_same_runs_through_its_entries(lake):
    before = find_runs(lake.root)
    lake.write_part("runs", "r1", [run_row("r1", "failed", T + 1)])
    after = find_runs(lake.root)
    assert [r.status for r in before] == ["ok"] * 3
    assert [(r.run_id, r.status) for r in after] == [("r1", "failed"), ("r2", "ok"), ("r3", "ok")]
    assert [r.run_id for r in find_runs(lake.root, model="mr2")] == ["r2"]


def test_segments_are_merged_and_stay_right(lake, monkeypatch):
    monkeypatch.setattr(memo, "GRACE", 0.0)
    for i in range(memo.MERGE_AT + 3):  # a new entry for r1 each time: a segment each
        lake.write_part("judgements", "r1", [judgement("r1", "2", "A", 1 + i % 5, "r1 yes", T + 10 + i)])
        same_as_computed(lake.root)
    folders = list(memo.memo_dir(lake.root).glob("*/judgement_history"))
    assert len(folders) == 1
    assert 1 <= len(list(folders[0].glob("part-*.parquet"))) <= memo.MERGE_AT + 1


def test_a_read_only_connection_reads_the_entries_and_writes_nothing_in_the_results(lake):
    before = sorted(p.relative_to(lake.root) for p in lake.root.rglob("*"))
    same_as_computed(lake.root, read_only=True)
    con = connect(lake.root, read_only=True)
    assert con.execute("SELECT count(*) FROM judgements").fetchone() == (9,)
    assert sorted(p.relative_to(lake.root) for p in lake.root.rglob("*")) == before


def test_where_entries_cannot_be_written_the_views_are_computed(lake, tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("SHABERI_STATE_DIR", os.fspath(blocked / "state"))  # under a file: no folder can be made
    same_as_computed(lake.root)
    assert not (blocked / "state").exists()


@pytest.mark.parametrize("view, table", [(v, t) for v, ts in memo.PER_RUN_VIEWS.items() for t in ts])
def test_each_table_a_view_is_keyed_by_is_needed_and_caught_when_left_out(lake, monkeypatch, view, table):
    """The writes above change each view through each table it is keyed by: left out, a stale entry is read."""
    monkeypatch.setitem(memo.PER_RUN_VIEWS, view, tuple(t for t in memo.PER_RUN_VIEWS[view] if t != table))
    with pytest.raises(AssertionError, match=view):
        same_as_computed(lake.root)
        for write in writes(lake):
            write()
            same_as_computed(lake.root)
