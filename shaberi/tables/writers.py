"""Whether the process writing a run is alive: the one fact about a run's status that the tables cannot hold.

A run's row says ``running`` from its first stage to its last; a process killed meanwhile leaves it so. Readers
show such a run as ``interrupted`` (``sql/005_status.sql``, the one rule); this module only answers the
question that rule needs, by probing the run's lock, and puts the answers where SQL reads them
(``run_writers``)."""

from __future__ import annotations

import fcntl
import os

import duckdb

from .location import Root, as_root, is_remote
from .objectlock import holder

__all__ = ["probe_writers", "writer_alive"]


def writer_alive(results_dir: Root, run_id: str) -> bool | None:
    """Whether a process holds the run's lock (``Store.lock``); None when that cannot be told (a read-only
    or foreign results root). Probes with a shared lock released at once: no file is created. On object storage:
    whether the run's lease was renewed within its ttl (``objectlock.py``)."""
    root = as_root(results_dir)
    if is_remote(root):
        try:
            return holder(root / "locks" / f"{run_id}.lock") is not None
        except OSError:
            return None
    try:
        fd = os.open(root / "locks" / f"{run_id}.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def probe_writers(con: duckdb.DuckDBPyConnection, root: Root, runs: str) -> None:
    """``run_writers(run_id, alive)``: the liveness of the writer of every run that ``runs`` (a query of run_id and
    stored status, latest row per run) says is running. Only those are probed: a finished run needs no probe."""
    running = [r for (r,) in con.execute(f"SELECT run_id FROM ({runs}) WHERE status = 'running'").fetchall()]
    con.execute("CREATE OR REPLACE TEMP TABLE run_writers (run_id VARCHAR, alive BOOLEAN)")
    if running:
        con.executemany("INSERT INTO run_writers VALUES (?, ?)", [(r, writer_alive(root, r)) for r in running])
