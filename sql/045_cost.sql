-- price_model(model): the pricing entry for a model name: the longest entry that the name (or the part
-- after its last '/') starts with, so 'gpt-4.1-2025-04-14' and 'openai/gpt-4.1' use 'gpt-4.1'.
CREATE OR REPLACE MACRO price_model(m) AS (
    SELECT p.model FROM pricing p
    WHERE starts_with(m, p.model) OR starts_with(regexp_replace(m, '^.*/', ''), p.model)
    ORDER BY length(p.model) DESC LIMIT 1
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
           sum(cached_requests)::BIGINT AS cached_requests, price_model(model) AS price_model
    FROM token_usage GROUP BY run_id, stage, model
)
SELECT r.tag, r.model AS run_model, u.run_id, u.stage, u.model, u.requests, u.prompt_tokens, u.completion_tokens, u.reasoning_tokens,
       u.cached_prompt_tokens, u.batch_prompt_tokens, u.batch_completion_tokens, u.cached_requests,
       u.price_model IS NOT NULL AS priced, u.price_model,
       coalesce((u.prompt_tokens - u.batch_prompt_tokens - u.cached_prompt_tokens) / 1e6 * p.input
                + u.cached_prompt_tokens / 1e6 * coalesce(p.cached_input, p.input)
                + u.batch_prompt_tokens / 1e6 * coalesce(p.batch_input, p.input)
                + (u.completion_tokens - u.batch_completion_tokens) / 1e6 * p.output
                + u.batch_completion_tokens / 1e6 * coalesce(p.batch_output, p.output), 0) AS cost_usd
FROM usage u LEFT JOIN pricing p ON p.model = u.price_model LEFT JOIN runs r USING (run_id);
