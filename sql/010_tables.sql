-- Thin views over the Parquet lake, one per table in shaberi/tables/schema.py (judgements: judgement_rows).
-- {key:TABLE} is that table's key as schema.py declares it (shaberi/tables/sql.py fills it in).
-- raw_<table> (created by shaberi/tables/sql.py) holds every stored row plus _file; a key written twice
-- keeps its latest row, as the store's compaction does. token_usage rows are increments: summed.

CREATE OR REPLACE VIEW runs AS
SELECT * EXCLUDE (_file) FROM raw_runs
QUALIFY row_number() OVER (PARTITION BY {key:runs} ORDER BY updated_at DESC, _file DESC) = 1;

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

CREATE OR REPLACE VIEW token_usage AS
SELECT {key:token_usage},
       sum(requests)::BIGINT AS requests,
       sum(prompt_tokens)::BIGINT AS prompt_tokens,
       sum(completion_tokens)::BIGINT AS completion_tokens,
       sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
       sum(cached_prompt_tokens)::BIGINT AS cached_prompt_tokens,
       sum(cached_requests)::BIGINT AS cached_requests,
       max(created_at) AS created_at
FROM raw_token_usage
GROUP BY {key:token_usage};
