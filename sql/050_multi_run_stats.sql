-- multi_run_stats: across the runs of a base tag ({tag}-run1 … {tag}-runN), per model, judge and
-- benchmark (and 'overall'): mean, sample sd, the 95 % margin from the t distribution (scipy's
-- quantile via t_quantile), the interval, min, max, the number of runs and the values in run order;
-- baseline_mean is the mean without pass deltas.
CREATE OR REPLACE VIEW multi_run_stats AS
WITH per_run AS (
    SELECT base_tag, model, judge, benchmark, title, position, run_index, score, baseline_score
    FROM benchmark_scores WHERE score IS NOT NULL
    UNION ALL
    SELECT base_tag, model, judge, 'overall', 'Overall', 1000, run_index, overall, baseline_overall
    FROM run_scores WHERE overall IS NOT NULL
), summary AS (
    SELECT base_tag, model, judge, benchmark, title, position,
           count(*) AS runs, avg(score) AS mean, stddev_samp(score) AS sd,
           t_quantile(0.975, count(*) - 1) * stddev_samp(score) / sqrt(count(*)) AS margin,
           min(score) AS min, max(score) AS max, list(score ORDER BY run_index) AS "values",
           avg(baseline_score) AS baseline_mean
    FROM per_run GROUP BY ALL
)
SELECT *, mean - margin AS ci_low, mean + margin AS ci_high FROM summary;
