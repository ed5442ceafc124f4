"""DuckDB over the results root: ``raw_<table>`` views on the Parquet parts, then ``sql/*.sql`` in order."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from .resources import resource_dir
from .schema import TABLES, Table

__all__ = ["connect"]


def _duck_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return _duck_type(t.value_type) + "[]"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    return {
        pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
        pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
    }[t]


def _raw_view(con: duckdb.DuckDBPyConnection, root: Path, spec: Table) -> None:
    """Every declared column with its declared type, whatever the age of the parts (missing → NULL)."""
    pattern = root / "tables" / spec.name / "*" / "part-*.parquet"
    columns = [(f.name, _duck_type(f.type)) for f in spec.schema]
    if any((root / "tables" / spec.name).glob("*/part-*.parquet")):
        source = "read_parquet('{}', union_by_name = true, filename = '_file', hive_partitioning = false)".format(
            str(pattern).replace("'", "''")
        )
        present = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
        select = [f'CAST("{n}" AS {t}) AS "{n}"' if n in present else f'CAST(NULL AS {t}) AS "{n}"'
                  for n, t in columns]
        select.append("_file")
    else:
        source = "(SELECT 1 WHERE false)"
        select = [f'CAST(NULL AS {t}) AS "{n}"' for n, t in columns] + ["CAST(NULL AS VARCHAR) AS _file"]
    con.execute(f"CREATE OR REPLACE VIEW raw_{spec.name} AS SELECT {', '.join(select)} FROM {source}")


def connect(root: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with every view defined; the Parquet files are read at query time."""
    con = duckdb.connect()
    for spec in TABLES.values():
        _raw_view(con, Path(root), spec)
    for path in sorted(resource_dir("sql").glob("*.sql")):
        con.execute(path.read_text(encoding="utf-8"))
    return con
