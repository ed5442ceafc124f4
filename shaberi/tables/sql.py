"""DuckDB over the results root: ``raw_<table>`` views on the Parquet parts, reference tables, then
``sql/*.sql`` in order.

Reference tables made here so the SQL holds no benchmark facts of its own: ``benchmark_info`` (from the
benchmark registry: scale, the factor to the 0–10 scale, whether it counts in the overall score),
``excluded_questions`` (kept in the tables, left out of scores: Tengu 61–65 in legacy imports) and
``pricing`` (``data/pricing.toml`` and the entries of the user's ``--pricing`` file). ``t_quantile(p, df)`` is
scipy's Student t quantile, so confidence intervals come from scipy, not from a hand-written table.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import duckdb

from .. import benchmarks as bm
from ..errors import PartReplaced, UsageError
from ..resources import resource_dir
from .failures import converted, storage_errors
from .layout import live_parts, live_parts_under
from .location import READER_SCHEME, Root, as_root, attach, glob_in, is_remote, reader_name
from .memo import PER_RUN_VIEWS, memo_dir, remember, rules_key, run_keys
from .reader import seal
from .schema import TABLES, Table
from .writers import probe_writers

__all__ = ["LATEST_RUN_ROW", "SCORE_DIGITS", "connect", "define_status", "latest_row", "load_pricing", "materialize",
           "query", "read_prices", "reattach", "relisting", "run_rows", "score_mean", "score_means", "shown_status",
           "status_rule"]

T = TypeVar("T")
# The one rule for a mean of scores, wherever it is printed (the views, the leaderboard, compare, the report):
# score_mean sums the values exactly (as decimals of SCORE_DIGITS places), divides once and rounds to SCORE_DIGITS.
# A sum of doubles depends on the order each plan gives, and the last bits it leaves would print one mean as
# 3.416666666 in one place and 3.416666667 in another (a mean of four 9-decimal means often ends in a 5).
SCORE_DIGITS = 9
_SCORE_MEAN = f"round(sum(x::DECIMAL(38, {SCORE_DIGITS})) / count(x), {SCORE_DIGITS})"
_means_lock = threading.Lock()
_means: duckdb.DuckDBPyConnection | None = None


def score_mean(values: Iterable[float | None]) -> float | None:
    """The mean of ``values`` (None skipped; None for none) by the views' own rule (the SQL macro score_mean), for
    a mean computed outside a view: the same values give the same number, to the last digit."""
    return score_means([values])[0]


def score_means(groups: Iterable[Iterable[float | None]]) -> list[float | None]:
    """``score_mean`` of each group, asked of DuckDB in one query (a leaderboard of hundreds of models takes
    thousands of means: one query each cost it seconds)."""
    global _means
    present = [[float(v) for v in values if v is not None] for values in groups]
    asked = [(i, values) for i, values in enumerate(present) if values]
    found: dict[int, float] = {}
    if asked:
        with _means_lock:
            if _means is None:
                _means = duckdb.connect()
                _means.execute(f"CREATE MACRO score_mean(x) AS {_SCORE_MEAN}")
            found = dict(_means.execute(
                "SELECT g, score_mean(x) FROM (SELECT g, unnest(v) AS x FROM (SELECT unnest($g) AS g, "
                "unnest($v::DOUBLE[][]) AS v)) GROUP BY g",
                {"g": [i for i, _ in asked], "v": [values for _, values in asked]}).fetchall())
    return [float(found[i]) if i in found else None for i in range(len(present))]


_QUERY_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@functools.cache
def _queries(group: str) -> dict[str, str]:
    path = resource_dir("sql") / "queries" / f"{group}.sql"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeyError(f"no query file {path}") from None
    pieces = _QUERY_NAME.split(text)  # [preamble, name, body, name, body, …]
    return {name: body.strip().rstrip(";") for name, body in zip(pieces[1::2], pieces[2::2], strict=True)}


def query(name: str) -> str:
    """The named query ``GROUP.NAME``: the section headed ``-- name: NAME`` of ``sql/queries/GROUP.sql``. The SQL a
    report or command asks the views lives beside the views, so that no rule hides in a Python string
    (``tests/test_architecture.py`` checks); the caller passes values only (DuckDB's ``$name`` parameters)."""
    group, _, section = name.partition(".")
    try:
        return _queries(group)[section]
    except KeyError:
        raise KeyError(f"no query {name!r} (sql/queries/{group}.sql, -- name: {section})") from None


def latest_row(table: str, file: str | None = "_file") -> str:
    """The latest-row rule as a QUALIFY condition: per key, the greatest ``Table.version`` (schema.py declares it,
    and the store's ``_latest`` keeps the same row), ties to the part written last (``file``: the column naming it;
    None where the rows carry none)."""
    spec = TABLES[table]
    order = f"{spec.version} DESC" + (f", {file} DESC" if file else "")
    return f"row_number() OVER (PARTITION BY {', '.join(spec.key)} ORDER BY {order}) = 1"


# A run's row is rewritten by every stage: its latest version is the run (as the runs view reads it).
LATEST_RUN_ROW = latest_row("runs", None)
_STATUS_SQL = "005_status.sql"


def define_status(con: duckdb.DuckDBPyConnection) -> None:
    """The status rule (``shown_status``) alone, for a connection that needs no other view (``find_runs``)."""
    con.execute((resource_dir("sql") / _STATUS_SQL).read_text(encoding="utf-8"))


_STATUS_RULES = ("worst_status", "combined_status", "finished_status")
_rules_lock = threading.Lock()
_rules: duckdb.DuckDBPyConnection | None = None


def status_rule(rule: str, statuses: list[str]) -> str:
    """``rule`` (worst_status, combined_status or finished_status of ``sql/005_status.sql``) over statuses held
    outside a view (a stage's over the benchmarks a run scoped, a sweep's model over its runs): the same words give
    the same status wherever they are combined."""
    if rule not in _STATUS_RULES:
        raise ValueError(f"no status rule {rule!r}; rules: {', '.join(_STATUS_RULES)}")
    return _status_rule(rule, tuple(s or "" for s in statuses))


@functools.lru_cache(maxsize=1024)
def _status_rule(rule: str, statuses: tuple[str, ...]) -> str:
    """A few words, asked of DuckDB once (about 2 ms a call): a view's section or a run's stage asks often."""
    global _rules
    with _rules_lock:
        if _rules is None:
            _rules = duckdb.connect()
            define_status(_rules)
        row = _rules.execute(f"SELECT {rule}($s::VARCHAR[])", {"s": list(statuses)}).fetchone()
    assert row is not None
    return str(row[0])


def shown_status(con: duckdb.DuckDBPyConnection, stored: str | None, alive: bool | None) -> str:
    """A status as readers show it, by the one rule (``sql/005_status.sql``), for a status held outside the runs
    view (a stage's record in ``runs.stages``)."""
    row = con.execute("SELECT shown_status($stored, $alive, NULL)", {"stored": stored, "alive": alive}).fetchone()
    assert row is not None
    return str(row[0])


def relisting(define: Callable[[], T], attempts: int = 8) -> T:
    """``define()`` (which lists parts and reads them), again after a pause while it fails because a part it
    listed is gone: a writer replaced it (a new part, then the old one goes) between the listing and the read.
    Binding a view reads the parts' footers too."""
    for attempt in range(attempts):
        try:
            return define()
        except duckdb.Error as exc:
            if attempt == attempts - 1 or not isinstance(converted(exc), PartReplaced):
                raise
            time.sleep(0.05 * 2 ** attempt)
    raise AssertionError("unreachable")


def _listed(root: Root, spec: Table, run_ids: list[str] | None) -> tuple[list[Root], bool]:
    """The table's live parts (of the partitions of ``run_ids`` only, when given), and whether they are every part
    under the table, so that one pattern can name them."""
    table_dir = root / "tables" / spec.name
    if run_ids is None:
        parts, listed = live_parts_under(table_dir)
        return parts, len(parts) == listed
    if len(run_ids) > 32:  # one listing of the table costs less than a listing per partition
        wanted = {f"run_id={r}" for r in run_ids}
        return [p for p in live_parts_under(table_dir)[0] if p.parent.name in wanted], False
    # only the partitions of these runs: the cost follows the runs asked about, not the whole lake
    return [p for r in run_ids for p in live_parts(glob_in(table_dir / f"run_id={r}", "part-*.parquet"))], False


def _raw_view(con: duckdb.DuckDBPyConnection, root: Root, spec: Table, run_ids: list[str] | None,
              read_only: bool = False, listed: tuple[list[Root], bool] | None = None, name: str | None = None) -> None:
    """Every declared column with its declared type, whatever the age of the parts (missing → NULL); ``read_only``:
    read through the read-only filesystem (``connect``); ``listed``: the parts, as ``_listed`` gave them; ``name``:
    the view's, if not ``raw_<table>``."""
    table_dir = root / "tables" / spec.name
    columns = spec.duckdb_columns
    parts, whole = listed or _listed(root, spec, run_ids)
    # One pattern while every part holds rows; a list when replaced parts are still there.
    files = [f"{reader_name(table_dir, read_only)}/*/part-*.parquet"] if parts and whole else \
        [reader_name(p, read_only) for p in parts]
    if files:
        quoted = ", ".join("'{}'".format(f.replace("'", "''")) for f in files)
        source = f"read_parquet([{quoted}], union_by_name = true, filename = '_file', hive_partitioning = false)"
        # Which declared columns exist at all: a column missing from every part is missing from the newest
        # one, so its schema is enough (union_by_name fills older parts at query time). Describing the
        # whole union would read every part's footer twice.
        newest = max(parts, key=lambda p: p.name)
        present = {r[0] for r in con.execute(
            "DESCRIBE SELECT * FROM read_parquet(?)", [reader_name(newest, read_only)]).fetchall()}
        select = [f'CAST("{n}" AS {t}) AS "{n}"' if n in present else f'CAST(NULL AS {t}) AS "{n}"'
                  for n, t in columns]
        # a part's own path, whichever filesystem read it
        select.append(f"_file[{len(READER_SCHEME) + 1}:] AS _file" if read_only and not is_remote(root) else "_file")
    else:
        source = "(SELECT 1 WHERE false)"
        select = [f'CAST(NULL AS {t}) AS "{n}"' for n, t in columns] + ["CAST(NULL AS VARCHAR) AS _file"]
    # On object storage every read is a request or several: the few runs asked about are copied in once.
    # A view is bound when a query reads it: binding reads every part's footer, and what the memo holds
    # (``memo.py``) is never read again.
    kind = "TEMP TABLE" if is_remote(root) and run_ids is not None else "VIEW"
    defer = " WITH (DEFER_BINDING)" if kind == "VIEW" else ""
    view = name or f"raw_{spec.name}"
    con.execute(f"CREATE OR REPLACE {kind} {view}{defer} AS SELECT {', '.join(select)} FROM {source}")


def run_rows(con: duckdb.DuckDBPyConnection, root: Root, parts: list[Root]) -> str:
    """A view of the latest row of each run these parts of the runs table hold: ``run_rows``'s rule
    (``sql/010_tables.sql``), its entries read back where ``memo.py`` has them; for ``find_runs``, which reads only
    the runs table. Its name is returned."""
    _raw_view(con, root, TABLES["runs"], None, listed=(parts, False), name="found_raw_runs")
    con.execute(f"CREATE OR REPLACE VIEW found_run_rows AS SELECT * FROM found_raw_runs QUALIFY {latest_row('runs')}")
    runs = list(dict.fromkeys(p.parent.name.removeprefix("run_id=") for p in parts))
    rules = _memo_rules()
    remember(con, "found_run_rows", memo_dir(root), rules, run_keys("run_rows", rules, {"runs": parts}, runs),
             lambda p: reader_name(p, False), entry="run_rows")
    return "found_run_rows"


def reattach(con: duckdb.DuckDBPyConnection, root: str | Path | Root, table: str, run_ids: list[str] | None) -> None:
    """Point ``raw_<table>`` at the table's parts as they are now (after a write replaced the ones a
    connection was made with); the views over it see the new rows at their next query."""
    relisting(lambda: _raw_view(con, as_root(root), TABLES[table], run_ids))


def materialize(con: duckdb.DuckDBPyConnection, *views: str) -> duckdb.DuckDBPyConnection:
    """Compute these views once, as temp tables of the same name (they shadow the views, and every view
    built on them reads the table): for a command that asks many questions of the same few runs. Give them
    in dependency order; the connection must not see the tables change afterwards."""
    for view in views:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {view} AS SELECT * FROM main.{view}")
    return con


RATES = ("input", "output", "cached_input", "batch_input", "batch_output")


def read_prices(path: Path) -> dict[str, dict[str, float]]:
    """The entries of one price file (TOML, USD per million tokens): ``[model] input = …, output = …`` and
    optionally ``cached_input``, ``batch_input``, ``batch_output``; model -> {rate: price}. A file that cannot be
    read, or an entry without input and output or with a price that is not 0 or more, is bad input."""

    def rate(model: str, name: str, value: object) -> float:
        # a number, 0 or more: not true (1.0 to float()), not "3", not NaN or inf (no limit could count it)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
            raise ValueError(f"[{model}] {name} = {value!r} is no price (USD per million tokens, 0 or more)")
        return float(value)

    def entry(model: str, table: object) -> dict[str, float]:
        if not isinstance(table, dict):
            raise ValueError(f"{model} = {table!r} is not a [model] table")
        if unknown := sorted(set(table) - set(RATES)):  # a misspelt rate would be priced as the input rate
            raise ValueError(f"[{model}] has no rate {', '.join(unknown)} (rates: {', '.join(RATES)})")
        if missing := [r for r in RATES[:2] if r not in table]:
            raise ValueError(f"[{model}] has no {' and '.join(missing)}")
        return {name: rate(model, name, table[name]) for name in RATES if name in table}

    try:
        with open(path, "rb") as fh:
            entries = tomllib.load(fh)
        prices = {model: entry(model, table) for model, table in entries.items()}
    except (OSError, tomllib.TOMLDecodeError, TypeError, ValueError) as exc:
        raise UsageError(f"cannot read pricing file {path}: {exc}; each [model] needs input and output "
                         "(USD per million tokens)") from None
    return prices


def load_pricing(path: Path | None = None) -> list[tuple]:
    """The ``pricing`` table's rows, (model, input, output, cached_input, batch_input, batch_output, given): the
    shipped ``data/pricing.toml``, and the entries of ``path`` (``--pricing FILE``, given) which are looked up
    before the shipped ones and the run's own (``runs.pricing``: sql/045_cost.sql)."""
    files = [(resource_dir("data") / "pricing.toml", False), *([(path, True)] if path else [])]
    return [(model, *(entry.get(r) for r in RATES), given)
            for each, given in files for model, entry in read_prices(each).items()]


def _benchmark_info() -> list[tuple]:
    rows = []
    for position, (name, entry) in enumerate(bm.registry().items()):
        spec = bm.BENCHMARKS.get(name)
        if spec is not None:
            low, high = spec.scale
            rows.append((name, entry.get("title", name), position, low, high, 10.0 / high, entry["in_overall"]))
    return rows


_KEY = re.compile(r"\{key:([a-z_]+)\}")
_LATEST = re.compile(r"\{latest:([a-z_]+)\}")
_VIEW = re.compile(r"^CREATE OR REPLACE VIEW (\w+) AS", re.MULTILINE)


def _prepared(script: str) -> str:
    """A ``sql/`` script as it is run: ``{key:TABLE}`` filled with the table's key columns as ``schema.TABLES``
    declares them, ``{latest:TABLE}`` with its latest-row rule (``latest_row``), and each view bound when a query
    reads it, not when it is created (``DEFER_BINDING``). Binding a view binds every view under it; a query binds
    them anyway, so binding all of them up front only cost every command 90 ms (measured: ``connect`` 126 → 40 ms)."""
    script = _KEY.sub(lambda m: ", ".join(TABLES[m[1]].key), script)
    script = _LATEST.sub(lambda m: latest_row(m[1]), script)
    return _VIEW.sub(r"CREATE OR REPLACE VIEW \1 WITH (DEFER_BINDING) AS", script)


def _t_quantile(p: float, df: int) -> float | None:
    """scipy's Student t quantile (``stdtrit`` is what ``scipy.stats.t.ppf`` evaluates); imported on first
    use because ``scipy.stats`` alone takes most of a second to import."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p)) if df is not None and df >= 1 else None


def connect(root: str | Path | Root, pricing: Path | None = None, run_ids: list[str] | None = None,
            upto: str | None = None, con: duckdb.DuckDBPyConnection | None = None,
            cache: tuple[str, ...] = (), read_only: bool = False, memo: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with every view defined; the Parquet files are read at query time. With
    ``run_ids``, every table holds only those runs (the runs table included). With ``upto`` (a view
    named by a file ``sql/NNN_<view>.sql``), the files after it are not applied: a command that needs
    only the first views does not pay for binding the rest. ``con``: an empty connection to define them in
    (each new in-memory database costs 20 ms; ``find_runs`` can share one). ``cache``: views computed once,
    as soon as they are defined (``materialize``), for a command that asks many questions of a few runs;
    the views defined after them bind to the table, which is cheaper too. ``read_only``: for a user's own queries
    (``reader``): the views read through a filesystem that only reads, and the connection is sealed, able to read
    the results' tables and nothing else. ``memo``: read the views computed once per run (``memo.py``); a
    writer's own connection, which reads its run as it goes, has no use for them."""
    root = as_root(root)
    with storage_errors():
        con = attach(con or duckdb.connect(), root, read_only)
        remembered = relisting(lambda: _define(con, root, pricing, run_ids, upto, cache, read_only, memo))
    if read_only:
        seal(con, root, (memo_dir(root),) if remembered else ())
    return con


def _define(con: duckdb.DuckDBPyConnection, root: Root, pricing: Path | None, run_ids: list[str] | None,
            upto: str | None, cache: tuple[str, ...], read_only: bool = False, memo: bool = True) -> bool:
    """The views (``connect``); whether any reads entries of ``memo.py``."""
    listed = {name: _listed(root, spec, run_ids) for name, spec in TABLES.items()}
    for name, spec in TABLES.items():
        _raw_view(con, root, spec, run_ids, read_only, listed[name])
    # Plain inserts: registering Arrow tables would make DuckDB import pandas (a third of a second).
    con.execute("CREATE OR REPLACE TABLE benchmark_info (benchmark VARCHAR, title VARCHAR, position INTEGER, "
                "scale_min INTEGER, scale_max INTEGER, to_ten DOUBLE, in_overall BOOLEAN)")
    con.executemany("INSERT INTO benchmark_info VALUES (?, ?, ?, ?, ?, ?, ?)", _benchmark_info())
    con.execute("CREATE OR REPLACE TABLE excluded_questions (benchmark VARCHAR, question_id VARCHAR)")
    excluded = [(name, q) for name, spec in bm.BENCHMARKS.items() for q in sorted(spec.excluded)]
    if excluded:
        con.executemany("INSERT INTO excluded_questions VALUES (?, ?)", excluded)
    con.execute("CREATE OR REPLACE TABLE pricing (model VARCHAR, input DOUBLE, output DOUBLE, cached_input DOUBLE, "
                "batch_input DOUBLE, batch_output DOUBLE, given BOOLEAN)")
    con.executemany("INSERT INTO pricing VALUES (?, ?, ?, ?, ?, ?, ?)", load_pricing(pricing))
    con.execute(f"CREATE OR REPLACE MACRO score_round(x) AS round(x, {SCORE_DIGITS})")
    con.execute(f"CREATE OR REPLACE MACRO score_mean(x) AS {_SCORE_MEAN}")
    scripts = []
    for path in sorted(resource_dir("sql").glob("*.sql")):
        scripts.append(_prepared(path.read_text(encoding="utf-8")))
        if upto is not None and path.stem.split("_", 1)[1] == upto:
            break
    if upto is None or any("t_quantile" in s for s in scripts):  # registering a Python UDF imports numpy
        # null_handling as a string: the enum's module moved between DuckDB versions (functional, func)
        with contextlib.suppress(duckdb.Error):  # defined by an attempt that met a replaced part
            con.remove_function("t_quantile")
        con.create_function("t_quantile", _t_quantile, ["DOUBLE", "BIGINT"], "DOUBLE",
                            null_handling="special")  # type: ignore[call-overload]
    parts = {name: found for name, (found, _) in listed.items()}
    runs = run_ids if run_ids is not None else [p.parent.name.removeprefix("run_id=") for p in parts["runs"]]
    rules = _memo_rules() if memo and runs else ""
    remembered = False
    pending = list(cache)
    for script in scripts:
        con.execute(script)
        for view in (v for v in PER_RUN_VIEWS if rules and f"VIEW {v} WITH" in script):
            keys = run_keys(view, rules, parts, runs)
            remembered |= remember(con, view, memo_dir(root), rules, keys, lambda p: reader_name(p, read_only))
        if "VIEW run_rows WITH" in script:  # the writers of the runs said to be running: before any reads runs
            probe_writers(con, root, "SELECT run_id, status FROM run_rows")
        while pending and f"VIEW {pending[0]} WITH" in script:
            materialize(con, pending.pop(0))
    return remembered


@functools.cache
def _memo_rules() -> str:
    """What, besides a run's parts, the views' rows depend on (``memo.rules_key``): every script, the reference
    tables, the declared columns."""
    scripts = [p.read_text(encoding="utf-8") for p in sorted(resource_dir("sql").glob("*.sql"))]
    excluded = sorted((name, q) for name, spec in bm.BENCHMARKS.items() for q in spec.excluded)
    columns = [(name, spec.duckdb_columns) for name, spec in TABLES.items()]
    return rules_key(*scripts, _SCORE_MEAN, repr(_benchmark_info()), repr(excluded), repr(columns))
