-- multi_run_stats: across the runs of a family ({tag}-run1 … {tag}-runN), per model, judge and benchmark
-- (and 'overall'): mean, sample sd, the 95 % margin from the t distribution (scipy's quantile via
-- t_quantile), the interval, min, max, the number of runs and the values in run order; baseline_mean,
-- baseline_sd and baseline_values are the same without pass deltas. Only complete runs count (run_completeness; a run with no
-- question to do is complete: a member that ran fewer
-- benchmarks or questions, or was not judged by this judge, would mix a different average in);
-- excluded_runs lists the others by tag. Means are score_mean, as in score_means; sd and margin are rounded
-- (score_round).
-- The interval is run-to-run only (runs − 1 degrees of freedom: with 3 runs, 2), and clipped to the scale
-- (ELYZA's 2–10 on the 0–10 scale; the overall's, the mean of its benchmarks'): ci_clipped says it was.
CREATE OR REPLACE VIEW multi_run_stats AS
WITH counted AS (
    SELECT s.* FROM benchmark_scores s LEFT JOIN run_completeness c USING (run_id, judge)
    WHERE coalesce(c.complete, true) AND s.tag <> s.base_tag
), per_run AS (
    SELECT s.base_tag, s.model, s.judge, s.benchmark, s.title, s.position, s.run_index, s.score, s.baseline_score,
           b.scale_min * b.to_ten AS low, b.scale_max * b.to_ten AS high
    FROM counted s JOIN benchmark_info b USING (benchmark) WHERE s.score IS NOT NULL
    UNION ALL
    SELECT r.base_tag, r.model, r.judge, 'overall', 'Overall', 1000, r.run_index, r.overall, r.baseline_overall,
           r.scale_low, r.scale_high
    FROM run_scores r LEFT JOIN run_completeness c USING (run_id, judge)
    WHERE coalesce(c.complete, true) AND r.tag <> r.base_tag AND r.overall IS NOT NULL
), summary AS (
    SELECT base_tag, model, judge, benchmark, title, position,
           count(*) AS runs, score_mean(score) AS mean, score_round(stddev_samp(score)) AS sd,
           t_quantile(0.975, count(*) - 1) * stddev_samp(score) / sqrt(count(*)) AS margin,
           min(score) AS min, max(score) AS max, list(score ORDER BY run_index) AS "values",
           score_mean(baseline_score) AS baseline_mean, score_round(stddev_samp(baseline_score)) AS baseline_sd,
           list(baseline_score ORDER BY run_index) AS baseline_values, min(low) AS low, max(high) AS high
    FROM per_run GROUP BY ALL
), excluded AS (
    SELECT r.model, r.base_tag, c.judge, list(r.tag ORDER BY r.run_index) AS excluded_runs
    FROM run_completeness c JOIN runs r USING (run_id)
    WHERE NOT c.complete AND r.tag <> r.base_tag
    GROUP BY ALL
)
SELECT s.* EXCLUDE (low, high) REPLACE (score_round(s.margin) AS margin),  -- rounded as sd is: a sum of doubles
       -- in the order a parallel plan gives ends in other last bits each time
       -- greatest and least skip a NULL: one run has no interval, not the whole scale
       CASE WHEN s.margin IS NOT NULL THEN score_round(greatest(s.mean - s.margin, s.low)) END AS ci_low,
       CASE WHEN s.margin IS NOT NULL THEN score_round(least(s.mean + s.margin, s.high)) END AS ci_high,
       coalesce(s.mean - s.margin < s.low OR s.mean + s.margin > s.high, false) AS ci_clipped,
       coalesce(e.excluded_runs, []) AS excluded_runs
FROM summary s LEFT JOIN excluded e USING (model, base_tag, judge);
