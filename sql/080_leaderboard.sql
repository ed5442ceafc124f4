-- leaderboard: one row per model, tag and judge (judge = '*': all judges pooled), the four core
-- benchmarks on the 0–10 scale and their overall, as in the original Shaberi's table.
CREATE OR REPLACE VIEW leaderboard AS
SELECT s.model, s.tag, s.judge,
       max(s.score) FILTER (WHERE s.benchmark = 'elyza') AS elyza,
       max(s.score) FILTER (WHERE s.benchmark = 'tengu') AS tengu,
       max(s.score) FILTER (WHERE s.benchmark = 'mt_bench') AS mt_bench,
       max(s.score) FILTER (WHERE s.benchmark = 'rakuda') AS rakuda,
       any_value(r.overall) AS overall, any_value(r.complete) AS complete
FROM benchmark_scores s
JOIN run_scores r USING (run_id, judge)
GROUP BY s.model, s.tag, s.judge;
