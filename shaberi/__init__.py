"""Shaberi: batch evaluation of LLMs on Japanese chat benchmarks, on a Parquet + DuckDB spine.

Stages, one module each: ``generate`` (answers). Tables are declared in ``schema``, stored by ``store``,
queried through ``sql``; every LLM call goes through ``client``. ``cli`` is the command line.
"""

__version__ = "0.1.0"
