-- pass_effects: every pass delta on the answer as it is now (a delta about an earlier text of the answer is
-- left out; legacy rows carry no hash and count), with the change on the 0–10 scale (delta × the benchmark's
-- to_ten), the benchmark's title and the answer's text. A delta of 0 records that the pass looked and found
-- nothing. The report's pass section reads it; pass_coverage says what was checked.
CREATE OR REPLACE VIEW pass_effects AS
SELECT d.run_id, d.benchmark, b.title, d.question_id, d.sample_index, d.strategy, d.judge, d.pass_name,
       d.pass_version, d.delta * b.to_ten AS delta, d.delta AS native_delta, d.reason, d.detail, a.content
FROM pass_deltas d JOIN benchmark_info b USING (benchmark)
JOIN answers a ON a.run_id = d.run_id AND a.benchmark = d.benchmark AND a.question_id = d.question_id
              AND a.sample_index = d.sample_index AND a.strategy = d.strategy
WHERE coalesce(d.answer_hash = a.answer_hash, true);
