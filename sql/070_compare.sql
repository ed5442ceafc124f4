-- The pairing rule of `shaberi compare` (shaberi/reports/compare.py), written once: the command, its CSV and JSON,
-- the API's r.compare and the HTML report's movers (texts_differ) read it through these macros.
-- side_runs(runs_a, runs_b): each side's runs (run_id, is_a) from two lists of run ids; a run on both sides (a tag and its
-- own family) is counted on both.
CREATE OR REPLACE MACRO side_runs(runs_a, runs_b) AS TABLE
SELECT unnest(runs_a) AS run_id, true AS is_a UNION ALL SELECT unnest(runs_b), false;

-- texts_differ(runs_a, runs_b): the (benchmark, question_id) pairs asked with more than one text, on one side or across
-- both (another data file gives ELYZA's row numbers to other tasks): not one question, never paired. Texts are
-- compared with their whitespace runs as one space (CRLF files, trailing blanks); a run without the question's
-- text (no questions row) is not held against it.
CREATE OR REPLACE MACRO texts_differ(runs_a, runs_b) AS TABLE
SELECT benchmark, question_id FROM questions JOIN side_runs(runs_a, runs_b) USING (run_id)
GROUP BY benchmark, question_id
HAVING count(DISTINCT md5(trim(regexp_replace(array_to_string(turns, chr(10)), '\s+', ' ', 'g')))) > 1;

-- paired_questions(runs_a, runs_b, use_passes, judgement_keys, judge_a, judge_b): every question either side answered or judged (raw answers,
-- sample 0), with both sides' scores when it pairs and each side's reason when it does not.
--   runs_a, runs_b  the sides' run ids
--   use_passes  the passes applied ('name@version', scores_using: those both sides ran)
--   judgement_keys  the judgements compared: judge, benchmark and prompt hash joined by chr(31) (those both sides have)
--   judge_a, judge_b  NULL, or side A's judge and side B's (compare --judge-a / --judge-b): paired as one judge
-- Per side, question and judge the score is the mean over the side's runs; a question pairs on the judges that
-- scored it on both sides (score_a, score_b: the mean over those judges; judges: how many), so one side is never
-- one judge's score against the other's mean of two. one_sided counts a paired question's judge scores with no
-- counterpart on the other side. dropped_a / dropped_b: why a side has no score (NULL: it has one; the other
-- side's reason says why the question did not pair): other question text, no answer, answer error, not judged,
-- null score, no judge in common. Questions in excluded_questions are left out.
CREATE OR REPLACE MACRO paired_questions(runs_a, runs_b, use_passes, judgement_keys, judge_a, judge_b) AS TABLE
WITH side AS (SELECT * FROM side_runs(runs_a, runs_b)),
q AS (  -- every question either side answered or judged
    SELECT DISTINCT benchmark, question_id FROM answers JOIN side USING (run_id)
    WHERE strategy = '' AND sample_index = 0
    UNION SELECT DISTINCT benchmark, question_id FROM judgement_rows JOIN side USING (run_id)
    WHERE strategy = '' AND sample_index = 0
), sides AS (SELECT unnest([true, false]) AS is_a),
other AS (SELECT * FROM texts_differ(runs_a, runs_b)),
ans AS (
    SELECT benchmark, question_id, is_a, bool_and(error IS NOT NULL) AS failed
    FROM answers JOIN side USING (run_id) WHERE strategy = '' AND sample_index = 0 GROUP BY ALL
), s AS (  -- per side, question and judge: the mean over the side's runs (NULL: no score)
    SELECT benchmark, question_id, is_a, CASE WHEN judge_a IS NULL THEN judge ELSE '' END AS judge,
           avg(CASE WHEN isfinite(score_10) THEN score_10 END) AS score  -- a NaN or inf: no score
    FROM scores_using(use_passes) JOIN side USING (run_id)
    WHERE strategy = '' AND sample_index = 0
      AND list_contains(judgement_keys, judge || chr(31) || benchmark || chr(31) || coalesce(prompt_hash, ''))
      AND (judge_a IS NULL OR judge = CASE WHEN is_a THEN judge_a ELSE judge_b END)
    GROUP BY ALL
), both_judged AS (  -- the judges that scored the question on both sides: the only ones compared
    SELECT x.benchmark, x.question_id, x.judge, x.score AS score_a, y.score AS score_b
    FROM s x JOIN s y USING (benchmark, question_id, judge)
    WHERE x.is_a AND NOT y.is_a AND x.score IS NOT NULL AND y.score IS NOT NULL
), pq AS (
    SELECT benchmark, question_id, avg(score_a) AS score_a, avg(score_b) AS score_b, count(*) AS judges
    FROM both_judged ANTI JOIN other USING (benchmark, question_id)
    ANTI JOIN excluded_questions USING (benchmark, question_id)
    GROUP BY ALL
), side_state AS (
    SELECT benchmark, question_id, is_a, count(*) AS judged, count(score) AS scored FROM s GROUP BY ALL
), per AS (
    SELECT q.benchmark, q.question_id, sides.is_a,
           CASE WHEN o.question_id IS NOT NULL THEN 'other question text'
                WHEN p.question_id IS NOT NULL THEN NULL
                WHEN an.question_id IS NULL AND st.judged IS NULL THEN 'no answer'
                WHEN an.failed THEN 'answer error'
                WHEN st.judged IS NULL THEN 'not judged'
                WHEN st.scored = 0 THEN 'null score'
                WHEN other_side.scored > 0 THEN 'no judge in common'  -- both scored it, by other judges
                END AS dropped  -- NULL: this side has a score; the other side's reason says why
    FROM q CROSS JOIN sides
    LEFT JOIN ans an ON an.benchmark = q.benchmark AND an.question_id = q.question_id AND an.is_a = sides.is_a
    LEFT JOIN side_state st ON st.benchmark = q.benchmark AND st.question_id = q.question_id
                           AND st.is_a = sides.is_a
    LEFT JOIN side_state other_side ON other_side.benchmark = q.benchmark
                                   AND other_side.question_id = q.question_id AND other_side.is_a <> sides.is_a
    LEFT JOIN pq p ON p.benchmark = q.benchmark AND p.question_id = q.question_id
    LEFT JOIN other o ON o.benchmark = q.benchmark AND o.question_id = q.question_id
    ANTI JOIN excluded_questions x ON x.benchmark = q.benchmark AND x.question_id = q.question_id
), one_sided AS (  -- of the paired questions, the judge scores without a counterpart on the other side
    SELECT s.benchmark, s.question_id, count(*) AS n FROM s SEMI JOIN pq USING (benchmark, question_id)
    WHERE s.score IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM both_judged bj WHERE bj.benchmark = s.benchmark
                      AND bj.question_id = s.question_id AND bj.judge = s.judge)
    GROUP BY ALL
)
SELECT per.benchmark, per.question_id, p.score_a, p.score_b, p.judges,
       any_value(per.dropped) FILTER (WHERE per.is_a) AS dropped_a,
       any_value(per.dropped) FILTER (WHERE NOT per.is_a) AS dropped_b,
       coalesce(any_value(o.n), 0) AS one_sided
FROM per
LEFT JOIN pq p USING (benchmark, question_id)
LEFT JOIN one_sided o USING (benchmark, question_id)
GROUP BY per.benchmark, per.question_id, p.score_a, p.score_b, p.judges;
