-- The manifest and the export of one run (shaberi/reports/export.py), on a connection holding that run only; the
-- family summary on one holding the family. Questions in id order: q2 before q10, as inspect lists them.

-- name: run
SELECT * FROM runs;

-- name: run_names
SELECT model, tag FROM runs;

-- name: answer_errors
-- an example error per benchmark
SELECT benchmark, any_value(error) FROM answers WHERE error IS NOT NULL GROUP BY 1;

-- name: judged
SELECT benchmark, judge, count(*) AS rows, count(score) AS scored, min(created_at) AS first_at,
       max(created_at) AS last_at
FROM judgements GROUP BY ALL;

-- name: writer_alive
SELECT any_value(alive) FROM run_writers;

-- name: tokens
SELECT stage, benchmark, model, requests, prompt_tokens, completion_tokens, cached_requests FROM token_usage
ORDER BY stage, benchmark, model;

-- name: cost_by_stage
SELECT stage, sum(cost_usd) FROM cost GROUP BY 1;

-- name: pass_tokens
SELECT pass_name, count(*) FILTER (WHERE prompt_tokens IS NOT NULL) AS requests,
       coalesce(sum(prompt_tokens), 0)::BIGINT AS prompt_tokens,
       coalesce(sum(completion_tokens), 0)::BIGINT AS completion_tokens
FROM pass_deltas GROUP BY 1 ORDER BY 1;

-- name: answers
-- the answers' short fields; {located} is each stored row's place in its part, {match:a} joins it (tables.stream)
SELECT answer_id(a.run_id, a.benchmark, a.question_id, a.sample_index, a.strategy) AS answer_id, a.run_id,
       a.benchmark, a.question_id, a.sample_index, a.strategy,
       a.model, q.turns, q.reference, q.criteria, q.category, a.finish_reason, a.error, a.error_type,
       a.attempts, a.latency_ms, a.prompt_tokens AS answer_prompt_tokens,
       a.completion_tokens AS answer_completion_tokens, a.answer_hash, a.created_at::VARCHAR AS created_at,
       l._file, l._row
FROM answers a LEFT JOIN questions q USING (run_id, benchmark, question_id)
     JOIN {located} l ON {match:a}

-- name: answers_order
benchmark, length(question_id), question_id, sample_index, strategy

-- name: judgements
SELECT answer_id(j.run_id, j.benchmark, j.question_id, j.sample_index, j.strategy) AS answer_id, j.benchmark,
       j.question_id, j.judge AS judge_model, j.score,
       j.shaberi_score, j.score_scale, j.parse_method, j.error, j.finish_reason AS judge_finish_reason,
       -- unnamed: Shaberi's own prompts, or unknown for an import's (leaderboard.imported, the leaderboard's label)
       coalesce(j.prompt_set, CASE WHEN j.run_id IN (SELECT run_id FROM runs WHERE imported(generation_config))
                                   THEN 'unknown' ELSE 'shaberi' END) AS prompt_set, j.prompt_hash,
       j.answer_hash, a.prompt_tokens AS answer_prompt_tokens, a.completion_tokens AS answer_completion_tokens,
       j.prompt_tokens AS judge_prompt_tokens, j.completion_tokens AS judge_completion_tokens,
       j.created_at::VARCHAR AS created_at, j.sample_index, j.strategy, l._file, l._row
FROM judgements j
LEFT JOIN answers a ON a.run_id = j.run_id AND a.benchmark = j.benchmark AND a.question_id = j.question_id
                   AND a.sample_index = j.sample_index AND a.strategy = j.strategy
JOIN {located} l ON {match:j}

-- name: judgements_order
judge_model, benchmark, length(question_id), question_id, sample_index, strategy, created_at

-- name: scores_view
CREATE OR REPLACE TEMP VIEW x_scores AS
SELECT answer_id(run_id, benchmark, question_id, sample_index, strategy) AS answer_id, benchmark, question_id,
       judge AS judge_model, original_score, pass_delta, score, score_10, passes, error, prompt_hash
FROM scores ORDER BY judge, benchmark, length(question_id), question_id, sample_index;

-- name: passes_view
CREATE OR REPLACE TEMP VIEW x_passes AS
SELECT answer_id(run_id, benchmark, question_id, sample_index, strategy) AS answer_id, * EXCLUDE (run_id)
FROM pass_deltas ORDER BY pass_name, benchmark, length(question_id), question_id;

-- name: pass_files
SELECT DISTINCT pass_name, benchmark FROM x_passes;

-- name: pass_rows
SELECT * FROM x_passes WHERE pass_name = $name AND benchmark = $bench;

-- name: score_rows
SELECT * FROM x_scores;

-- name: metrics_benchmarks
SELECT judge, benchmark, title, score, baseline_score, n, n_scored, n_null, n_error, n_judge_error, n_not_judged,
       n_stale, prompt_hashes
FROM benchmark_scores ORDER BY judge, position;

-- name: metrics_overall
SELECT judge, overall, baseline_overall, benchmarks_scored, complete FROM run_scores ORDER BY judge;

-- name: metrics_cost
SELECT stage, model, requests, prompt_tokens, completion_tokens, priced, cost_usd FROM cost ORDER BY stage, model;

-- name: completeness
SELECT run_id, judge, complete, incomplete_benchmarks FROM run_completeness;

-- name: family_statistics
SELECT judge, benchmark, runs, mean, sd, margin, ci_low, ci_high, min, max, "values", excluded_runs,
       {'mean': baseline_mean, 'sd': baseline_sd, 'values': baseline_values} AS without_passes
FROM multi_run_stats ORDER BY judge, position;

-- name: family_tokens
-- Per member (and NULL: the family), what its calls used and cost (the cost view: priced as view prices them).
SELECT run_id, sum(requests)::BIGINT AS requests, sum(prompt_tokens)::BIGINT AS prompt_tokens,
       sum(completion_tokens)::BIGINT AS completion_tokens, sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
       sum(cost_usd) AS cost_usd, bool_and(priced) AS priced
FROM cost GROUP BY ROLLUP (run_id) ORDER BY run_id NULLS LAST;
