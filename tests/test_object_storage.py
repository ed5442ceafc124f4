"""A results root on object storage (``s3://bucket/prefix``), against a real S3 server the tests start (moto in
server mode, over HTTP): the same rows as on a disk, read by view, sql, report and the Python API; a killed run
resumed from the journal kept on local disk; the run's lock as a lease taken by a conditional create."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import shaberi
from shaberi.errors import LeaseLostError, RunLockedError
from shaberi.tables.location import as_root
from shaberi.tables.schema import TABLES
from shaberi.tables.store import Store
from shaberi.testing import LoopbackServer

from .conftest import kill_when, query, table_rows, write_rakuda
from .conftest import shaberi as cli

VOLATILE = {"created_at", "updated_at", "latency_ms", "concurrency_history", "stages"}  # time, not content


@pytest.fixture
def state(tmp_path, monkeypatch):
    """This machine's disk for the journals of remote roots."""
    monkeypatch.setenv("SHABERI_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def texts(n: int) -> list[str]:
    return [f"質問{i} <<answer: 回答{i}です。>> <<judge: 理由{i}。\\nFINAL SCORE: {1 + i % 10}>>" for i in range(n)]


def test_a_run_on_s3_holds_the_rows_a_run_on_disk_holds_and_every_reader_reads_them(s3, state, tmp_path):
    root = s3.bucket("same-rows") + "/team/results"
    local = tmp_path / "local"
    data = write_rakuda(tmp_path / "d", texts(8))
    with LoopbackServer() as server:
        args = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
                "--passes", "format_validation", "--tag", "t", "--data-dir", str(data)]
        for results in (root, str(local)):
            done = cli(*args, "--results-dir", results)
            assert done.returncode == 0, done.stderr
        assert server.stats()["calls"] == 2 * 16  # 8 answers and 8 judgements, for each root

    there, here = table_rows(root, VOLATILE), table_rows(local, VOLATILE)
    for table in TABLES:
        assert there[table] == here[table], table
    assert query(root, "SELECT count(*), sum(score) FROM judgements") == [(8, sum(1 + i % 10 for i in range(8)))]

    view = [cli("view", "--tag", "t", "--format", "csv", "--results-dir", r) for r in (root, str(local))]
    assert view[0].returncode == 0, view[0].stderr
    assert view[0].stdout == view[1].stdout, (view[0].stdout, view[1].stdout)
    assert "m,j,ok,Rakuda,4.5" in view[0].stdout
    sql = cli("sql", "SELECT count(*) AS n FROM answers", "--format", "csv", "--results-dir", root)
    assert sql.returncode == 0 and sql.stdout.split() == ["n", "8"]
    outside = cli("sql", f"SELECT * FROM read_parquet('{root.rsplit('/', 1)[0]}/*')", "--results-dir", root)
    assert outside.returncode == 2 and "Traceback" not in outside.stderr
    report = cli("report", "--tag", "t", "--out", str(tmp_path / "r.html"), "--results-dir", root)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r.html").stat().st_size > 10_000

    scores = [shaberi.open(r).scores(tag="t") for r in (root, local)]
    assert scores[0].sort(scores[0].columns).rows() == scores[1].sort(scores[1].columns).rows()

    store = Store(root)
    assert not list((store.root / "locks").rglob("*")), "the lease is deleted on release"
    assert not [p for p in store.root.rglob("*") if p.name.endswith(".tmp")]
    assert not list(state.rglob("*.jsonl")), "the journal left this machine only as parts"
    manifest = (store.root / "m" / "t" / "manifest.json").read_text()
    assert "testing" not in manifest  # the (dummy) key read from the environment is written nowhere


def test_a_killed_run_on_s3_resumes_from_the_local_journal_without_paying_twice(s3, state, tmp_path):
    root = s3.bucket("killed") + "/r"
    data = write_rakuda(tmp_path / "d", [f"質問{i}" for i in range(12)])
    with LoopbackServer(latency_ms=150) as slow:
        args = ["run", "--model", "m", "--base-url", slow.base_url, "--benchmark", "rakuda", "--concurrency", "2",
                "--results-dir", root, "--data-dir", str(data), "--tag", "k"]
        seen = kill_when(slow, args, 5)
        assert 5 <= seen < 12
        journaled = list(state.rglob("*.jsonl"))
        assert journaled, "the answers of the killed run wait on this machine's disk, not in the bucket"
        again = cli(*args)
        assert again.returncode == 0, again.stderr
        total = slow.stats()["calls"]
    assert 12 <= total <= 12 + 2  # at most the two calls in flight at the kill are paid twice
    assert query(root, "SELECT count(*), count(DISTINCT question_id) FROM answers") == [(12, 12)]
    assert not list(state.rglob("*.jsonl"))


def test_the_lock_on_s3_is_a_lease_one_writer_holds(s3, state, monkeypatch):
    root = as_root(s3.bucket("leases") + "/r")
    first, second = Store(root), Store(root)
    with first.lock("run-a", "run a"):
        with pytest.raises(RunLockedError), second.lock("run-a", "run a"):
            pass
        with second.lock("run-b", "run b"):  # another run: its own lock
            pass
        first.write_part("runs", "run-b", [{"run_id": "run-b", "tag": "b", "base_tag": "b", "run_index": 1,
                                            "model": "m", "status": "ok", "created_at": 1, "updated_at": 1}])
        alive = cli("sql", "SELECT count(*) FROM runs", "--results-dir", str(root))  # readers take no lock
        assert alive.returncode == 0, alive.stderr
    with second.lock("run-a", "run a"):  # released: free again
        pass


def test_a_stale_lease_is_taken_over_and_its_holder_stops_writing(s3, state, monkeypatch):
    monkeypatch.setenv("SHABERI_LOCK_TTL", "0.8")
    root = as_root(s3.bucket("stale") + "/r")
    stalled, fresh = Store(root), Store(root)
    with stalled.lock("run-a", "run a"):
        lease = stalled._lease
        assert lease is not None

        def unreachable() -> bytes:
            raise OSError("the bucket cannot be reached")

        monkeypatch.setattr(lease, "_payload", unreachable)  # its renewals fail from now on
        time.sleep(1.0)
        with fresh.lock("run-a", "run a"):  # expired: taken over by a conditional create of the next generation
            time.sleep(0.5)  # the stalled holder's next renewal sees the newer generation
            assert lease.lost
            with pytest.raises(LeaseLostError, match="taken over") as lost:
                stalled.write_part("answers", "run-a", [])
            assert lost.value.exit_code == 1  # the work failed; the input was fine
            fresh.write_part("answers", "run-a", [])


def test_a_retry_of_the_same_work_takes_over_its_own_lease_at_once(s3, state):
    root = as_root(s3.bucket("retry") + "/r")
    dead = Store(root)
    lock = dead.lock("run-a", "run a", owner="sweep-1/m/t")
    lock.__enter__()  # a worker that dies holding it: never released, still fresh
    dead._lease._stop.set()
    with pytest.raises(RunLockedError), Store(root).lock("run-a", "run a", owner="someone-else"):
        pass
    with Store(root).lock("run-a", "run a", owner="sweep-1/m/t"):  # Ray's retry of the same task
        pass


def test_a_missing_bucket_or_unreachable_endpoint_is_one_line_and_exit_2(s3):
    missing = cli("view", "--tag", "t", "--results-dir", "s3://no-such-bucket/r")
    assert missing.returncode == 2 and "bucket does not exist" in missing.stderr, missing.stderr
    unreachable = cli("view", "--tag", "t", "--results-dir", "s3://b/r", env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    assert unreachable.returncode == 2 and "cannot reach 127.0.0.1:9" in unreachable.stderr, unreachable.stderr
    # gcsfs alone retries for a minute (6 tries, 1 to 16 s apart) before it says so: the endpoint is tried first
    offline = cli("view", "--tag", "t", "--results-dir", "gs://b/r", timeout=30,
                  env={"STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"})
    assert offline.returncode == 2 and "cannot reach 127.0.0.1:9" in offline.stderr, offline.stderr
    for done in (missing, unreachable, offline):
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_test_server_ends_on_sigterm_even_when_its_parent_ignores_it():
    """A supervisor's ``trap '' TERM`` is inherited through exec: the server sets its own dispositions."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "shaberi.testing.server", "--port", "0"], stdout=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("READY ")
        proc.terminate()
        assert proc.wait(30) == -signal.SIGTERM
    finally:
        proc.kill()


@pytest.mark.parametrize("root", ["ftp://x/y", "s3://", "gs:///", "s3:///p", "", "http://host/results"])
def test_a_results_root_that_is_no_folder_nor_a_bucket_is_one_line_and_creates_nothing(server, tmp_path, root):
    import subprocess
    import sys

    data = write_rakuda(tmp_path / "d", ["質問"])
    work = tmp_path / "cwd"
    work.mkdir()
    for args in (["view"], ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda",
                            "--data-dir", str(data)]):
        proc = subprocess.run([sys.executable, "-m", "shaberi", *args, "--results-dir", root], cwd=work,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--results-dir" in proc.stderr, proc.stderr
    assert list(work.iterdir()) == [] and server.stats()["calls"] == 0


def test_wrong_credentials_for_a_bucket_are_one_line_in_every_command(server, tmp_path):
    import subprocess
    import sys

    from shaberi.testing.s3 import S3Server

    data = write_rakuda(tmp_path / "d", ["質問"])
    work = tmp_path / "cwd"
    work.mkdir()
    with S3Server(checks_keys=True) as refusing:
        env = {**os.environ, **refusing.env, "AWS_ACCESS_KEY_ID": "wrong", "AWS_SECRET_ACCESS_KEY": "wrong",
               "SHABERI_STATE_DIR": str(tmp_path / "state")}
        for args in (["view"], ["sql", "SELECT count(*) FROM answers"], ["leaderboard", "--tag", "t"],
                     ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--data-dir",
                      str(data)]):
            proc = subprocess.run([sys.executable, "-m", "shaberi", *args, "--results-dir", "s3://bucket/r"],
                                  cwd=work, capture_output=True, text=True, timeout=120, env=env)
            assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
            assert proc.stderr.startswith("error: object storage:") and "AWS_" in proc.stderr
    assert list(work.iterdir()) == [] and server.stats()["calls"] == 0


def staged(state: Path) -> list[Path]:
    """What an import left in the state folder besides the views it read back (``views/``: memo's entries)."""
    return [p for p in [*state.rglob("*.parquet"), *state.rglob(".staging-*")]
            if p.relative_to(state).parts[0] != "views"]


def test_a_legacy_tree_imported_to_s3_holds_the_rows_it_holds_on_disk_and_bad_input_writes_nothing(
        s3, state, tmp_path, data_dir):
    """The import stages every model's tables on this machine and publishes them only once all are read: on S3
    each staged part is uploaded whole; a bad file in the tree leaves the bucket (and the staging folder) empty."""
    source = data_dir / "legacy" / "subset20" / "data"
    models = sorted({p.stem for p in source.glob("model_answers/*/*.json")})[:4]
    tree = tmp_path / "tree"
    for path in source.rglob("*.json"):
        if path.stem in models:
            target = tree / "data" / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)
    root, local = s3.bucket("legacy") + "/r", tmp_path / "local"
    for results in (root, str(local)):
        done = cli("import-legacy", str(tree), "--results-dir", results)
        assert done.returncode == 0, done.stderr
    there, here = table_rows(root, VOLATILE), table_rows(local, VOLATILE)
    for table in TABLES:
        assert there[table] == here[table], table
    assert query(root, "SELECT count(DISTINCT run_id) FROM answers") == [(4,)]
    assert not staged(state), "nothing staged is left"

    bad = sorted((tree / "data" / "model_answers").glob(f"*/{models[-1]}.json"))[0]  # the last model read
    bad.unlink()
    bad.write_text('[{"Question": "q"},\n{"Question": "r"}]\n', encoding="utf-8")  # a JSON array: refused
    fresh = s3.bucket("legacy-bad") + "/r"
    refused = cli("import-legacy", str(tree), "--results-dir", fresh)
    assert refused.returncode == 2 and "is a JSON array" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert not list(Store(fresh).root.rglob("*")), "nothing reached the bucket"
    assert not staged(state)


@pytest.mark.parametrize("size", [1000, 12 << 20])  # one PUT; a multipart upload under way
def test_a_write_to_s3_that_fails_midway_stores_nothing(s3, size):
    """An error (a Ctrl-C, a full disk under the staged file) while a part is uploaded: no object under its
    name, not even the bytes written so far (fsspec's close would commit them)."""
    from shaberi.tables.location import write_whole

    bucket = as_root(s3.bucket(f"torn-{size}"))
    with pytest.raises(KeyboardInterrupt), write_whole(bucket / "tables" / "part-1.parquet") as target:
        target.write(b"x" * size)
        raise KeyboardInterrupt
    assert not list(bucket.rglob("*"))
