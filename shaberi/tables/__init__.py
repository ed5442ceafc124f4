"""The persisted results: the schema declared once (``schema``), rows built from typed values (``rows``),
Parquet parts written, compacted and locked (``store``, ``layout``), and DuckDB views over them with run
selection (``sql``)."""
