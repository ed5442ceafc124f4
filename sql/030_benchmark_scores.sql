-- benchmark_scores: run × judge × benchmark, on the 0–10 scale (ELYZA's 1–5 × 2). score includes the
-- pass deltas, baseline_score does not. Null scores are counted (n_null), never averaged as 0:
-- n_error of them are answers that failed, n_judge_error judge calls that failed. Answers the judge has
-- not judged (n_not_judged; n_stale of them judged only as an earlier text) are counted, not scored.
-- prompt_hashes: the judging prompts the scores came from. judge = '*' pools the rows of every judge (as
-- the original leaderboard's "All" columns do; not a mean of judge means). Raw answers only (strategy =
-- ''); ensemble strategies have their own views.
CREATE OR REPLACE VIEW benchmark_scores AS
WITH s AS (  -- one pass over scores for both groupings: (run, judge, benchmark) and (run, benchmark)
    SELECT run_id, coalesce(judge, '*') AS judge, benchmark,
           avg(score_10) AS score, avg(original_score_10) AS baseline_score,
           count(*) AS n, count(score_10) AS n_scored, count(*) - count(score_10) AS n_null,
           count(*) FILTER (WHERE error = 'answer_error') AS n_error,
           count(*) FILTER (WHERE error LIKE 'judge_error%') AS n_judge_error,
           list(DISTINCT prompt_hash ORDER BY prompt_hash) FILTER (WHERE prompt_hash IS NOT NULL) AS prompt_hashes
    FROM scores WHERE strategy = ''
    GROUP BY GROUPING SETS ((run_id, judge, benchmark), (run_id, benchmark))
), c AS (
    SELECT run_id, coalesce(judge, '*') AS judge, benchmark,
           sum(not_judged)::BIGINT AS n_not_judged, sum(stale)::BIGINT AS n_stale
    FROM judge_coverage
    GROUP BY GROUPING SETS ((run_id, judge, benchmark), (run_id, benchmark))
)
SELECT r.model, r.tag, r.base_tag, r.run_index, run_id, judge, benchmark,
       s.score, s.baseline_score, coalesce(s.n, 0) AS n, coalesce(s.n_scored, 0) AS n_scored,
       coalesce(s.n_null, 0) AS n_null, coalesce(s.n_error, 0) AS n_error,
       coalesce(s.n_judge_error, 0) AS n_judge_error, coalesce(c.n_not_judged, 0) AS n_not_judged,
       coalesce(c.n_stale, 0) AS n_stale, coalesce(s.prompt_hashes, []) AS prompt_hashes, b.title, b.position
FROM s FULL JOIN c USING (run_id, judge, benchmark)
JOIN runs r USING (run_id)
JOIN benchmark_info b USING (benchmark);
