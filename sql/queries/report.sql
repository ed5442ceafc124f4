-- shaberi report (shaberi/reports/html.py): what the HTML report asks the views. $ids: the block's runs.

-- name: categories
-- per benchmark and category, by the category_scores rule (sql/065_category_scores.sql)
SELECT title, category, score, n, question_scores FROM category_scores_of($ids, $judges) ORDER BY position, category;

-- name: titles
SELECT title, benchmark FROM benchmark_info;

-- name: judges
-- the block's own judges (each under its prompt set)
SELECT DISTINCT judge FROM benchmark_scores WHERE list_contains($ids, run_id) AND NOT is_pooled(judge) ORDER BY 1;

-- name: pool_of
SELECT pooled_judge($j);

-- name: pooled
-- the judges a pool holds in these runs: the headline's prompt set, never two sets in one number
SELECT DISTINCT judge FROM judgements WHERE list_contains($ids, run_id) AND pooled_judge(judge) = $pool ORDER BY 1;

-- name: histograms
-- per benchmark: these judges' judgements by rounded 0–10 score (NULL: no score), and whether the answer errored
SELECT b.title, round(s.score_10)::INTEGER, s.error = 'answer_error', count(*) FROM scores s
JOIN benchmark_info b USING (benchmark) WHERE list_contains($ids, s.run_id) AND s.strategy = ''
AND list_contains($judges, s.judge) GROUP BY ALL ORDER BY min(b.position);

-- name: spread
-- a family's run-to-run spread: each run's score per benchmark (and Overall), with the family's interval
WITH per_run AS (
    SELECT title, position, run_index, score FROM benchmark_scores
    WHERE list_contains($ids, run_id) AND judge = $pool AND score IS NOT NULL
    UNION ALL
    SELECT 'Overall', 1000, run_index, overall FROM run_scores
    WHERE list_contains($ids, run_id) AND judge = $pool AND overall IS NOT NULL
)
SELECT p.title, m.mean, m.ci_low, m.ci_high, list(p.run_index ORDER BY p.run_index),
       list(p.score ORDER BY p.run_index)
FROM per_run p LEFT JOIN multi_run_stats m
  ON m.title = p.title AND m.base_tag = $tag AND m.model = $model AND m.judge = $pool
GROUP BY ALL ORDER BY min(p.position);

-- name: pass_checked
-- per pass: what counts as checked (pass_coverage: a model that failed or gave no readable verdict checked nothing)
SELECT pass_name, sum(checked), sum(model_failed), sum(unreadable) FROM pass_coverage
WHERE list_contains($ids, run_id) GROUP BY 1;

-- name: pass_changes
-- per pass: the answers it changed (pass_effects), and the change on the 0–10 scale
SELECT pass_name, count(DISTINCT (run_id, benchmark, question_id)) FILTER (WHERE delta <> 0),
       avg(delta) FILTER (WHERE delta <> 0), min(delta) FILTER (WHERE delta <> 0),
       max(delta) FILTER (WHERE delta <> 0)
FROM pass_effects WHERE list_contains($ids, run_id) AND strategy = '' GROUP BY 1 ORDER BY 1;

-- name: pass_examples
-- a pass's biggest changes, with the answer they were made to
SELECT title, question_id, judge, delta, reason, content FROM pass_effects
WHERE list_contains($ids, run_id) AND strategy = '' AND pass_name = $name AND delta <> 0
ORDER BY abs(delta) DESC, benchmark, question_id, run_id LIMIT $n;

-- name: question_scores
-- per run and question: the mean over these judges (all, when none are given) of the first sample's score
SELECT s.run_id, s.benchmark, s.question_id, avg(s.score_10) FROM scores s
WHERE list_contains($ids, s.run_id) AND s.strategy = '' AND s.sample_index = 0
  AND (len($judges) = 0 OR list_contains($judges, s.judge)) GROUP BY ALL;

-- name: benchmarks
SELECT benchmark, title, to_ten FROM benchmark_info ORDER BY position;

-- name: asked
SELECT DISTINCT benchmark, question_id FROM questions WHERE list_contains($ids, run_id);
