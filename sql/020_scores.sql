-- scores: every judgement's score after the pass deltas, clamped to the benchmark's scale, with the
-- judge's original score kept beside it. A pass delta with judge = '' applies to every judge.
-- A null judge score stays null whatever the passes say (never 0).
CREATE OR REPLACE VIEW scores AS
WITH deltas AS (
    SELECT j.run_id, j.benchmark, j.question_id, j.sample_index, j.strategy, j.judge,
           sum(d.delta) AS pass_delta, list(d.pass_name ORDER BY d.pass_name) AS passes
    FROM judgements j
    JOIN pass_deltas d
      ON d.run_id = j.run_id AND d.benchmark = j.benchmark AND d.question_id = j.question_id
     AND d.sample_index = j.sample_index AND d.strategy = j.strategy AND (d.judge = j.judge OR d.judge = '')
    GROUP BY ALL
)
SELECT j.run_id, j.benchmark, j.question_id, j.sample_index, j.strategy, j.judge,
       j.score AS original_score,
       coalesce(d.pass_delta, 0) AS pass_delta,
       CASE WHEN j.score IS NOT NULL
            THEN least(greatest(j.score + coalesce(d.pass_delta, 0), b.scale_min), b.scale_max) END AS score,
       j.score * b.to_ten AS original_score_10,
       CASE WHEN j.score IS NOT NULL
            THEN least(greatest(j.score + coalesce(d.pass_delta, 0), b.scale_min), b.scale_max) * b.to_ten
       END AS score_10,
       b.scale_min, b.scale_max, j.parse_method, j.error, coalesce(d.passes, []) AS passes
FROM judgements j
JOIN benchmark_info b USING (benchmark)
LEFT JOIN deltas d USING (run_id, benchmark, question_id, sample_index, strategy, judge);
