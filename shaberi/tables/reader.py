"""What a connection that reads for a user may do (``shaberi sql``, ``shaberi.open(root).sql``): run queries, over
files it can only read.

Two walls, each enough alone. **Statements**: every statement, as DuckDB itself parses the text, is a query
(``SELECT``, ``FROM``, ``VALUES``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``: DuckDB's SELECT type), or a plain
``EXPLAIN`` of one; ``EXPLAIN ANALYZE`` runs its statement, so it is refused, as is an EXPLAIN of anything else.
**Files**: the views read the parts through a filesystem that opens files for reading only (``location.attach``),
DuckDB's own local filesystem is switched off, no path outside the results' tables is allowed, and the
configuration is locked, so a statement that got past the first wall could still write nothing anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from ..errors import UsageError
from .location import READER_SCHEME, Root, glob_literal, is_remote

__all__ = ["queries_only", "seal"]

_REFUSAL = "to change results use Shaberi's commands; to write your own files, read the Parquet parts with DuckDB"


def queries_only(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """Raise ``UsageError`` (one line) unless every statement of ``query`` only reads (see the module)."""
    statements = _parse(con, query)
    if not statements:
        raise UsageError("shaberi sql got no query; give one, e.g. shaberi sql 'SELECT * FROM runs'")
    for statement in statements:
        kind = _kind(statement)
        if kind == "SELECT":
            continue
        if kind == "EXPLAIN":
            inner, analyze = _explained(statement.query)
            if analyze:
                raise UsageError("shaberi sql runs no EXPLAIN ANALYZE: it executes the statement; use EXPLAIN")
            explained = [_kind(s) for s in _parse(con, inner)]
            if explained == ["SELECT"]:
                continue
            kind = explained[0] if len(explained) == 1 else "several statements" if explained else "nothing"
            raise UsageError(f"shaberi sql explains queries only, not {kind}; {_REFUSAL}")
        raise UsageError(f"shaberi sql runs queries only (SELECT, EXPLAIN), not {kind}; {_REFUSAL}")


def seal(con: duckdb.DuckDBPyConnection, root: Root, also: tuple[Path, ...] = ()) -> None:
    """Leave ``con`` (its views defined over ``root`` read-only) able to read the results' tables (and the folders
    ``also``: the views' entries of ``memo.py``) and nothing else, a setting no statement can undo."""
    local = [*([] if is_remote(root) else [root / "tables"]), *also]
    # as the views name them, and a symbolic link resolved (DuckDB checks both the name and what it matched)
    tables = [*([f"{root / 'tables'}/"] if is_remote(root) else []),
              *(READER_SCHEME + f(d) for d in local for f in (os.path.abspath, os.path.realpath))]
    dirs = list(dict.fromkeys([*tables, *map(glob_literal, tables)]))
    con.execute("SET allowed_directories = $dirs", {"dirs": dirs})
    con.execute("SET enable_external_access = false")
    con.execute("SET disabled_filesystems = 'LocalFileSystem'")  # after: turning access off checks the local one
    con.execute("SET lock_configuration = true")


def _parse(con: duckdb.DuckDBPyConnection, text: str) -> list[duckdb.Statement]:
    try:
        return list(con.extract_statements(text))
    except duckdb.Error as exc:
        raise UsageError(f"SQL: {str(exc).splitlines()[0]}") from None


def _kind(statement: duckdb.Statement) -> str:
    """The statement's type as DuckDB parsed it; one the Python client has no name for (``UPDATE EXTENSIONS``) is
    named by its first words."""
    try:
        return statement.type.name
    except ValueError:
        return " ".join(statement.query.split()[:2]).upper()


def _explained(text: str) -> tuple[str, bool]:
    """The statement an EXPLAIN explains (its text after ``EXPLAIN``, ``ANALYZE`` and an option list), and whether
    it would be executed (``ANALYZE``, alone or among the options), read off DuckDB's tokens."""
    found = duckdb.tokenize(text)
    ends = [start for start, _ in found[1:]] + [len(text)]
    tokens = [(start, text[start:end].strip().lower()) for (start, kind), end in zip(found, ends, strict=True)
              if kind != duckdb.token_type.comment]
    position, analyze, depth = 1, False, 0  # tokens[0] is EXPLAIN
    while position < len(tokens):
        word = tokens[position][1]
        if word in ("analyze", "analyse") or (depth and word.startswith(("analyze", "analyse"))):
            analyze = True
        elif word.startswith("("):
            depth += 1
        elif depth and word.startswith(")"):
            depth -= 1
        elif not depth:
            break
        position += 1
    return (text[tokens[position][0]:] if position < len(tokens) else ""), analyze
