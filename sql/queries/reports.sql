-- Small queries of the API (shaberi/api.py), the question intervals (reports/intervals.py), judge agreement
-- (reports/agreement.py) and the cost estimate (estimate.py). $ids: the runs asked about.

-- name: runs
SELECT * FROM runs ORDER BY model, base_tag, run_index, tag;

-- name: answers
-- every current answer with its question
SELECT a.*, q.turns, q.reference, q.category FROM answers a
LEFT JOIN questions q USING (run_id, benchmark, question_id)
ORDER BY a.run_id, a.benchmark, a.question_id, a.sample_index;

-- name: multi_run_stats
SELECT * FROM multi_run_stats WHERE ($judge IS NULL OR judge = $judge) ORDER BY base_tag, model, judge, position;

-- name: run_ids
SELECT run_id FROM runs;

-- name: judgements
SELECT * FROM judgements WHERE ($judge IS NULL OR judge = $judge);

-- name: judgement_history
SELECT * FROM judgement_history WHERE ($judge IS NULL OR judge = $judge);

-- name: scores
SELECT * FROM scores WHERE ($judge IS NULL OR judge = $judge);

-- name: benchmark_scores
SELECT * FROM benchmark_scores WHERE ($judge IS NULL OR judge = $judge);

-- name: category_scores
SELECT * FROM category_scores WHERE ($judge IS NULL OR judge = $judge) ORDER BY model, base_tag, judge, position, category;

-- name: question_scores
-- the scores a question-clustered interval rests on: per benchmark, run and question, $judge's (a pool: its judges')
SELECT s.benchmark, s.run_id, s.question_id, s.score_10, b.in_overall, b.scale_min * b.to_ten,
       b.scale_max * b.to_ten
FROM scores s JOIN benchmark_info b USING (benchmark)
WHERE list_contains($ids, s.run_id) AND s.strategy = '' AND s.score_10 IS NOT NULL
  AND (s.judge = $judge OR pooled_judge(s.judge) = $judge)
ORDER BY b.position, s.question_id, s.run_id;

-- name: ratings
-- (unit, benchmark, judge, 0–10 score without passes) of every current judgement of these runs' raw answers
SELECT run_id || '/' || benchmark || '/' || question_id || '/' || sample_index, benchmark, judge, original_score_10
FROM scores WHERE list_contains($ids, run_id) AND strategy = '' ORDER BY ALL;

-- name: observed_answer_tokens
SELECT avg(completion_tokens) FROM answers WHERE model = $name AND completion_tokens > 0;

-- name: observed_judge_tokens
SELECT avg(completion_tokens) FROM judgements WHERE judge = $name AND completion_tokens > 0;

-- name: price
-- A model's input and output rates for a run ($run NULL: the entries for every run), through a batch or not.
SELECT CASE WHEN $batch THEN coalesce(p.batch_input, p.input) ELSE p.input END,
       CASE WHEN $batch THEN coalesce(p.batch_output, p.output) ELSE p.output END
FROM (SELECT price_of($run, $model) AS p) WHERE p IS NOT NULL;

-- name: total_cost
-- What the runs in the connection cost, all stages and models together (the spending limit's spend: llm/spending.py).
SELECT coalesce(sum(cost_usd), 0) FROM cost;

-- name: run_status
SELECT * FROM run_status ORDER BY run_id, benchmark NULLS FIRST;
