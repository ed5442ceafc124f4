-- Thin views over the Parquet lake, one per table in shaberi/tables/schema.py (judgements: judgement_rows).
-- {key:TABLE} is that table's key as schema.py declares it, {latest:TABLE} its latest-row rule (per key, the greatest
-- Table.version: created_at, a run's updated_at; ties to the part written last), from the one ordering schema.py
-- declares, which the store's reads and compaction use too (shaberi/tables/sql.py fills both in).
-- raw_<table> (created by shaberi/tables/sql.py) holds every stored row plus _file. token_usage (increments, summed) is defined with the
-- rows it reused, after the lineage rule (040_token_rollup.sql).

-- runs: status as readers show it (shown_status: a run whose writer died is interrupted, or waiting on the batches
-- it submitted), stored_status as its row holds it.
-- run_rows: each run's latest row, as its writer last wrote it.
CREATE OR REPLACE VIEW run_rows AS
SELECT * FROM raw_runs
QUALIFY {latest:runs};

CREATE OR REPLACE VIEW runs AS
WITH waiting AS (
    SELECT run_id, bool_or(status = 'submitted') AS waiting
    FROM (SELECT run_id, status FROM raw_batches QUALIFY {latest:batches}) GROUP BY run_id
)
SELECT r.* EXCLUDE (_file) REPLACE (shown_status(r.status, w.alive, b.waiting) AS status), r.status AS stored_status
FROM run_rows r LEFT JOIN run_writers w USING (run_id) LEFT JOIN waiting b USING (run_id);

CREATE OR REPLACE VIEW questions AS
SELECT * EXCLUDE (_file) FROM raw_questions
QUALIFY {latest:questions};

CREATE OR REPLACE VIEW answers AS
SELECT * EXCLUDE (_file) FROM raw_answers
QUALIFY {latest:answers};

-- answer_letters: per run, the letters of its answers and how many of them are Japanese (counted as each answer was
-- written: scripts.py), for the leaderboard's % JA without reading every answer again (shaberi/tables/memo.py).
CREATE OR REPLACE VIEW answer_letters AS
SELECT run_id, sum(japanese_chars)::BIGINT AS japanese_chars, sum(letter_chars)::BIGINT AS letter_chars
FROM answers GROUP BY run_id;

-- Every stored judgement version (one per answer, judge, judging prompt and judged text); which of them
-- count is the lineage rule's business (015_lineage.sql defines `judgements` from these).
CREATE OR REPLACE VIEW judgement_rows AS
SELECT * EXCLUDE (_file) FROM raw_judgements
QUALIFY {latest:judgements};

CREATE OR REPLACE VIEW pass_deltas AS
SELECT * EXCLUDE (_file) FROM raw_pass_deltas
QUALIFY {latest:pass_deltas};

-- A provider batch a run submitted: status submitted until its results were read, then collected (created_at: when
-- it came to be so); submitted_at and custom_ids (its requests) from the row that journaled its submission.
CREATE OR REPLACE VIEW batches AS
WITH submitted AS (
    SELECT run_id, batch_id, min(created_at) AS submitted_at, arg_min(custom_ids, created_at) AS custom_ids
    FROM raw_batches GROUP BY run_id, batch_id
)
SELECT b.* EXCLUDE (_file) REPLACE (s.custom_ids AS custom_ids), s.submitted_at
FROM raw_batches b JOIN submitted s USING (run_id, batch_id)
QUALIFY {latest:batches};

-- answer_id(run, bench, question, sample, strat): an answer's id in exports and viewers,
-- <run_id>/<benchmark>/<question_id>/<sample_index>[/<strategy>].
CREATE OR REPLACE MACRO answer_id(run, bench, question, sample, strat) AS
    run || '/' || bench || '/' || question || '/' || sample || CASE WHEN strat = '' THEN '' ELSE '/' || strat END;
