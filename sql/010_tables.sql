-- Thin views over the Parquet lake, one per table in shaberi/schema.py (judgements: judgement_rows).
-- raw_<table> (created by shaberi/sql.py) holds every stored row plus _file; a key written twice
-- keeps its latest row, as the store's compaction does. token_usage rows are increments: summed.

CREATE OR REPLACE VIEW runs AS
SELECT * EXCLUDE (_file) FROM raw_runs
QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY updated_at DESC, _file DESC) = 1;

CREATE OR REPLACE VIEW questions AS
SELECT * EXCLUDE (_file) FROM raw_questions
QUALIFY row_number() OVER (PARTITION BY run_id, benchmark, question_id ORDER BY created_at DESC, _file DESC) = 1;

CREATE OR REPLACE VIEW answers AS
SELECT * EXCLUDE (_file) FROM raw_answers
QUALIFY row_number() OVER (
    PARTITION BY run_id, benchmark, question_id, sample_index, strategy ORDER BY created_at DESC, _file DESC) = 1;

-- Every stored judgement version (one per answer, judge, judging prompt and judged text); which of them
-- count is the lineage rule's business (015_lineage.sql defines `judgements` from these).
CREATE OR REPLACE VIEW judgement_rows AS
SELECT * EXCLUDE (_file) FROM raw_judgements
QUALIFY row_number() OVER (
    PARTITION BY run_id, benchmark, question_id, sample_index, strategy, judge, prompt_hash, answer_hash
    ORDER BY created_at DESC, _file DESC) = 1;

CREATE OR REPLACE VIEW pass_deltas AS
SELECT * EXCLUDE (_file) FROM raw_pass_deltas
QUALIFY row_number() OVER (
    PARTITION BY run_id, benchmark, question_id, sample_index, strategy, judge, pass_name
    ORDER BY created_at DESC, _file DESC) = 1;

CREATE OR REPLACE VIEW token_usage AS
SELECT run_id, stage, benchmark, model,
       sum(requests)::BIGINT AS requests,
       sum(prompt_tokens)::BIGINT AS prompt_tokens,
       sum(completion_tokens)::BIGINT AS completion_tokens,
       sum(cached_requests)::BIGINT AS cached_requests,
       max(created_at) AS created_at
FROM raw_token_usage
GROUP BY run_id, stage, benchmark, model;
