-- category_scores: per model, base tag, judge pool (pooled_judge: '*' for Shaberi's prompts, '* [LABEL]' for
-- another prompt set, never mixed), benchmark and category (Tengu, MT-Bench and Rakuda carry categories; ELYZA
-- has none): the mean of the category's questions' scores (0–10, after the passes), over every run the
-- connection holds. The one rule: each question's score is first its mean over the judges and runs (and samples)
-- that scored it, then the category's score is the mean of those (score_mean), n the questions, question_scores
-- the values in question order (the report's t-interval is over them). Per question first, not pooled rows: when
-- judges (or runs) cover different questions, pooling weights a question by how many judges happened to score
-- it, so a second judge on half the questions would tilt the category towards that half; the category's score
-- estimates its questions' mean, each question counting once. (Where every judge scored every question once the
-- two agree.) Null scores are left out, never counted as 0; a question with none has no score and no n.
-- category_scores_of(of_runs, of_judges): the same for those runs (NULL: all) and those judges (NULL: every judge,
-- each prompt set its own pool); the report passes the runs it counts and the judges of its headline.
CREATE OR REPLACE MACRO category_scores_of(of_runs, of_judges) AS TABLE
WITH picked AS (
    SELECT run_id, model, base_tag FROM runs WHERE of_runs IS NULL OR list_contains(of_runs, run_id)
), q AS (  -- each question's score: the mean over judges, runs and samples
    SELECT p.model, p.base_tag, pooled_judge(s.judge) AS judge, s.benchmark, s.question_id, avg(s.score_10) AS score
    FROM scores s JOIN picked p USING (run_id)
    WHERE s.strategy = '' AND s.score_10 IS NOT NULL AND (of_judges IS NULL OR list_contains(of_judges, s.judge))
    GROUP BY ALL
), c AS (
    SELECT DISTINCT p.model, p.base_tag, q.benchmark, q.question_id, q.category
    FROM questions q JOIN picked p USING (run_id) WHERE q.category IS NOT NULL
)
SELECT q.model, q.base_tag, q.judge, b.benchmark, b.title, b.position, c.category,
       score_mean(q.score) AS score, count(*) AS n, list(q.score ORDER BY q.question_id) AS question_scores
FROM q JOIN c USING (model, base_tag, benchmark, question_id)
JOIN benchmark_info b USING (benchmark)
GROUP BY ALL;

CREATE OR REPLACE VIEW category_scores AS SELECT * FROM category_scores_of(NULL, NULL);
