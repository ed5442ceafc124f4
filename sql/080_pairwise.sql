-- Head-to-head judging (shaberi pairwise; shaberi/pairwise/): its lineage and how the two orders of a pair combine,
-- written once; the command, the report and the API read them here.

-- Every stored pairwise judgement version (one per question, ordered pair, judge, prompt and judged texts).
CREATE OR REPLACE VIEW pairwise_rows AS
SELECT * EXCLUDE (_file) FROM raw_pairwise
QUALIFY {latest:pairwise};

-- pairwise_history: every pairwise judgement with its lineage, the rule of 015_lineage.sql:
--   stale       either run's answer was regenerated since (checked where both sides carry a hash)
--   current     the latest judgement of these two texts in this order by this judge: the one that counts; a failed
--               call (judge_error) supersedes none that returned a reply
--   superseded  the same judge compared the same texts in the same order again later (a newer pairwise prompt)
-- A run compares by its first sample's raw answer (sample_index 0, no strategy).
CREATE OR REPLACE VIEW pairwise_history AS
WITH checked AS (
    SELECT p.*, coalesce(p.answer_hash_a <> a.answer_hash, false) OR coalesce(p.answer_hash_b <> b.answer_hash, false)
               AS stale
    FROM pairwise_rows p
    LEFT JOIN answers a ON a.run_id = p.run_a AND a.benchmark = p.benchmark AND a.question_id = p.question_id
                           AND a.sample_index = 0 AND a.strategy = ''
    LEFT JOIN answers b ON b.run_id = p.run_b AND b.benchmark = p.benchmark AND b.question_id = p.question_id
                           AND b.sample_index = 0 AND b.strategy = ''
), ranked AS (
    SELECT *, row_number() OVER (
        PARTITION BY benchmark, question_id, run_a, run_b, judge, stale
        ORDER BY coalesce(error LIKE 'judge_error%', false), created_at DESC, prompt_hash DESC) AS newest
    FROM checked
)
SELECT * EXCLUDE (stale, newest),
       CASE WHEN stale THEN 'stale' WHEN newest = 1 THEN 'current' ELSE 'superseded' END AS lineage
FROM ranked;

-- pairwise: the judgements that count, one per question, ordered pair and judge.
CREATE OR REPLACE VIEW pairwise AS
SELECT * EXCLUDE (lineage) FROM pairwise_history WHERE lineage = 'current';

-- pairwise_outcomes: one per question, judge and pair of runs (first: the smaller run id), both orders combined.
-- outcome: 1 the first run won, 0 the second, 0.5 a tie: the judge said TIE, or the two orders disagree (each
-- order's verdict counted from the first run's side: a disagreement is position bias, not a preference). Null
-- until both orders hold a verdict (a call failed, or no verdict was read: never read as a tie).
CREATE OR REPLACE VIEW pairwise_outcomes AS
WITH sides AS (
    SELECT benchmark, question_id, judge, least(run_a, run_b) AS first, greatest(run_a, run_b) AS second,
           run_a < run_b AS first_shown_first, verdict,
           CASE WHEN verdict = 'TIE' THEN 0.5
                WHEN verdict IS NULL THEN NULL
                WHEN (verdict = 'A') = (run_a < run_b) THEN 1.0 ELSE 0.0 END AS first_score
    FROM pairwise WHERE run_a <> run_b
)
SELECT benchmark, question_id, judge, first, second,
       count(first_score) AS orders,
       max(first_score) FILTER (WHERE first_shown_first) AS first_shown_first,
       max(first_score) FILTER (WHERE NOT first_shown_first) AS first_shown_second,
       CASE WHEN count(first_score) FILTER (WHERE first_shown_first) = 0
                 OR count(first_score) FILTER (WHERE NOT first_shown_first) = 0 THEN NULL
            WHEN max(first_score) = min(first_score) THEN max(first_score)
            ELSE 0.5 END AS outcome,
       max(first_score) <> min(first_score) AS orders_disagree
FROM sides
GROUP BY ALL;

-- pairwise_position: per judge, benchmark and ordered pair, where its verdicts went: the answer shown first (A), second
-- (B), or a tie. Without position bias A and B are even; the share and its interval are shaberi.pairwise.bias's.
CREATE OR REPLACE VIEW pairwise_position AS
SELECT judge, benchmark, run_a, run_b, count(*) AS verdicts, count(*) FILTER (WHERE verdict = 'A') AS first_wins,
       count(*) FILTER (WHERE verdict = 'B') AS second_wins, count(*) FILTER (WHERE verdict = 'TIE') AS ties
FROM pairwise WHERE verdict IS NOT NULL
GROUP BY ALL;

-- pairwise_ratings: the latest fit of each pairwise job, judge and benchmark ('*': all together), one row per run rated.
CREATE OR REPLACE VIEW pairwise_ratings AS
SELECT * EXCLUDE (_file) FROM raw_pairwise_ratings
QUALIFY created_at = max(created_at) OVER (PARTITION BY run_id, judge, benchmark) AND {latest:pairwise_ratings};
