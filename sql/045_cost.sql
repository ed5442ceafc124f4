-- prices: the price entries each run is priced with, best first for a model name that several entries match:
-- the reader's --pricing file (pricing.given), then the run's own (runs.pricing: the --pricing entries its commands
-- were given, which its --max-cost counted), then the shipped data/pricing.toml. run_id NULL: for every run.
CREATE OR REPLACE VIEW prices AS
SELECT NULL::VARCHAR AS run_id, model, input, output, cached_input, batch_input, batch_output,
       CASE WHEN given THEN 0 ELSE 2 END AS precedence
FROM pricing
UNION ALL
SELECT run_id, model, e.input, e.output, e.cached_input, e.batch_input, e.batch_output, 1 AS precedence
FROM (SELECT run_id, k AS model, from_json(pricing::JSON -> k, '{"input": "DOUBLE", "output": "DOUBLE",
          "cached_input": "DOUBLE", "batch_input": "DOUBLE", "batch_output": "DOUBLE"}') AS e
      FROM runs, unnest(json_keys(pricing::JSON)) AS names(k) WHERE pricing IS NOT NULL AND pricing <> '{}');

-- price_of(run, model): the entry a run's calls to a model are priced with (NULL: unpriced): the longest entry
-- name that the model's name (or the part after its last '/') starts with, so 'gpt-4.1-2025-04-14' and
-- 'openai/gpt-4.1' use 'gpt-4.1'; of entries of one name, the first in prices' order.
CREATE OR REPLACE MACRO price_of(run, m) AS (
    SELECT p FROM prices p
    WHERE (p.run_id IS NULL OR p.run_id = run)
      AND (starts_with(m, p.model) OR starts_with(regexp_replace(m, '^.*/', ''), p.model))
    ORDER BY length(p.model) DESC, p.precedence LIMIT 1
);

-- cost: token usage priced per run, stage and model (USD). Prompt tokens the provider's cache served
-- (cached_prompt_tokens) are priced at the entry's cached_input rate (its input rate when it has none); tokens
-- sent through a Batch API (batch_prompt_tokens, batch_completion_tokens) at its batch_input and batch_output
-- rates (the synchronous ones when it has none); reasoning tokens are part of completion_tokens and priced with
-- them. Unpriced models (local ones) cost 0 and say so in `priced`. model is the model called (the candidate or a
-- judge); tag and run_model are the run's, so that WHERE tag = 'v1' reads a tag's cost.
CREATE OR REPLACE VIEW cost AS
WITH usage AS (
    SELECT run_id, stage, model, sum(requests)::BIGINT AS requests, sum(prompt_tokens)::BIGINT AS prompt_tokens,
           sum(completion_tokens)::BIGINT AS completion_tokens,
           coalesce(sum(reasoning_tokens), 0)::BIGINT AS reasoning_tokens,
           coalesce(sum(cached_prompt_tokens), 0)::BIGINT AS cached_prompt_tokens,
           sum(batch_prompt_tokens)::BIGINT AS batch_prompt_tokens,
           sum(batch_completion_tokens)::BIGINT AS batch_completion_tokens,
           sum(cached_requests)::BIGINT AS cached_requests, price_of(run_id, model) AS p
    FROM token_usage GROUP BY run_id, stage, model
)
SELECT r.tag, r.model AS run_model, u.run_id, u.stage, u.model, u.requests, u.prompt_tokens, u.completion_tokens, u.reasoning_tokens,
       u.cached_prompt_tokens, u.batch_prompt_tokens, u.batch_completion_tokens, u.cached_requests,
       u.p IS NOT NULL AS priced, u.p.model AS price_model,
       coalesce((u.prompt_tokens - u.batch_prompt_tokens - u.cached_prompt_tokens) / 1e6 * u.p.input
                + u.cached_prompt_tokens / 1e6 * coalesce(u.p.cached_input, u.p.input)
                + u.batch_prompt_tokens / 1e6 * coalesce(u.p.batch_input, u.p.input)
                + (u.completion_tokens - u.batch_completion_tokens) / 1e6 * u.p.output
                + u.batch_completion_tokens / 1e6 * coalesce(u.p.batch_output, u.p.output), 0) AS cost_usd
FROM usage u LEFT JOIN runs r USING (run_id);
