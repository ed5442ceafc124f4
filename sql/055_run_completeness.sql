-- run_completeness: per run and judge (judge = '*': every judge of its family; '* [LABEL]': those under a prompt
-- set, pooled_judge), whether the run did all the
-- work of its family: every question that any member has, per benchmark, answered and judged by that judge
-- (an answer error counts as done: it has its row; a failed judge call does not), and every benchmark × judge
-- holding a score (a member whose Rakuda replies were all unreadable would mix a 3-benchmark Overall in). A
-- family is the runs {tag}-run1 … N of one model; a run outside a family is complete when its own questions
-- are. Run-family statistics use complete runs only (multi_run_stats); reasons says why a run is not.
CREATE OR REPLACE VIEW run_completeness AS
WITH fam AS (
    SELECT run_id, model, base_tag, tag <> base_tag AS member FROM runs
), expected AS (  -- the family's questions
    SELECT DISTINCT f.model, f.base_tag, f.member, q.benchmark, q.question_id
    FROM questions q JOIN fam f USING (run_id) JOIN benchmark_info b USING (benchmark)
    ANTI JOIN excluded_questions x ON x.benchmark = q.benchmark AND x.question_id = q.question_id
), per_benchmark AS (
    SELECT model, base_tag, member, benchmark, count(*) AS expected FROM expected GROUP BY ALL
), family_judges AS (
    SELECT DISTINCT f.model, f.base_tag, f.member, j.judge FROM run_judges j JOIN fam f USING (run_id)
), done AS (  -- per run, judge and benchmark: the family's questions this judge has judged in this run
    SELECT j.run_id, j.judge, j.benchmark, count(DISTINCT j.question_id) AS done, count(j.score) AS scored
    FROM judgements j JOIN fam f USING (run_id)
    SEMI JOIN expected e ON e.model = f.model AND e.base_tag = f.base_tag AND e.member = f.member
                        AND e.benchmark = j.benchmark AND e.question_id = j.question_id
    WHERE j.strategy = '' AND j.sample_index = 0 AND coalesce(j.error NOT LIKE 'judge_error%', true)
    GROUP BY ALL
), slots AS (  -- every run × family judge × family benchmark, with what was expected and what was done
    SELECT f.run_id, j.judge, p.benchmark, p.expected, coalesce(d.done, 0) AS done, coalesce(d.scored, 0) AS scored
    FROM fam f
    JOIN per_benchmark p USING (model, base_tag, member)
    JOIN family_judges j USING (model, base_tag, member)
    LEFT JOIN done d ON d.run_id = f.run_id AND d.judge = j.judge AND d.benchmark = p.benchmark
)
SELECT run_id, coalesce(judge, pooled) AS judge, sum(expected)::BIGINT AS expected, sum(done)::BIGINT AS done,
       bool_and(done = expected AND scored > 0) AS complete,
       list(DISTINCT benchmark ORDER BY benchmark) FILTER (WHERE done < expected OR scored = 0) AS incomplete_benchmarks,
       list(CASE WHEN done < expected
                 THEN format('{}: {} of {} questions not answered and judged by {}', benchmark, expected - done,
                             expected, judge)
                 ELSE format('{}: no score by {}', benchmark, judge) END
            ORDER BY benchmark, judge) FILTER (WHERE done < expected OR scored = 0) AS reasons
FROM (SELECT *, pooled_judge(judge) AS pooled FROM slots)
GROUP BY GROUPING SETS ((run_id, judge), (run_id, pooled));
