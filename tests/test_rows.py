"""Rows are built in one place from the schema: a column the schema lacks is refused, and the SQL views'
keys are the schema's."""

from __future__ import annotations

import pytest

from shaberi.tables import rows
from shaberi.tables.schema import TABLES
from shaberi.tables.sql import connect


def test_builders_fill_the_identity_and_refuse_unknown_columns():
    key = rows.AnswerKey("rakuda", "q1")
    assert key == ("rakuda", "q1", 0, "")  # a plain tuple too: dict lookups by either agree
    row = rows.judgement("r", key, "j", (1, 10), "p", "a", score=7.0)
    assert {k: row[k] for k in ("run_id", "benchmark", "question_id", "sample_index", "strategy", "judge",
                                "score_scale", "score")} == {"run_id": "r", "benchmark": "rakuda", "question_id": "q1",
                                                             "sample_index": 0, "strategy": "", "judge": "j",
                                                             "score_scale": "1-10", "score": 7.0}
    assert row["created_at"] > 0 and set(row) <= set(TABLES["judgements"].columns)
    assert rows.AnswerKey.of(row) == key
    usage = rows.token_usage("r", "judging", "rakuda", "j", requests=2)
    assert set(usage) == set(TABLES["token_usage"].columns) and usage["cached_requests"] == 0
    with pytest.raises(ValueError, match="answers has no column scor"):
        rows.answer("r", key, "m", scor=1)


def test_the_views_partition_by_the_schema_keys(tmp_path):
    con = connect(tmp_path)
    for view, table in [("answers", "answers"), ("judgement_rows", "judgements"), ("pass_deltas", "pass_deltas")]:
        (sql,) = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = ?", [view]).fetchone()
        assert f"PARTITION BY {', '.join(TABLES[table].key)} ORDER BY" in " ".join(sql.split()), sql


def test_the_typed_rows_name_exactly_their_tables_columns():
    """``tables.typed`` mirrors ``schema.py`` for the rows the stages read back: a column added, renamed or dropped
    there and not here fails, and so does a key here that no table has."""
    from typing import get_type_hints

    from shaberi.tables import typed
    from shaberi.tables.schema import TABLES

    for table, kind in [("questions", typed.QuestionRow), ("answers", typed.AnswerRow),
                        ("judgements", typed.JudgementRow), ("pairwise", typed.PairwiseRow),
                        ("batches", typed.BatchRow)]:
        assert list(get_type_hints(kind)) == TABLES[table].schema.names, table
