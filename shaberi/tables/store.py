"""The results root: Parquet parts per table and run, a write-ahead journal, and a per-run lock.

Layout under the root::

    tables/<table>/run_id=<run_id>/part-<seq>.parquet   what readers (DuckDB, polars) see
    journal/<run_id>/<seq>.jsonl                        rows not yet in a part
    locks/<run_id>.lock                                 held by the one process writing the run

The root may be an object-storage prefix (``location.py``): parts are then PUT whole, the journal stays on
this machine's disk (``location.local_state``) until its rows are in a part, and the lock is a lease
(``objectlock.py``).

Why a journal: a completed LLM call is paid for, so its row must survive a SIGKILL that comes before
the next Parquet part is due. Each finished row is appended to the journal with one ``write`` (kept by
the kernel even if the process dies); every ``batch_rows`` rows, 32 MiB or ``batch_seconds`` the journal
becomes ``part-<seq>.parquet`` in each table it touched (temp file, then rename) and is deleted. The next
writer of the run converts a leftover journal the same way as soon as it takes the lock, before it reads
anything; parts that already exist for that ``seq`` are not written twice, so a crash between the two
steps neither loses nor duplicates rows.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from filelock import FileLock, Timeout

from ..errors import LeaseLostError, RunLockedError
from .failures import storage_errors, unreadable_part
from .layout import live_parts, part_name, part_seq
from .location import Root, as_root, glob_in, is_remote, local_state, move_whole, open_for_read, remove, write_whole
from .objectlock import ObjectLock
from .schema import TABLES, Table

__all__ = ["Journal", "Store", "now_us", "recover"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def now_us() -> int:
    return time.time_ns() // 1000


class Store:
    """One results root."""

    def __init__(self, root: str | os.PathLike[str] | Root) -> None:
        self.root = as_root(root)
        self.state = local_state(self.root)  # the journal's home: the root, or this machine's disk
        self._last_seq = 0
        self._lease: ObjectLock | None = None

    # -- paths -------------------------------------------------------------------------------
    def run_dir(self, table: str, run_id: str) -> Root:
        return self.root / "tables" / table / f"run_id={run_id}"

    def parts(self, table: str, run_id: str) -> list[Root]:
        d = self.run_dir(table, run_id)
        return live_parts(glob_in(d, "part-*.parquet")) if d.is_dir() else []

    def next_seq(self) -> int:
        """A part/journal sequence number: increasing within this process, time-ordered across runs."""
        self._last_seq = max(self._last_seq + 1, time.time_ns())
        return self._last_seq

    # -- writing -----------------------------------------------------------------------------
    def write_part(self, table: str, run_id: str, data: pa.Table | list[dict[str, Any]] | Path, seq: int | None = None,
                   covers: int | None = None) -> Root:
        """Write one part atomically (``location.write_whole``) and return its path. ``covers``: the newest part
        this one holds the rows of (``live_parts``). A path: a part ``stage`` wrote, moved in whole."""
        self._check_lease()
        final = self.run_dir(table, run_id) / part_name(seq if seq is not None else self.next_seq(), covers)
        if isinstance(data, Path):
            with storage_errors():
                move_whole(data, final)
            return final
        return self.stage(table, data, final)

    def stage(self, table: str, data: pa.Table | list[dict[str, Any]], path: Root) -> Root:
        """``data`` as a part of ``table`` at ``path``, whole and durable; in a ``staging`` folder, for
        ``write_part`` or ``replace`` to publish later."""
        spec = TABLES[table]
        if isinstance(data, list):
            data = pa.Table.from_pylist(data, schema=spec.schema)
        if spec.derive is not None:
            data = spec.derive(data)
        with storage_errors(), write_whole(path) as target:
            pq.write_table(data, target, compression="zstd", row_group_size=_group_rows(data))
        return path

    @contextlib.contextmanager
    def staging(self) -> Iterator[Path]:
        """A folder for parts written now and published only once all are (``stage``): beside the tables on a
        disk, so that publishing is a rename; on this machine for a remote root. Removed with what is left, and
        so are the folders made for it that nothing was published into (bad input writes nothing)."""
        made = [d for d in (self.state, *self.state.parents) if not d.exists()]
        self.state.mkdir(parents=True, exist_ok=True)
        mine = f".staging-{socket.gethostname()}-"
        for left in self.state.glob(f"{glob.escape(mine)}*-*"):  # by a process of this machine killed since
            pid = left.name.removeprefix(mine).split("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(left, ignore_errors=True)
        try:
            with tempfile.TemporaryDirectory(prefix=f"{mine}{os.getpid()}-", dir=self.state) as folder:
                yield Path(folder)
        finally:
            for d in made:
                with contextlib.suppress(OSError):  # not empty: something was published
                    d.rmdir()

    def replace(self, table: str, run_id: str, data: pa.Table | list[dict[str, Any]] | Path) -> None:
        """Make ``data`` the whole content of the run's partition (new part first, then old ones go). The newest
        part it replaces stays until the next replacement: a reader that listed it a moment ago (``find_runs``
        while a sweep's runs change stage) still finds it; every reader skips it as covered (``live_parts``)."""
        d = self.run_dir(table, run_id)
        every = glob_in(d, "part-*.parquet") if d.is_dir() else []
        live = live_parts(every)
        new = self.write_part(table, run_id, data, covers=max(map(part_seq, every), default=None))
        keep = max(live, key=part_seq) if live else None
        for p in every:
            if p not in (new, keep):
                remove(p)

    # -- reading -----------------------------------------------------------------------------
    def read(self, table: str, run_id: str, columns: list[str] | None = None) -> pa.Table:
        """The run's rows, latest version of each key (or summed increments for additive tables)."""
        spec = TABLES[table]
        parts = self.parts(table, run_id)
        if not parts:
            empty = spec.schema if columns is None else pa.schema([spec.schema.field(c) for c in columns])
            return empty.empty_table()
        need = None if columns is None else list(dict.fromkeys([*columns, *spec.key, spec.version]))
        data = pa.concat_tables([_conform(_read_part(p, need), spec, need) for p in parts])
        data = _sum_increments(data, spec) if spec.additive else _latest(data, spec)
        return data if columns is None else data.select(columns)

    def compact(self, table: str, run_id: str) -> None:
        """Rewrite a run's partition as one part holding only current rows, streaming part by part."""
        spec = TABLES[table]
        parts = self.parts(table, run_id)
        if len(parts) <= 1:
            return
        if spec.additive:
            self.replace(table, run_id, self.read(table, run_id))
            return
        # Pass 1: which (part, row) holds the latest version of each key.
        keys, cols = [], list(dict.fromkeys([*spec.key, spec.version]))  # a versioned key holds it already
        for i, p in enumerate(parts):
            k = _conform(_read_part(p, cols), spec, cols)
            k = k.append_column("__part", pa.array([i] * k.num_rows, pa.int32()))
            keys.append(k.append_column("__row", pa.array(range(k.num_rows), pa.int64())))
        winners = _latest(pa.concat_tables(keys), spec).select(["__part", "__row"]).to_pydict()
        keep: dict[int, list[int]] = defaultdict(list)
        for part, row in zip(winners["__part"], winners["__row"], strict=True):
            keep[part].append(row)
        # Pass 2: copy the winners, one part in memory at a time.
        self._check_lease()
        final = self.run_dir(table, run_id) / part_name(self.next_seq(), max(map(part_seq, parts)))
        with write_whole(final) as target, pq.ParquetWriter(target, spec.schema, compression="zstd") as writer:
            for i, p in enumerate(parts):
                if keep.get(i):
                    rows = _conform(_read_part(p, None), spec, None).take(sorted(keep[i]))
                    writer.write_table(rows, row_group_size=_group_rows(rows))
        for p in parts:
            remove(p)

    # -- concurrency and durability -----------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, run_id: str, what: str, owner: str | None = None) -> Iterator[None]:
        """Hold the run's lock; a second writer fails at once with a clear message. On object storage the lock
        is a lease (``objectlock.py``); ``owner`` names the work, so that a retry of it (a Ray task whose worker
        died) takes over its own lease at once instead of waiting for it to expire."""
        busy = RunLockedError(f"{what} is being written by another shaberi process; wait for it to finish "
                              "or use a different --tag")
        if is_remote(self.root):
            lease = ObjectLock(self.root / "locks" / f"{run_id}.lock", owner)
            if not lease.acquire():
                by = lease.held_by
                raise RunLockedError(f"{busy} (its lease on {self.root} is held by {by.get('host')} pid {by.get('pid')}"
                                     f"; it expires {lease.ttl:.0f} s after its last renewal)")
            release = lease.release
            self._lease = lease
        else:
            path = self.root / "locks" / f"{run_id}.lock"
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(path, timeout=0.5)  # a reader's probe (``writers.writer_alive``) holds it for µs
            try:
                lock.acquire()
            except Timeout:
                raise busy from None
            release = lock.release
        try:
            recover(self, run_id)  # before anyone reads the run: what a killed writer journaled counts
            # New parts must sort after every part there, whatever this machine's clock did since they were written.
            self._last_seq = max([self._last_seq, *(part_seq(p) for t in TABLES for p in self.parts(t, run_id))])
            yield
        finally:
            self._lease = None
            release()

    def _check_lease(self) -> None:
        """Refuse to write once another writer took over this process's lease (it stopped renewing in time)."""
        if self._lease is not None and self._lease.lost:
            raise LeaseLostError(f"the lock of run {self._lease.path.name.removesuffix('.lock')} was taken over "
                                 "by another writer (this one stopped renewing it); nothing more is written")

    def journal(self, run_id: str, batch_rows: int = 4000, batch_seconds: float = 10.0) -> Journal:
        return Journal(self, run_id, batch_rows, batch_seconds)


class Journal:
    """Write-ahead log of rows for one run; see the module docstring."""

    def __init__(
        self, store: Store, run_id: str, batch_rows: int, batch_seconds: float, batch_bytes: int = 32 << 20
    ) -> None:
        self.store, self.run_id = store, run_id
        self.batch_rows, self.batch_seconds, self.batch_bytes = batch_rows, batch_seconds, batch_bytes
        self.dir = store.state / "journal" / run_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self._open()

    def _open(self) -> None:
        self.seq = self.store.next_seq()
        self.path = self.dir / f"{self.seq}.jsonl"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.count = self.bytes = 0
        self.opened = time.monotonic()

    def append(self, table: str, row: dict[str, Any]) -> None:
        self.append_many([(table, row)])

    def append_many(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """Journal rows that belong together with one ``write``: durable against process death once
        this returns. Converts the journal to Parquet parts when a batch is full."""
        data = memoryview(b"".join(orjson.dumps(item) + b"\n" for item in rows))
        self.bytes += len(data)
        while data:
            data = data[os.write(self.fd, data) :]
        self.count += len(rows)
        if self.count >= self.batch_rows or self.bytes >= self.batch_bytes:
            self.flush()

    def due(self) -> bool:
        return self.count > 0 and time.monotonic() - self.opened >= self.batch_seconds

    def flush(self) -> None:
        with storage_errors():
            os.close(self.fd)
            if self.count:
                self._convert(self.path)
            else:
                self.path.unlink(missing_ok=True)
            self._open()

    def close(self) -> None:
        self.flush()
        os.close(self.fd)
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.dir.rmdir()

    def _convert(self, path: Path) -> int:
        return _convert(self.store, self.run_id, path)


GROUP_BYTES = 8 << 20


def _group_rows(data: pa.Table) -> int:
    """Rows per Parquet row group so that one holds about ``GROUP_BYTES``: a reader decodes a row group's column
    whole, and a reasoning model's answers are tens of kilobytes each (``tables.stream`` reads them so)."""
    return max(1, min(data.num_rows, data.num_rows * GROUP_BYTES // max(1, data.nbytes)))


def recover(store: Store, run_id: str) -> int:
    """Turn journals left by a killed writer of this run into parts; return the rows recovered."""
    d = store.state / "journal" / run_id
    paths = sorted(d.glob("*.jsonl"), key=lambda p: int(p.stem)) if d.is_dir() else []
    return sum(_convert(store, run_id, p) for p in paths)


def _convert(store: Store, run_id: str, path: Path) -> int:
    """Journal file -> one part per table it holds (skipping parts that already exist) -> delete it. A row that
    cannot be stored (a value of the wrong type, an unknown table) never stops the others: it is quarantined
    under ``<root>/quarantine/<run_id>/`` with the reason, and one line says so."""
    seq = int(path.stem)
    by_table: dict[str, list[tuple[bytes, dict[str, Any]]]] = defaultdict(list)
    bad: list[tuple[bytes, str]] = []
    for line in path.read_bytes().splitlines():
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line torn by a kill mid-write: that call was still in flight
        if not (isinstance(item, list) and len(item) == 2 and item[0] in TABLES and isinstance(item[1], dict)):
            bad.append((line, "not a [table, row] pair of a known table"))
            continue
        by_table[item[0]].append((line, item[1]))
    stored = 0
    for table, items in by_table.items():
        spec = TABLES[table]
        if (store.run_dir(table, run_id) / f"part-{seq}.parquet").exists():
            stored += len(items)
            continue
        rows = [row for _, row in items]
        try:
            data = pa.Table.from_pylist(rows, schema=spec.schema)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):  # find the rows that cannot be stored
            rows = []
            for line, row in items:
                try:
                    pa.Table.from_pylist([row], schema=spec.schema)
                    rows.append(row)
                except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
                    bad.append((line, f"{table}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))
            data = pa.Table.from_pylist(rows, schema=spec.schema)
        if spec.additive:  # increments are summed anyway: one row per key per part
            data = _sum_increments(data, spec)
        if data.num_rows:
            store.write_part(table, run_id, data, seq=seq)
        stored += len(rows)
    if bad:
        _quarantine(store, run_id, seq, bad)
    path.unlink()
    return stored


def _quarantine(store: Store, run_id: str, seq: int, bad: list[tuple[bytes, str]]) -> None:
    folder = store.root / "quarantine" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{seq}.jsonl"
    target.write_bytes(b"".join(orjson.dumps({"reason": why, "line": line.decode("utf-8", "replace")}) + b"\n"
                                for line, why in bad))
    sys.stderr.write(f"shaberi: {len(bad)} journal row(s) of run {run_id} could not be stored and were set aside "
                     f"in {target} ({bad[0][1]}); the rest were stored\n")


# -- helpers -----------------------------------------------------------------------------------
def _read_part(path: Root, columns: list[str] | None) -> pa.Table:
    """One part (the columns of ``columns`` it has); a corrupt or truncated file is one line naming it."""
    where, fs = open_for_read(path)
    try:
        return pq.read_table(where, columns=_present(path, columns), filesystem=fs)
    except pa.ArrowException as exc:
        raise unreadable_part(path, str(exc).splitlines()[0]) from None


def _present(path: Root, columns: list[str] | None) -> list[str] | None:
    """Columns of ``columns`` that this part has (older parts may predate a column)."""
    if columns is None:
        return None
    where, fs = open_for_read(path)
    names = set(pq.read_schema(where, filesystem=fs).names)
    return [c for c in columns if c in names]


def _conform(data: pa.Table, spec: Table, columns: list[str] | None) -> pa.Table:
    """Add missing columns as nulls and cast to the declared types, so parts of any age concatenate."""
    want = spec.columns if columns is None else columns
    arrays = []
    for name in want:
        field = spec.schema.field(name)
        if name in data.column_names:
            arrays.append(data.column(name).cast(field.type))
        else:
            arrays.append(pa.nulls(data.num_rows, field.type))
    return pa.table(arrays, names=want)


def _latest(data: pa.Table, spec: Table) -> pa.Table:
    """Keep, per key, the row with the greatest ``spec.version`` (ties: the one written last): the rule the views
    apply (``sql.latest_row``), from the one ordering schema.py declares."""
    if data.num_rows == 0:
        return data
    # ordered and grouped on the key and time columns alone; the wide columns (answer texts) are copied once
    n = data.num_rows
    small = data.select(list(dict.fromkeys([*spec.key, spec.version]))).append_column("__order",
                                                                                    pa.array(range(n), pa.int64()))
    order = pc.sort_indices(small, sort_keys=[(spec.version, "ascending"), ("__order", "ascending")])
    small = small.take(order).append_column("__pos", pa.array(range(n), pa.int64()))
    last = small.group_by(list(spec.key), use_threads=False).aggregate([("__pos", "max")])
    pos = last.column("__pos_max")
    return data.take(pc.take(order, pc.take(pos, pc.sort_indices(pos))))


def _sum_increments(data: pa.Table, spec: Table) -> pa.Table:
    if data.num_rows == 0:
        return data
    counts = [c for c in spec.columns if c not in spec.key and c != "created_at"]
    summed = data.group_by(list(spec.key), use_threads=False).aggregate(
        [(c, "sum") for c in counts] + [("created_at", "max")]
    )
    renamed = {f"{c}_sum": c for c in counts} | {"created_at_max": "created_at"}
    return _conform(summed.rename_columns([renamed.get(n, n) for n in summed.column_names]), spec, None)
