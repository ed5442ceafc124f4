"""``shaberi sql`` and ``shaberi.open(root).sql`` only read (``tables/reader.py``): every statement type DuckDB
parses is tried, on a disk and on S3; the results tree stays byte for byte what it was, nothing is written
outside it, and the second wall (a filesystem that only reads) holds when the first is stepped around."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

import shaberi
from shaberi.errors import UsageError
from shaberi.tables.sql import connect

from .conftest import judged_rakuda_runs, write_rakuda
from .conftest import shaberi as cli

TEXTS = [f"質問{i} <<answer: 回答{i}です。>> <<judge: 理由{i}。\\nFINAL SCORE: {2 + i}>>" for i in range(3)]


def statements(tables: str, part: str, elsewhere: str) -> list[str]:
    """One statement or more of every type DuckDB parses from text, the writes aimed at the results' own folders
    (``tables``: the tables folder, ``part``: a judgements part) and outside them (``elsewhere``)."""
    folder = part.rsplit("/", 1)[0]
    copy = f"COPY (SELECT * REPLACE (10 AS score) FROM judgements) TO '{folder}/part-9999999999999999999.parquet'"
    return [
        "ALTER VIEW scores RENAME TO s2", "COMMENT ON VIEW scores IS 'x'",
        f"ATTACH '{elsewhere}/x.db'", "CALL pragma_version()", "CHECKPOINT",
        copy + " (FORMAT parquet)", f"COPY judgements TO '{elsewhere}/out.csv'", f"COPY pricing FROM '{part}'",
        "COPY FROM DATABASE memory TO other", "CREATE TABLE t AS SELECT 1", "CREATE MACRO m(x) AS x",
        "CREATE SECRET (TYPE s3)", "DELETE FROM pricing", "TRUNCATE pricing", "DETACH other", "DROP VIEW scores",
        "EXECUTE p", f"EXPORT DATABASE '{elsewhere}/export'", f"IMPORT DATABASE '{elsewhere}/export'",
        "INSERT INTO pricing VALUES ('m', 0, 0, 0, 0, 0)", "INSTALL httpfs", "LOAD httpfs",
        f"LOAD '{elsewhere}/x.duckdb_extension'", "UPDATE EXTENSIONS",
        "MERGE INTO pricing USING (SELECT 1 AS a) s ON true WHEN MATCHED THEN DELETE",
        "PIVOT answers ON benchmark", "PRAGMA enable_profiling", "PREPARE p AS SELECT 1",
        "SET enable_external_access = true", "RESET lock_configuration", "SET VARIABLE x = 1", "USE memory",
        "BEGIN", "UPDATE pricing SET input = 0", "VACUUM", "ANALYZE",
        # EXPLAIN ANALYZE executes what it explains; an EXPLAIN of anything but a query is refused too
        f"EXPLAIN ANALYZE {copy} (FORMAT parquet)", f"EXPLAIN ANALYZE COPY (SELECT * FROM judgements LIMIT 0) TO "
        f"'{part}' (FORMAT parquet, USE_TMP_FILE false)", "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
        "explain /* a comment */ analyze SELECT 1", "EXPLAIN (ANALYZE, FORMAT json) SELECT 1",
        f"EXPLAIN {copy}", "EXPLAIN CREATE TABLE t AS SELECT 1", "EXPLAIN",
        f"SELECT 1; {copy}", f"SELECT * FROM query('{copy.replace(chr(39), chr(39) * 2)}')",
        # reading a file outside the views
        "SELECT * FROM read_text('/etc/hostname')", f"SELECT * FROM read_parquet('{part}')",
        f"SELECT * FROM read_parquet('{tables}/*/*/*.parquet')",
    ]


# No text parses to these in DuckDB 2.0 (ANALYZE parses as VACUUM, SET VARIABLE as SET, a macro as CREATE, COPY FROM
# DATABASE as PRAGMA); INVALID, RELATION and LOGICAL_PLAN are the client's own.
UNREACHABLE = {"ANALYZE", "COPY_DATABASE", "CREATE_FUNC", "EXTENSION", "INVALID", "LOGICAL_PLAN", "RELATION",
               "VARIABLE_SET"}


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` and its bytes' hash."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("lake")
    root = judged_rakuda_runs(base, {"t": TEXTS})
    (base / "elsewhere").mkdir()
    return root, base / "elsewhere"


def test_every_statement_type_is_tried():
    con = duckdb.connect()
    seen = set()
    for text in statements("t", "p", "e"):
        try:
            seen |= {s.type.name for s in con.extract_statements(text)}
        except ValueError:  # a type the client has no name for (UPDATE EXTENSIONS)
            seen.add("unnamed")
        except duckdb.ParserException:  # EXPLAIN alone
            seen.add("unparsable")
    assert set(duckdb.StatementType.__members__) - UNREACHABLE <= seen


def test_sql_refuses_every_statement_but_a_query_and_the_tree_stays_byte_identical(lake):
    root, elsewhere = lake
    before, scores = tree(root), cli("view", "--tag", "t", "--format", "csv", "--results-dir", str(root)).stdout
    part = str(next((root / "tables" / "judgements").glob("*/part-*.parquet")))
    refused = []
    for text in statements(str(root / "tables"), part, str(elsewhere)):
        proc = cli("sql", text, "--results-dir", str(root))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, (
            text, proc.stderr)
        assert not proc.stdout, text
        refused.append(proc.stderr)
    assert tree(root) == before and not list(elsewhere.iterdir())
    assert cli("view", "--tag", "t", "--format", "csv", "--results-dir", str(root)).stdout == scores
    assert sum("EXPLAIN ANALYZE" in r for r in refused) == 5 and sum("not COPY" in r for r in refused) == 5
    # queries still run: the views, DESCRIBE, SHOW, SUMMARIZE, a plain EXPLAIN
    for text in ("SELECT count(*) AS n FROM judgements", "DESCRIBE scores", "SHOW TABLES", "SUMMARIZE answers",
                 "EXPLAIN SELECT count(*) FROM answers", "FROM runs SELECT tag", "VALUES (1)"):
        proc = cli("sql", text, "--format", "csv", "--results-dir", str(root))
        assert proc.returncode == 0, (text, proc.stderr)
    assert cli("sql", "SELECT count(*) AS n FROM judgements", "--format", "csv", "--results-dir",
               str(root)).stdout.split() == ["n", "3"]


def test_the_python_api_reads_only_too(lake):
    root, elsewhere = lake
    before = tree(root)
    results = shaberi.open(root)
    part = str(next((root / "tables" / "judgements").glob("*/part-*.parquet")))
    for text in statements(str(root / "tables"), part, str(elsewhere)):
        for tag in (None, "t"):  # refused as the CLI refuses it; a query that reads a file fails in DuckDB
            with pytest.raises(UsageError if " read_" not in text and "query(" not in text else duckdb.Error):
                results.sql(text, tag=tag)
    assert tree(root) == before and not list(elsewhere.iterdir())
    assert results.sql("SELECT count(*) AS n FROM judgements", tag="t")["n"].to_list() == [3]
    assert results.sql("SELECT score FROM judgements WHERE score > $s ORDER BY 1", {"s": 2})["score"].to_list() == [
        3.0, 4.0]


def test_past_the_statement_check_the_connection_still_writes_nothing(lake):
    """The second wall alone: statements the check refuses, run on the read-only connection directly."""
    root, elsewhere = lake
    before = tree(root)
    part = next((root / "tables" / "judgements").glob("*/part-*.parquet"))
    con = connect(root, read_only=True)
    targets = [part, part.with_name("part-9999999999999999999.parquet"), elsewhere / "out.parquet"]
    for target in targets:
        for name in (str(target), f"shaberi-read://{target}"):
            for options in ("FORMAT parquet", "FORMAT parquet, USE_TMP_FILE false"):
                with pytest.raises(duckdb.Error):
                    con.execute(f"COPY (SELECT * FROM judgements LIMIT 0) TO '{name}' ({options})")
    for text in (f"EXPORT DATABASE '{elsewhere}/export'", f"ATTACH '{elsewhere}/x.db'",
                 "SET disabled_filesystems = ''", "SET enable_external_access = true", "INSTALL httpfs",
                 "SELECT * FROM read_text('/etc/hostname')"):
        with pytest.raises(duckdb.Error):
            con.execute(text)
    assert con.execute("SELECT count(*) FROM judgements").fetchone() == (3,)
    assert tree(root) == before and not list(elsewhere.iterdir())


def test_on_s3_the_bucket_is_left_as_it_was(s3, tmp_path, monkeypatch):
    monkeypatch.setenv("SHABERI_STATE_DIR", str(tmp_path / "state"))
    root = s3.bucket("read-only") + "/results"
    data = write_rakuda(tmp_path / "d", TEXTS)
    from shaberi.testing import LoopbackServer

    with LoopbackServer() as server:
        done = cli("run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
                   "--tag", "t", "--data-dir", str(data), "--results-dir", root)
        assert done.returncode == 0, done.stderr
    import fsspec

    fs = fsspec.filesystem("s3", endpoint_url=s3.env["AWS_ENDPOINT_URL"], use_listings_cache=False)

    def objects() -> dict[str, str]:
        return {key: info["ETag"] for key, info in fs.find(root, detail=True).items()}

    before = objects()
    part = next(k for k in before if "/judgements/" in k and k.endswith(".parquet"))
    folder = "s3://" + part.rsplit("/", 1)[0]
    for text in (f"EXPLAIN ANALYZE COPY (SELECT * REPLACE (10 AS score) FROM judgements) TO "
                 f"'{folder}/part-9999999999999999999.parquet' (FORMAT parquet)",
                 f"COPY (SELECT * FROM judgements LIMIT 0) TO 's3://{part}' (FORMAT parquet)",
                 f"COPY judgements TO '{tmp_path}/out.csv'", "SELECT * FROM read_text('/etc/hostname')"):
        proc = cli("sql", text, "--results-dir", root)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    con = connect(root, read_only=True)
    for name in (f"s3://{part}", f"{folder}/part-9999999999999999999.parquet"):
        with pytest.raises(duckdb.Error):
            con.execute(f"COPY (SELECT * FROM judgements LIMIT 0) TO '{name}' (FORMAT parquet, USE_TMP_FILE false)")
    assert con.execute("SELECT count(*) FROM judgements").fetchone() == (3,)
    assert objects() == before and not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("read_only", [True, False])
def test_duckdbs_threads_reading_one_part_at_once_read_what_it_holds(tmp_path, read_only):
    """DuckDB reads a Python file as seek, then read; its threads share the file: each must read from where it
    sought (else a footer reads as garbage: 'TProtocolException: Invalid data', or a row group as another's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from shaberi.tables.location import _literal_globbing, _local_reader, attach, reader_name

    n = 1_000_000
    pq.write_table(pa.table({"a": range(n), "b": [str(i) for i in range(n)]}), tmp_path / "x.parquet",
                   row_group_size=10_000)
    con = duckdb.connect()
    con.execute("SET threads = 4")
    if read_only:  # a local root's reader
        attach(con, tmp_path, read_only=True)
        name = reader_name(tmp_path / "x.parquet", True)
    else:  # a remote root's filesystem class, here over the local disk
        fs = _literal_globbing(_local_reader())()
        con.register_filesystem(fs)
        name = reader_name(tmp_path / "x.parquet", True)
    expected = (n * (n - 1) // 2, n)
    assert [con.execute(f"SELECT sum(a), count(DISTINCT b) FROM read_parquet('{name}')").fetchone()
            for _ in range(15)] == [expected] * 15
