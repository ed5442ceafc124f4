-- scores: every current judgement's score after the pass deltas, clamped to the benchmark's scale, with the
-- judge's original score kept beside it. Without a delta the judge's score is used as it is (a legacy score
-- outside the scale is imported null, with its reason: legacy.py; leaderboard --as-published counts it).
-- A pass delta with judge = '' applies to every judge, and only to judgements of the text it checked
-- (answer_hash; legacy judgements have none); passes lists the passes that changed the score.
-- A null judge score stays null whatever the passes say (never 0). Questions in excluded_questions
-- (Tengu 61–65, present in legacy imports) are left out. prompt_hash says which judging prompt gave it, prompt_set
-- which prompt set (null: Shaberi's own); shaberi_score is Shaberi's reading of a reply the original's code read.
-- scores_using(['name@version', …]) applies only those passes (compare: the passes both sides ran);
-- scores_using(NULL) applies every pass, and is the scores view.
CREATE OR REPLACE MACRO scores_using(use_passes) AS TABLE
WITH deltas AS (
    SELECT j.run_id, j.benchmark, j.question_id, j.sample_index, j.strategy, j.judge,
           sum(d.delta) AS pass_delta, list(d.pass_name ORDER BY d.pass_name) AS passes
    FROM judgements j
    JOIN pass_deltas d
      ON d.run_id = j.run_id AND d.benchmark = j.benchmark AND d.question_id = j.question_id
     AND d.sample_index = j.sample_index AND d.strategy = j.strategy AND (d.judge = j.judge OR d.judge = '')
     AND (d.answer_hash = j.answer_hash OR d.answer_hash IS NULL OR j.answer_hash IS NULL)  -- the same text
    WHERE d.delta <> 0  -- a 0 row records that a pass looked and found nothing: it changes nothing
      AND (use_passes IS NULL OR list_contains(use_passes, d.pass_name || '@' || coalesce(d.pass_version, '')))
    GROUP BY ALL
)
SELECT j.run_id, j.benchmark, j.question_id, j.sample_index, j.strategy, j.judge,
       j.score AS original_score,
       coalesce(d.pass_delta, 0) AS pass_delta,
       CASE WHEN d.pass_delta IS NULL OR j.score IS NULL THEN j.score
            ELSE least(greatest(j.score + d.pass_delta, b.scale_min), b.scale_max) END AS score,
       j.score * b.to_ten AS original_score_10,
       CASE WHEN d.pass_delta IS NULL OR j.score IS NULL THEN j.score
            ELSE least(greatest(j.score + d.pass_delta, b.scale_min), b.scale_max) END * b.to_ten AS score_10,
       b.scale_min, b.scale_max, j.parse_method, j.error, coalesce(d.passes, []) AS passes,
       j.prompt_hash, j.answer_hash, j.prompt_set, j.shaberi_score
FROM judgements j
JOIN benchmark_info b USING (benchmark)
LEFT JOIN deltas d USING ({key:answers}, judge)
ANTI JOIN excluded_questions x ON x.benchmark = j.benchmark AND x.question_id = j.question_id;

-- scores: with the run's tag and model first, so that a first query can say WHERE tag = 'v1' (the views built on it
-- read scores_using(NULL), which needs no runs row).
CREATE OR REPLACE VIEW scores AS
SELECT r.tag, r.model, s.* FROM scores_using(NULL) s LEFT JOIN runs r USING (run_id);
