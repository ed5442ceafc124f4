-- shaberi compare (shaberi/reports/compare.py): what each side has, and the paired scores per benchmark. The
-- pairing rule itself is paired_questions() (sql/070_compare.sql). $a, $b: the sides' run ids.

-- name: judges
-- a side's judges: a judge whose calls all failed scored nothing there, so it is not one
SELECT DISTINCT judge FROM judgements
WHERE list_contains($r, run_id) AND strategy = '' AND score IS NOT NULL ORDER BY 1;

-- name: scored_judges
SELECT DISTINCT judge FROM judgements WHERE list_contains($r, run_id) AND score IS NOT NULL ORDER BY 1;

-- name: passes
SELECT DISTINCT pass_name || '@' || coalesce(pass_version, '') FROM pass_deltas
WHERE list_contains($r, run_id) AND strategy = '' ORDER BY 1;

-- name: prompts
-- per benchmark and side, the (judge, judging prompt) pairs of the judges used
SELECT DISTINCT benchmark, is_a, judge, coalesce(prompt_hash, '') FROM judgements JOIN side_runs($a, $b) USING (run_id)
WHERE strategy = '' AND list_contains($used, judge);

-- name: crossed_prompts
-- --judge-a / --judge-b: per benchmark and side, the judging prompts of that side's judge
SELECT DISTINCT benchmark, is_a, coalesce(prompt_hash, '') FROM judgements JOIN side_runs($a, $b) USING (run_id)
WHERE strategy = '' AND score IS NOT NULL AND judge = CASE WHEN is_a THEN $ja ELSE $jb END;

-- name: texts_differ
SELECT benchmark, question_id FROM texts_differ($a, $b);

-- name: benchmarks
-- per benchmark compared: the paired scores of each side (in question order), the questions each side dropped
-- by reason, the judge scores left out of paired questions, and whether it counts in the Overall
WITH p AS MATERIALIZED (SELECT * FROM paired_questions($a, $b, $passes, $keys, $ja, $jb))
SELECT b.benchmark, b.title,
       (SELECT list(score_a ORDER BY question_id) FROM p WHERE p.benchmark = b.benchmark AND p.judges IS NOT NULL),
       (SELECT list(score_b ORDER BY question_id) FROM p WHERE p.benchmark = b.benchmark AND p.judges IS NOT NULL),
       (SELECT map(list(dropped_a), list(n)) FROM (SELECT dropped_a, count(*) AS n FROM p
        WHERE p.benchmark = b.benchmark AND dropped_a IS NOT NULL GROUP BY 1)),
       (SELECT map(list(dropped_b), list(n)) FROM (SELECT dropped_b, count(*) AS n FROM p
        WHERE p.benchmark = b.benchmark AND dropped_b IS NOT NULL GROUP BY 1)),
       coalesce((SELECT sum(one_sided)::BIGINT FROM p WHERE p.benchmark = b.benchmark), 0), b.in_overall
FROM benchmark_info b
WHERE list_contains($benchmarks, b.benchmark)
ORDER BY b.position;
