"""DuckDB over the results root: ``raw_<table>`` views on the Parquet parts, reference tables, then
``sql/*.sql`` in order.

Reference tables made here so the SQL holds no benchmark facts of its own: ``benchmark_info`` (from the
benchmark registry: scale, the factor to the 0–10 scale, whether it counts in the overall score) and
``pricing`` (``data/pricing.toml`` or the user's ``--pricing`` file). ``t_quantile(p, df)`` is
scipy's Student t quantile, so confidence intervals come from scipy, not from a hand-written table.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import duckdb
import pyarrow as pa
from scipy import stats

from . import benchmarks as bm
from .errors import UsageError
from .resources import resource_dir
from .schema import TABLES, Table

__all__ = ["connect", "load_pricing"]


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


def load_pricing(path: Path | None = None) -> pa.Table:
    """USD per million tokens per model: ``[model] input = …, output = …, cached_input = …`` (TOML)."""
    path = path or resource_dir("data") / "pricing.toml"
    try:
        with open(path, "rb") as fh:
            entries = tomllib.load(fh)
        rows = [{"model": model, "input": float(p["input"]), "output": float(p["output"]),
                 "cached_input": float(p["cached_input"]) if "cached_input" in p else None}
                for model, p in entries.items()]
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"cannot read pricing file {path}: {exc}; each [model] needs input and output "
                         "(USD per million tokens)") from None
    schema = pa.schema([("model", pa.string()), ("input", pa.float64()), ("output", pa.float64()),
                        ("cached_input", pa.float64())])
    return pa.Table.from_pylist(rows, schema=schema)


def _benchmark_info() -> pa.Table:
    registry = bm.registry()
    rows = []
    for position, (name, entry) in enumerate(registry.items()):
        spec = bm.BENCHMARKS.get(name)
        if spec is not None:
            low, high = spec.scale
            rows.append({"benchmark": name, "title": entry.get("title", name), "position": position,
                         "scale_min": low, "scale_max": high, "to_ten": 10.0 / high,
                         "in_overall": not entry.get("opt_in", False)})
    return pa.Table.from_pylist(rows)


def _t_quantile(p: float, df: int) -> float | None:
    return float(stats.t.ppf(p, df)) if df is not None and df >= 1 else None


def connect(root: str | Path, pricing: Path | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with every view defined; the Parquet files are read at query time."""
    con = duckdb.connect()
    for spec in TABLES.values():
        _raw_view(con, Path(root), spec)
    con.register("_benchmark_info", _benchmark_info())
    con.execute("CREATE TABLE benchmark_info AS SELECT * FROM _benchmark_info")
    con.register("_pricing", load_pricing(pricing))
    con.execute("CREATE TABLE pricing AS SELECT * FROM _pricing")
    con.create_function("t_quantile", _t_quantile, ["DOUBLE", "BIGINT"], "DOUBLE", null_handling="special")
    for path in sorted(resource_dir("sql").glob("*.sql")):
        con.execute(path.read_text(encoding="utf-8"))
    return con
