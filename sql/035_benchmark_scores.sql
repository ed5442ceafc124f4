-- benchmark_scores: score_means with the run's names and what the scores leave out: answers the judge has
-- not judged (n_not_judged; n_stale of them judged only as an earlier text), counted, not scored.
CREATE OR REPLACE VIEW benchmark_scores AS
WITH c AS (
    SELECT run_id, coalesce(judge, pooled) AS judge, benchmark,
           sum(not_judged)::BIGINT AS n_not_judged, sum(stale)::BIGINT AS n_stale
    FROM (SELECT *, pooled_judge(judge) AS pooled FROM judge_coverage)
    GROUP BY GROUPING SETS ((run_id, judge, benchmark), (run_id, pooled, benchmark))
)
SELECT r.model, r.tag, r.base_tag, r.run_index, run_id, judge, benchmark,
       s.score, s.baseline_score, coalesce(s.n, 0) AS n, coalesce(s.n_scored, 0) AS n_scored,
       coalesce(s.n_null, 0) AS n_null, coalesce(s.n_error, 0) AS n_error,
       coalesce(s.n_judge_error, 0) AS n_judge_error, coalesce(c.n_not_judged, 0) AS n_not_judged,
       coalesce(c.n_stale, 0) AS n_stale, coalesce(s.prompt_hashes, []) AS prompt_hashes,
       coalesce(s.n_readings_differ, 0) AS n_readings_differ, b.title, b.position
FROM score_means s FULL JOIN c USING (run_id, judge, benchmark)
JOIN runs r USING (run_id)
JOIN benchmark_info b USING (benchmark);
