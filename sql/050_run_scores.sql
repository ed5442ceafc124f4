-- run_scores: per run and judge (judge = '*': all judges pooled), the overall score = the unweighted
-- mean of the benchmark scores that count in the overall (the four core benchmarks). A benchmark with
-- no score is left out of the mean, not counted as 0; `complete` says whether all of them were there.
-- Rounded by score_round, as score_means is.
CREATE OR REPLACE VIEW run_scores AS
SELECT s.model, s.tag, s.base_tag, s.run_index, s.run_id, s.judge,
       score_round(avg(s.score)) AS overall,
       score_round(avg(s.baseline_score)) AS baseline_overall,
       count(s.score) AS benchmarks_scored,
       count(s.score) = (SELECT count(*) FROM benchmark_info WHERE in_overall) AS complete
FROM benchmark_scores s JOIN benchmark_info b USING (benchmark)
WHERE b.in_overall
GROUP BY ALL;
