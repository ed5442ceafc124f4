-- run_scores: per run and judge (judge = '*': all judges pooled), the overall score = the unweighted
-- mean of the benchmark scores that count in the overall (the four core benchmarks). A benchmark with
-- no score is left out of the mean, not counted as 0; `complete` says whether all of them were there;
-- scale_low and scale_high bound the overall (the mean of its benchmarks' bounds on the 0–10 scale).
-- Means are score_mean, as in score_means.
CREATE OR REPLACE VIEW run_scores AS
SELECT s.model, s.tag, s.base_tag, s.run_index, s.run_id, s.judge,
       score_mean(s.score) AS overall,
       score_mean(s.baseline_score) AS baseline_overall,
       count(s.score) AS benchmarks_scored,
       avg(b.scale_min * b.to_ten) FILTER (WHERE s.score IS NOT NULL) AS scale_low,  -- the overall's own scale
       avg(b.scale_max * b.to_ten) FILTER (WHERE s.score IS NOT NULL) AS scale_high,
       count(s.score) = (SELECT count(*) FROM benchmark_info WHERE in_overall) AS complete
FROM benchmark_scores s JOIN benchmark_info b USING (benchmark)
WHERE b.in_overall
GROUP BY ALL;
