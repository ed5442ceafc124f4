-- score_means: run × judge × benchmark, on the 0–10 scale (ELYZA's 1–5 × 2): the means and counts of the
-- current judgements' scores alone (what the leaderboard needs). score includes the pass deltas,
-- baseline_score does not. Null scores are counted (n_null), never averaged as 0: n_error of them are
-- answers that failed, n_judge_error judge calls that failed. n_readings_differ: judgements under an original prompt
-- set whose score (the original's reading) is not Shaberi's reading of the same replies. prompt_hashes: the judging prompts the scores
-- came from. judge = '*' pools the rows of every judge (as the original leaderboard's "All" columns do; not
-- a mean of judge means); '* [LABEL]' those of every judge under another prompt set (pooled_judge). Raw answers only (strategy = ''); ensemble strategies have their own views.
-- Means are score_mean (shaberi/tables/sql.py: summed exactly and rounded, one number wherever it prints).
CREATE OR REPLACE VIEW score_means AS
SELECT run_id, coalesce(judge, pooled) AS judge, benchmark,
       score_mean(score_10) AS score, score_mean(original_score_10) AS baseline_score,
       count(*) AS n, count(score_10) AS n_scored, count(*) - count(score_10) AS n_null,
       count(*) FILTER (WHERE error = 'answer_error') AS n_error,
       count(*) FILTER (WHERE error LIKE 'judge_error%') AS n_judge_error,
       list_sort(list_distinct(list(prompt_hash))) AS prompt_hashes,
       count(*) FILTER (WHERE prompt_set LIKE 'original:%' AND error IS DISTINCT FROM 'answer_error'
                          AND original_score IS DISTINCT FROM shaberi_score) AS n_readings_differ
FROM (SELECT *, pooled_judge(judge) AS pooled FROM scores_using(NULL) WHERE strategy = '')
GROUP BY GROUPING SETS ((run_id, judge, benchmark), (run_id, pooled, benchmark));
