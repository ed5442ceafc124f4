"""The persisted results: the schema declared once (``schema``), rows built from typed values (``rows``),
Parquet parts written, compacted and locked (``store``, ``layout``), DuckDB views over them (``sql``) and
which runs a command reads (``selection``)."""
