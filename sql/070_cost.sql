-- cost: token usage priced per run, stage and model. A model is priced by the longest pricing entry its
-- name (or the part after the last '/') starts with, so 'gpt-4.1-2025-04-14' and 'openai/gpt-4.1' use
-- 'gpt-4.1'. Unpriced models (local ones) cost 0 and say so in `priced`.
CREATE OR REPLACE VIEW cost AS
WITH usage AS (
    SELECT run_id, stage, model, sum(requests)::BIGINT AS requests, sum(prompt_tokens)::BIGINT AS prompt_tokens,
           sum(completion_tokens)::BIGINT AS completion_tokens, sum(cached_requests)::BIGINT AS cached_requests
    FROM token_usage GROUP BY ALL
), matched AS (
    SELECT u.*, p.model AS price_model, p.input, p.output
    FROM usage u LEFT JOIN pricing p
      ON starts_with(u.model, p.model) OR starts_with(regexp_replace(u.model, '^.*/', ''), p.model)
    QUALIFY row_number() OVER (PARTITION BY u.run_id, u.stage, u.model ORDER BY length(p.model) DESC NULLS LAST) = 1
)
SELECT run_id, stage, model, requests, prompt_tokens, completion_tokens, cached_requests,
       price_model IS NOT NULL AS priced, price_model,
       coalesce(prompt_tokens / 1e6 * input + completion_tokens / 1e6 * output, 0) AS cost_usd
FROM matched;
