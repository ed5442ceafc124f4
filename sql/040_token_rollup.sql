-- reused: per run, stage, benchmark and model, the rows that count now which the stage's latest invocation
-- found stored and did not call for again: made before it started, within what it worked on (runs.stages:
-- started_at, benchmarks, and a judge stage's judges). Counted from the tables, so once however often a run is
-- resumed (the cached_requests stored in token_usage parts were added again by every resume: not read).
CREATE OR REPLACE VIEW reused AS
WITH began AS (
    SELECT r.run_id, s.key AS stage, try_cast(json_extract_string(s.value, '$.started_at') AS BIGINT) AS started_at,
           json_extract(s.value, '$.benchmarks') IS NULL AS every_benchmark,
           json_extract_string(s.value, '$.benchmarks[*]') AS benchmarks,
           json_extract_string(s.value, '$.judges[*]') AS judges
    FROM runs r, json_each(r.stages) s
)
SELECT a.run_id, 'generation' AS stage, a.benchmark, a.model, count(*) AS rows
FROM answers a JOIN began b ON b.run_id = a.run_id AND b.stage = 'generate'
WHERE a.strategy = '' AND a.error IS NULL AND epoch_us(a.created_at) < b.started_at
  AND (b.every_benchmark OR list_contains(b.benchmarks, a.benchmark))
GROUP BY ALL
UNION ALL
SELECT j.run_id, 'judging', j.benchmark, j.judge, count(*)
FROM judgements j JOIN began b ON b.run_id = j.run_id AND b.stage = 'judge'
WHERE j.strategy = '' AND j.error IS DISTINCT FROM 'answer_error' AND epoch_us(j.created_at) < b.started_at
  AND (b.every_benchmark OR list_contains(b.benchmarks, j.benchmark)) AND list_contains(b.judges, j.judge)
GROUP BY ALL;

-- token_usage: the calls each stage made (increments, summed over every invocation), and the rows it reused.
CREATE OR REPLACE VIEW token_usage AS
WITH used AS (
    SELECT {key:token_usage},
           sum(requests)::BIGINT AS requests,
           sum(prompt_tokens)::BIGINT AS prompt_tokens,
           sum(completion_tokens)::BIGINT AS completion_tokens,
           sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
           sum(cached_prompt_tokens)::BIGINT AS cached_prompt_tokens,
           sum(batch_prompt_tokens)::BIGINT AS batch_prompt_tokens,
           sum(batch_completion_tokens)::BIGINT AS batch_completion_tokens,
           max(created_at) AS created_at
    FROM raw_token_usage
    GROUP BY {key:token_usage}
)
SELECT run_id, stage, benchmark, model, coalesce(u.requests, 0)::BIGINT AS requests,
       coalesce(u.prompt_tokens, 0)::BIGINT AS prompt_tokens,
       coalesce(u.completion_tokens, 0)::BIGINT AS completion_tokens, u.reasoning_tokens, u.cached_prompt_tokens,
       coalesce(u.batch_prompt_tokens, 0)::BIGINT AS batch_prompt_tokens,
       coalesce(u.batch_completion_tokens, 0)::BIGINT AS batch_completion_tokens,
       coalesce(r.rows, 0)::BIGINT AS cached_requests, u.created_at
FROM used u FULL JOIN reused r USING (run_id, stage, benchmark, model);

-- token_rollup: token_usage totals per run by stage, by benchmark, by model, and for the whole run
-- (the rolled-up dimensions are NULL).
CREATE OR REPLACE VIEW token_rollup AS
SELECT run_id, stage, benchmark, model,
       sum(requests)::BIGINT AS requests, sum(prompt_tokens)::BIGINT AS prompt_tokens,
       sum(completion_tokens)::BIGINT AS completion_tokens,
       coalesce(sum(reasoning_tokens), 0)::BIGINT AS reasoning_tokens,
       coalesce(sum(cached_prompt_tokens), 0)::BIGINT AS cached_prompt_tokens,
       sum(cached_requests)::BIGINT AS cached_requests
FROM token_usage
GROUP BY GROUPING SETS ((run_id, stage), (run_id, benchmark), (run_id, model), (run_id));
