"""The Parquet store: atomic parts, latest-row-wins, compaction, the journal's crash recovery, the lock."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from shaberi.errors import PartReplaced, RunLockedError
from shaberi.tables.store import Store, now_us, recover

from .conftest import query, said


def answer(qid: str, content: str, t: int) -> dict:
    return {"run_id": "r", "benchmark": "rakuda", "question_id": qid, "sample_index": 0, "strategy": "",
            "content": content, "created_at": t}


def usage(requests: int, tokens: int) -> dict:
    return {"run_id": "r", "stage": "generation", "benchmark": "rakuda", "model": "m", "requests": requests,
            "prompt_tokens": tokens, "completion_tokens": 1, "cached_requests": 0, "created_at": now_us()}


def test_latest_row_wins_in_store_and_sql_and_compaction_keeps_one_part(tmp_path):
    store = Store(tmp_path)
    store.write_part("answers", "r", [answer("1", "old", 1), answer("2", "b", 1)])
    store.write_part("answers", "r", [answer("1", "new", 2)])
    expected = {("1", "new"), ("2", "b")}
    assert {(r["question_id"], r["content"]) for r in store.read("answers", "r").to_pylist()} == expected
    assert set(query(tmp_path, "SELECT question_id, content FROM answers")) == expected
    assert query(tmp_path, "SELECT count(*) FROM raw_answers") == [(3,)]

    store.compact("answers", "r")
    assert len(store.parts("answers", "r")) == 1
    assert query(tmp_path, "SELECT count(*) FROM raw_answers") == [(2,)]
    assert set(query(tmp_path, "SELECT question_id, content FROM answers")) == expected


def test_temp_files_of_an_unfinished_write_are_invisible(tmp_path):
    store = Store(tmp_path)
    store.write_part("answers", "r", [answer("1", "a", 1)])
    torn = store.run_dir("answers", "r") / ".part-99.parquet.tmp"
    torn.write_bytes(b"PAR1 torn")
    assert query(tmp_path, "SELECT count(*) FROM answers") == [(1,)]
    assert len(store.read("answers", "r")) == 1


def test_journal_recovers_rows_of_a_killed_writer_and_drops_a_torn_line(tmp_path):
    store = Store(tmp_path)
    journal = store.journal("r", batch_rows=1000)
    journal.append_many([("answers", answer("1", "a", now_us())), ("token_usage", usage(2, 10))])
    journal.append_many([("answers", answer("2", "b", now_us())), ("token_usage", usage(1, 5))])
    os.write(journal.fd, b'["answers", {"run_id": "r", "question_')  # killed mid-write
    del journal  # no flush, no close: as after SIGKILL

    with store.lock("r", "run r"):  # the next writer recovers before it reads anything
        pass
    assert sorted(r["question_id"] for r in store.read("answers", "r").to_pylist()) == ["1", "2"]
    assert query(tmp_path, "SELECT requests, prompt_tokens FROM token_usage") == [(3, 15)]
    assert not list((tmp_path / "journal").rglob("*.jsonl"))


def test_recovery_after_crash_between_part_and_journal_delete_adds_nothing_twice(tmp_path):
    store = Store(tmp_path)
    journal = store.journal("r")
    journal.append("answers", answer("1", "a", now_us()))
    path, seq = journal.path, journal.seq
    os.close(journal.fd)
    saved = path.read_bytes()
    journal._convert(path)  # the part is written, then we pretend the unlink never happened
    path.write_bytes(saved)
    assert store.parts("answers", "r")[0].name == f"part-{seq}.parquet"

    assert recover(store, "r") == 1 and not path.exists()
    assert query(tmp_path, "SELECT count(*) FROM raw_answers") == [(1,)]


def test_second_writer_of_the_same_run_is_refused(tmp_path):
    store = Store(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from shaberi.tables.store import Store\n"
         "with Store(sys.argv[1]).lock('r', 'x'):\n print('held', flush=True); time.sleep(60)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match="another shaberi process"), store.lock("r", "run m tag t"):
            pass
    finally:
        holder.kill()
        holder.wait()
    with store.lock("r", "x"):  # a dead holder's lock is free again
        pass


@pytest.mark.parametrize("how", ["compact", "replace"])
def test_a_crash_after_a_part_replaced_others_counts_nothing_twice(tmp_path, monkeypatch, how):
    """Summed rows (token usage) survive a kill between writing the part that replaces the others and deleting
    them: readers skip the parts it covers, in the store and in SQL, whatever the machine's clock did."""
    store = Store(tmp_path)
    for n in (1, 2, 3):
        store.write_part("token_usage", "r", [usage(n, 10 * n)])
    before = query(tmp_path, "SELECT requests, prompt_tokens FROM token_usage")
    assert before == [(6, 60)]

    def killed(self, *args, **kwargs):  # the process dies before the replaced parts are deleted
        raise SystemExit(137)

    monkeypatch.setattr("pathlib.Path.unlink", killed)
    with pytest.raises(SystemExit):
        if how == "compact":
            store.compact("token_usage", "r")
        else:
            store.replace("token_usage", "r", store.read("token_usage", "r"))
    monkeypatch.undo()
    assert len(list((tmp_path / "tables" / "token_usage" / "run_id=r").glob("part-*"))) == 4  # all still there
    assert query(tmp_path, "SELECT requests, prompt_tokens FROM token_usage") == before
    assert store.read("token_usage", "r").select(["requests", "prompt_tokens"]).to_pylist() == [
        {"requests": 6, "prompt_tokens": 60}]
    # A writer that comes later, even with a clock gone back, writes after the part that covers the others.
    monkeypatch.setattr("time.time_ns", lambda: 1)
    fresh = Store(tmp_path)
    with fresh.lock("r", "test"):
        fresh.write_part("token_usage", "r", [usage(1, 5)])
    assert query(tmp_path, "SELECT requests, prompt_tokens FROM token_usage") == [(7, 65)]


def test_readers_racing_a_writer_that_replaces_parts_see_every_run_or_are_told_to_read_again(tmp_path):
    """Every stage of a run rewrites its runs row (``Store.replace``: a new part, then the old one goes). A reader
    listing meanwhile must neither report "no runs" nor blame a corrupt part for one that was replaced."""
    import threading

    import duckdb

    from shaberi.tables.selection import find_runs
    from shaberi.tables.sql import connect

    store = Store(tmp_path)
    row = {"run_id": "t__m", "tag": "t", "base_tag": "t", "run_index": 1, "model": "m", "status": "running",
           "created_at": now_us(), "updated_at": now_us()}
    store.write_part("runs", "t__m", [row])
    stop, replaced = threading.Event(), [0]

    def writer() -> None:  # 20 stage changes a second: far more often than any run
        while not stop.wait(0.05):
            store.replace("runs", "t__m", [row | {"updated_at": now_us()}])
            replaced[0] += 1

    thread = threading.Thread(target=writer)
    thread.start()
    told = reads = 0
    deadline = time.monotonic() + 60  # a loaded machine's reads are slow, and more of them are told to read again
    try:
        while reads < 100 and (reads < 10 or time.monotonic() < deadline):
            reads += 1
            assert [r.run_id for r in find_runs(tmp_path, "t")] == ["t__m"]
            try:
                con = connect(tmp_path, run_ids=["t__m"], upto="tables")
                assert con.execute("SELECT count(*) FROM runs").fetchall() == [(1,)]
            except (duckdb.Error, PartReplaced) as exc:  # replaced between a listing and a read (connect's own
                message, code = said(exc) or ("", 0)  # re-listing gives up when it is replaced every time: loaded)
                assert "was replaced by a run being written" in message and code == 1, exc
                told += 1
    finally:
        stop.set()
        thread.join()
    assert replaced[0] > 20  # the race was run: the writer replaced the part throughout
    print(f"{replaced[0]} replacements, {reads} reads, {told} told to run again")




def test_staging_left_by_a_killed_import_is_removed_by_the_next_one_and_a_live_ones_is_kept(tmp_path):
    """A legacy import stages gigabytes beside the results; one killed (SIGKILL, out of memory) leaves them. The
    next staging on this machine removes what processes that are gone left, never a running import's."""
    import socket

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    left = tmp_path / f".staging-{host}-{int(dead.stdout)}-abc"
    running = tmp_path / f".staging-{host}-{os.getpid()}-def"
    for folder in (left, running):
        folder.mkdir()
        (folder / "x.answers.parquet").write_bytes(b"staged")
    with Store(tmp_path).staging() as mine:
        assert mine.is_dir() and not left.exists() and running.exists()
    assert not mine.exists() and running.exists()
