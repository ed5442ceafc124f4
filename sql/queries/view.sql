-- shaberi view (shaberi/reports/view.py): a tag's scores table. $ids: the runs shown.

-- name: tokens
-- per model: tokens and cost by stage, then its Total; with several models, then the tag's (model NULL)
SELECT c.run_model, coalesce(c.stage, 'Total'), sum(c.requests), sum(c.cached_requests), sum(c.prompt_tokens),
       sum(c.completion_tokens), sum(c.cost_usd), bool_and(c.priced)
FROM cost c
WHERE list_contains($ids, c.run_id) GROUP BY ROLLUP (c.run_model, c.stage) HAVING count(*) > 0
ORDER BY c.stage IS NULL, c.stage;

-- name: unscored_runs
-- runs where a judge judged and holds no score: the statuses say why (costly, so asked of these only)
SELECT DISTINCT run_id FROM benchmark_scores
WHERE list_contains($ids, run_id) AND NOT is_pooled(judge) AND score IS NULL AND n > 0;

-- name: stopped_runs
-- runs the spending limit stopped (shaberi/pipeline.py records why in runs.error, after "stopped: ")
SELECT run_id, regexp_extract(error, 'stopped: (--max-cost [^;]*)', 1) FROM runs
WHERE list_contains($ids, run_id) AND status = 'partial' AND contains(error, 'stopped: --max-cost');

-- name: partial_runs
-- why a partial run is partial (shaberi/pipeline.py records it in runs.error: status.partial_reasons)
SELECT run_id, error FROM runs
WHERE list_contains($ids, run_id) AND status = 'partial' AND error IS NOT NULL AND NOT contains(error, 'stopped: --max-cost');

-- name: titles
SELECT benchmark, title FROM benchmark_info;

-- name: judges
-- the judges with judgements in these runs
SELECT DISTINCT judge FROM benchmark_scores WHERE list_contains($ids, run_id) AND NOT is_pooled(judge) ORDER BY 1;

-- name: pools
-- each judge's pooled row ('*', or '* [LABEL]' under another prompt set)
SELECT j, pooled_judge(j) FROM unnest($js::VARCHAR[]) t(j);

-- name: benchmarks
-- the core benchmarks always (a missing one shows as not run), others when they were run
SELECT benchmark, title FROM benchmark_info
WHERE in_overall OR benchmark IN (SELECT DISTINCT benchmark FROM questions WHERE list_contains($ids, run_id))
ORDER BY position;

-- name: run_benchmarks
SELECT benchmark, score, baseline_score, n, n_null, n_error + n_judge_error, n_not_judged, n_stale,
       prompt_hashes, n_readings_differ
FROM benchmark_scores WHERE run_id = $run AND judge = $judge;

-- name: run_overall
SELECT overall, baseline_overall, complete FROM run_scores WHERE run_id = $run AND judge = $judge;

-- name: answered
-- per benchmark: the answers these runs hold and how many of them are errors
SELECT benchmark, sum(answers), sum(answer_errors) FROM answer_coverage WHERE list_contains($ids, run_id) GROUP BY 1;

-- name: not_judged_by_judge
SELECT benchmark, judge, sum(n_not_judged)::BIGINT FROM benchmark_scores
WHERE NOT is_pooled(judge) AND list_contains($ids, run_id) GROUP BY ALL
HAVING sum(n_not_judged) > 0 ORDER BY 1, 2;

-- name: family_prompts
SELECT benchmark, list_sort(list_distinct(flatten(list(prompt_hashes)))) FROM benchmark_scores
WHERE list_contains($ids, run_id) AND judge = $judge GROUP BY 1;

-- name: family_stats
SELECT benchmark, mean, sd, ci_low, ci_high, min, max, runs, baseline_mean, ci_clipped FROM multi_run_stats
WHERE base_tag = $tag AND model = $model AND judge = $judge;

-- name: judged_benchmarks
SELECT benchmark FROM benchmark_scores WHERE list_contains($ids, run_id) AND judge = $judge AND n > 0;

-- name: core
SELECT benchmark FROM benchmark_info WHERE in_overall;
