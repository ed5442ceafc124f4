"""A query's rows with a table's long texts attached, in the query's order, in memory that does not grow with
the texts.

Why: a reasoning model's run stores 20,000 characters of thinking per answer, and a run can hold gigabytes of
them. DuckDB materializes whatever a sort, a window or a join holds (2,048 rows a vector: 120 MB of such
answers at once), so it is asked only for the short columns, with the view rules and joins, in order and with
each row's place in its Parquet part (``_file``, ``_row``). The long texts are read by pyarrow, a few rows at a
time, straight from the parts, serialized at once, and put back in the query's order through a sort that
spills to disk beyond ``budget`` bytes; they stay serialized to the end (a writer splices them into its line).
Memory: the budget, one small batch, and 16 bytes per row for the places. The texts are serialized by the
standard library's ``json``, whose output is allocated at its size: orjson grows a buffer for each, and
tens of thousands of 60 KB buffers grown and freed fragment the heap by 100 MB.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import re
import struct
import tempfile
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from .layout import part_seq
from .location import Root, glob_literal, open_for_read
from .schema import TABLES

__all__ = ["copy_json", "locate", "with_texts"]

_HEAD = struct.Struct("<qI")  # rank, length of the serialized texts
BUDGET = 16 << 20
_BATCH = 32  # rows read at a time from a part: 32 answers of a few MB each at worst


class _Spill:
    """(rank, bytes) pairs back in rank order: in memory up to ``budget`` bytes, beyond that in sorted runs on
    disk merged at the end."""

    def __init__(self, budget: int) -> None:
        self.budget, self.size = budget, 0
        self.pending: list[tuple[int, bytes]] = []
        self.runs: list[IO[bytes]] = []

    def add(self, rank: int, blob: bytes) -> None:
        self.pending.append((rank, blob))
        self.size += len(blob) + 64
        if self.size > self.budget:
            self._flush()

    def _flush(self) -> None:
        run = tempfile.TemporaryFile(prefix="shaberi-spill-")  # noqa: SIM115 (closed by close())
        for rank, blob in sorted(self.pending, key=lambda p: p[0]):
            run.write(_HEAD.pack(rank, len(blob)))
            run.write(blob)
        run.seek(0)
        self.runs.append(run)
        self.pending, self.size = [], 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        if not self.runs:
            yield from sorted(self.pending, key=lambda p: p[0])
            return
        self._flush()
        yield from heapq.merge(*map(_read_run, self.runs), key=lambda p: p[0])

    def close(self) -> None:
        for run in self.runs:
            run.close()


def _json(record: dict[str, Any], derive: Callable[[dict[str, Any]], dict[str, Any]] | None) -> bytes:
    return json.dumps(record | derive(record) if derive else record, ensure_ascii=False).encode()


def _read_run(run: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    while head := run.read(_HEAD.size):
        rank, size = _HEAD.unpack(head)
        yield rank, run.read(size)


def _lit(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def locate(query: str, table: str, parts: list[Root]) -> str:
    """``query`` (a named query) with ``{located}`` filled: each stored row of ``table``'s ``parts`` with its place
    (``_file``, ``_row``: the last written of a key's rows), and ``{match:X}`` the condition joining it to view X's
    row (the table's key and version)."""
    spec = TABLES[table]
    identity = list(dict.fromkeys([*spec.key, spec.version]))
    types = dict(spec.duckdb_columns)
    files = ", ".join(_lit(glob_literal(p)) for p in parts)
    located = (f"(SELECT {', '.join(f'CAST({c} AS {types[c]}) AS {c}' for c in identity)}, max(_file) AS _file, "
               f"arg_max(file_row_number, _file) AS _row FROM read_parquet([{files}], union_by_name = true, "
               f"filename = '_file', file_row_number = true, hive_partitioning = false) GROUP BY ALL)")
    alias = re.search(r"\{match:(\w+)\}", query)
    assert alias is not None
    match = " AND ".join(f"{alias[1]}.{c} IS NOT DISTINCT FROM l.{c}" for c in identity)
    return query.replace("{located}", located).replace(alias[0], match)


def copy_json(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any], path: Path) -> None:
    """``query``'s rows as JSON Lines in ``path``, written by DuckDB itself (``COPY … FORMAT JSON``)."""
    con.execute(f"COPY ({query}) TO $__path (FORMAT JSON)", {**params, "__path": str(path)})


def with_texts(con: duckdb.DuckDBPyConnection, query: str, order: str, parts: list[Root], texts: list[str],
               derive: Callable[[dict[str, Any]], dict[str, Any]] | None = None, budget: int = BUDGET
               ) -> Iterator[tuple[dict[str, Any], bytes]]:
    """The rows of ``query`` (each with ``_file`` and ``_row``: the part and row its texts are in) in the
    order ``order`` (an ORDER BY list over its columns): each as a dict of the query's other columns and a
    JSON object (UTF-8) of the columns ``texts`` of that row (and what ``derive`` makes of them).

    ``parts``: the table's Parquet parts that ``_file`` names (matched by file name, unique in a partition)."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _ordered AS SELECT row_number() OVER (ORDER BY {order}) - 1 AS _rank,"
                f" * FROM ({query})")
    by_name = {Path(str(p)).name: p for p in parts}
    places: dict[str, tuple[array, array]] = {}
    for batch in con.sql("SELECT _file, _row, _rank FROM _ordered").to_arrow_reader(65536):
        for file, row, rank in zip(*(c.to_pylist() for c in batch.columns), strict=True):
            rows, ranks = places.setdefault(Path(file).name, (array("q"), array("q")))
            rows.append(row)
            ranks.append(rank)
    spill = _Spill(budget)
    with contextlib.closing(spill):
        for name in sorted(places, key=lambda n: part_seq(by_name[n])):
            _read_texts(by_name[name], *places.pop(name), texts, derive, spill)
            pa.default_memory_pool().release_unused()  # what decoding the part took, before the next one
        fragments = iter(spill)
        reader = con.sql("SELECT * EXCLUDE (_file, _row, _rank) FROM _ordered ORDER BY _rank").to_arrow_reader(1024)
        for batch in reader:
            for row in batch.to_pylist():
                yield row, next(fragments)[1]
    con.execute("DROP TABLE _ordered")


def _read_texts(part: Root, rows: array, ranks: array, texts: list[str], derive: Callable[[dict[str, Any]], dict[str,
                Any]] | None,
                spill: _Spill) -> None:
    """Each wanted row's ``texts`` (and what ``derive`` makes of them), serialized, into ``spill``."""
    order = sorted(range(len(rows)), key=rows.__getitem__)
    path, fs = open_for_read(part)
    # Not pre-buffered: pyarrow would hold a whole row group's compressed columns besides the decoded ones.
    with pq.ParquetFile(path, filesystem=fs, pre_buffer=False, buffer_size=1 << 20) as file:
        present = [t for t in texts if t in file.schema_arrow.names]
        if not present:  # parts older than these columns
            for rank in ranks:
                spill.add(rank, _json(dict.fromkeys(texts), derive))
            return
        start, i = 0, 0
        for batch in file.iter_batches(batch_size=_BATCH, columns=present):
            end = start + batch.num_rows
            values = None
            while i < len(order) and rows[order[i]] < end:
                values = values or batch.to_pydict()
                at = rows[order[i]] - start
                record = {t: values[t][at] if t in values else None for t in texts}
                spill.add(ranks[order[i]], _json(record, derive))
                i += 1
            start = end
            if i == len(order):
                break
