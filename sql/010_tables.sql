-- Thin views over the Parquet lake, one per table in shaberi/tables/schema.py (judgements: judgement_rows).
-- {key:TABLE} is that table's key as schema.py declares it (shaberi/tables/sql.py fills it in).
-- raw_<table> (created by shaberi/tables/sql.py) holds every stored row plus _file; a key written twice
-- keeps its latest row, as the store's compaction does. token_usage (increments, summed) is defined with the
-- rows it reused, after the lineage rule (040_token_rollup.sql).

-- runs: status as readers show it (shown_status: a run whose writer died is interrupted), stored_status as its
-- row holds it.
CREATE OR REPLACE VIEW runs AS
SELECT r.* EXCLUDE (_file) REPLACE (shown_status(r.status, w.alive) AS status), r.status AS stored_status
FROM raw_runs r LEFT JOIN run_writers w USING (run_id)
QUALIFY row_number() OVER (PARTITION BY r.run_id ORDER BY r.updated_at DESC, r._file DESC) = 1;

CREATE OR REPLACE VIEW questions AS
SELECT * EXCLUDE (_file) FROM raw_questions
QUALIFY row_number() OVER (PARTITION BY {key:questions} ORDER BY created_at DESC, _file DESC) = 1;

CREATE OR REPLACE VIEW answers AS
SELECT * EXCLUDE (_file) FROM raw_answers
QUALIFY row_number() OVER (
    PARTITION BY {key:answers} ORDER BY created_at DESC, _file DESC) = 1;

-- Every stored judgement version (one per answer, judge, judging prompt and judged text); which of them
-- count is the lineage rule's business (015_lineage.sql defines `judgements` from these).
CREATE OR REPLACE VIEW judgement_rows AS
SELECT * EXCLUDE (_file) FROM raw_judgements
QUALIFY row_number() OVER (
    PARTITION BY {key:judgements}
    ORDER BY created_at DESC, _file DESC) = 1;

CREATE OR REPLACE VIEW pass_deltas AS
SELECT * EXCLUDE (_file) FROM raw_pass_deltas
QUALIFY row_number() OVER (
    PARTITION BY {key:pass_deltas}
    ORDER BY created_at DESC, _file DESC) = 1;
