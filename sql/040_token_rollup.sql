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
