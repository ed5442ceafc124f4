-- run_completeness: per run and judge (judge = '*': every judge of its family), whether the run did all the
-- work of its family: every question that any member has, per benchmark, answered and judged by that judge
-- (an answer error counts as done: it has its row; a failed judge call does not). A family is the runs
-- {tag}-run1 … N of one model; a run outside a family is complete when its own questions are.
-- Run-family statistics use complete runs only (multi_run_stats).
CREATE OR REPLACE VIEW run_completeness AS
WITH fam AS (
    SELECT run_id, model, base_tag, tag <> base_tag AS member FROM runs
), expected AS (
    SELECT DISTINCT f.model, f.base_tag, f.member, q.benchmark, q.question_id
    FROM questions q JOIN fam f USING (run_id) JOIN benchmark_info b USING (benchmark)
    WHERE NOT EXISTS (SELECT 1 FROM excluded_questions x WHERE x.benchmark = q.benchmark AND x.question_id = q.question_id)
), family_judges AS (
    SELECT DISTINCT f.model, f.base_tag, f.member, j.judge FROM run_judges j JOIN fam f USING (run_id)
), slots AS (
    SELECT f.run_id, j.judge, e.benchmark, e.question_id
    FROM fam f
    JOIN expected e USING (model, base_tag, member)
    JOIN family_judges j USING (model, base_tag, member)
), done AS (
    SELECT DISTINCT run_id, judge, benchmark, question_id FROM judgements
    WHERE strategy = '' AND sample_index = 0 AND coalesce(error NOT LIKE 'judge_error%', true)
)
SELECT s.run_id, coalesce(s.judge, '*') AS judge, count(*) AS expected, count(d.run_id) AS done,
       count(*) = count(d.run_id) AS complete,
       list(DISTINCT s.benchmark ORDER BY s.benchmark) FILTER (WHERE d.run_id IS NULL) AS incomplete_benchmarks
FROM slots s
LEFT JOIN done d USING (run_id, judge, benchmark, question_id)
GROUP BY GROUPING SETS ((s.run_id, s.judge), (s.run_id));
