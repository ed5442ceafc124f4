-- shaberi pairwise (shaberi/pairwise/): what a job's comparisons give. A job's scope: $judge; $pairs, the pairs of
-- run ids its design compares ([first, second], first the smaller id); $benchmarks, the benchmarks it compares on.
-- Comparisons other jobs stored for other pairs or benchmarks of the same runs are not the job's.
-- How the two orders combine and which judgement counts is sql/080_pairwise.sql's rule.

-- name: outcomes
-- each question's outcome for each of the pairs (first: the smaller run id; 1 it won, 0 lost, 0.5 a tie)
SELECT benchmark, question_id, first, second, outcome, orders_disagree FROM pairwise_outcomes
WHERE judge = $judge AND list_contains($pairs, [first, second]) AND list_contains($benchmarks, benchmark)
  AND outcome IS NOT NULL
ORDER BY benchmark, question_id, first, second;

-- name: unsettled
-- questions of the pairs with no outcome yet, per benchmark: one order judged with a verdict and the other not (not
-- judged, its call failed, or no verdict read), or neither order with a verdict
SELECT benchmark, count(*) FILTER (WHERE orders = 1), count(*) FILTER (WHERE orders = 0) FROM pairwise_outcomes
WHERE judge = $judge AND list_contains($pairs, [first, second]) AND list_contains($benchmarks, benchmark)
  AND outcome IS NULL
GROUP BY ALL ORDER BY 1;

-- name: position
-- where the judge's verdicts on the pairs went: shown first, shown second, tie
SELECT coalesce(sum(first_wins), 0), coalesce(sum(second_wins), 0), coalesce(sum(ties), 0) FROM pairwise_position
WHERE judge = $judge AND list_contains($pairs, [least(run_a, run_b), greatest(run_a, run_b)])
  AND list_contains($benchmarks, benchmark);

-- name: scores
-- the runs' absolute scores (every judge pooled) on the compared benchmarks, for the agreement with the ratings
SELECT run_id, benchmark, score FROM benchmark_scores
WHERE judge = '*' AND list_contains($runs, run_id) AND list_contains($benchmarks, benchmark) AND score IS NOT NULL;

-- name: ratings
-- the latest fit of a job, as the view holds it
SELECT benchmark, tag, rated_run, rating, low, high, comparisons, win_rate, anchor, design, regularised, open_low,
       open_high
FROM pairwise_ratings WHERE run_id = $job AND judge = $judge ORDER BY benchmark, rating DESC, tag;

-- name: all_ratings
-- the latest fits (the Python API): every job's, or the jobs that rated exactly $runs (null: any), by $judge (null: any)
SELECT run_id AS job, judge, benchmark, tag, rated_run, rating, low, high, open_low, open_high, comparisons, win_rate,
       anchor, design, benchmarks, compared_with, regularised, bootstrap, seed, created_at
FROM pairwise_ratings
WHERE ($judge IS NULL OR judge = $judge)
  AND ($runs IS NULL OR (run_id, judge) IN (SELECT (run_id, judge) FROM pairwise_ratings GROUP BY run_id, judge
                                             HAVING list_sort(list(DISTINCT rated_run)) = list_sort($runs)))
ORDER BY job, judge, benchmark, rating DESC, tag;

-- name: jobs_for
-- the pairwise jobs (and judges) whose latest fit rated any of $runs: the report shows each
SELECT DISTINCT run_id, judge FROM pairwise_ratings WHERE list_contains($runs, rated_run) ORDER BY 1, 2;

-- name: job_runs
-- the runs a job's latest fit rated, with their tags
SELECT DISTINCT rated_run, tag FROM pairwise_ratings WHERE run_id = $job AND judge = $judge ORDER BY 2;

-- name: job_scope
-- a job's latest fit's scope: each rated run's opponents under its design, and the benchmarks it compared on (null
-- in a fit stored before they were)
SELECT rated_run, any_value(compared_with), any_value(benchmarks) FROM pairwise_ratings
WHERE run_id = $job AND judge = $judge AND benchmark = '*' GROUP BY ALL ORDER BY 1;

-- name: win_matrix
-- per pair: the first run's share of their questions' outcomes (a tie half), and how many
SELECT first, second, avg(outcome), count(*) FROM pairwise_outcomes
WHERE judge = $judge AND list_contains($pairs, [first, second]) AND list_contains($benchmarks, benchmark)
  AND outcome IS NOT NULL
GROUP BY ALL;

-- name: decided
-- the questions that decided a pair ($first < $second): both orders agreed on a winner; both answers, the judge's
-- reply in each order ($first shown first, then second)
SELECT o.benchmark, o.question_id, o.outcome, q.turns[len(q.turns)] AS question, a.content, b.content,
       f.judge_output, s.judge_output
FROM pairwise_outcomes o
JOIN questions q ON q.run_id = o.first AND q.benchmark = o.benchmark AND q.question_id = o.question_id
JOIN answers a ON a.run_id = o.first AND a.benchmark = o.benchmark AND a.question_id = o.question_id
                  AND a.sample_index = 0 AND a.strategy = ''
JOIN answers b ON b.run_id = o.second AND b.benchmark = o.benchmark AND b.question_id = o.question_id
                  AND b.sample_index = 0 AND b.strategy = ''
JOIN pairwise f ON f.judge = o.judge AND f.benchmark = o.benchmark AND f.question_id = o.question_id
                   AND f.run_a = o.first AND f.run_b = o.second
JOIN pairwise s ON s.judge = o.judge AND s.benchmark = o.benchmark AND s.question_id = o.question_id
                   AND s.run_a = o.second AND s.run_b = o.first
WHERE o.judge = $judge AND o.first = $first AND o.second = $second AND list_contains($benchmarks, o.benchmark)
  AND o.outcome <> 0.5
ORDER BY o.benchmark, o.question_id
LIMIT $limit;
