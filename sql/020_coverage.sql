-- What the scores rest on, and what they leave out.
-- run_judges: the judges of each run: those it names (runs.judges, 'MODEL@URL') and any with stored rows.
CREATE OR REPLACE VIEW run_judges AS
SELECT run_id, split_part(judge, '@', 1) AS judge FROM (SELECT run_id, unnest(judges) AS judge FROM runs)
UNION
SELECT DISTINCT run_id, judge FROM raw_judgements WHERE strategy = '';  -- every version names its judge

-- answer_coverage: run × benchmark (chat benchmarks, raw answers): questions, answers stored, answer errors,
-- and questions with no answer at all.
CREATE OR REPLACE VIEW answer_coverage AS
WITH q AS (
    SELECT q.run_id, q.benchmark, q.question_id FROM questions q JOIN benchmark_info USING (benchmark)
    ANTI JOIN excluded_questions x ON x.benchmark = q.benchmark AND x.question_id = q.question_id
), a AS (
    SELECT run_id, benchmark, question_id, count(*) AS answers, count(error) AS errors
    FROM answers WHERE strategy = '' GROUP BY ALL
)
SELECT q.run_id, q.benchmark, count(*) AS questions, coalesce(sum(a.answers), 0)::BIGINT AS answers,
       coalesce(sum(a.errors), 0)::BIGINT AS answer_errors, count(*) - count(a.question_id) AS missing
FROM q LEFT JOIN a USING (run_id, benchmark, question_id)
GROUP BY ALL;

-- judge_coverage: run × judge × benchmark: of the run's answers (answer_errors of them failed), how many
-- this judge's current judgements cover (judged: answer errors included, each with its row), how many of
-- those hold a score (scored: a reply read, after the fallback), how many only have a failed judge call, and
-- how many are not judged at all — stale: judged only as an earlier text.
CREATE OR REPLACE VIEW judge_coverage AS
WITH a AS (
    SELECT a.run_id, a.benchmark, a.question_id, a.sample_index, a.error FROM answers a JOIN benchmark_info USING (benchmark)
    ANTI JOIN excluded_questions x ON x.benchmark = a.benchmark AND x.question_id = a.question_id
    WHERE a.strategy = ''
), h AS (
    SELECT run_id, benchmark, question_id, sample_index, judge,
           bool_or(lineage = 'current' AND coalesce(error NOT LIKE 'judge_error%', true)) AS judged,
           bool_or(lineage = 'current' AND error LIKE 'judge_error%') AS failed,
           bool_or(lineage = 'current' AND score IS NOT NULL) AS scored,
           bool_or(lineage = 'stale') AS stale
    FROM judgement_history WHERE strategy = '' GROUP BY ALL
)
SELECT a.run_id, j.judge, a.benchmark, count(*) AS answers, count(a.error) AS answer_errors,
       count(*) FILTER (WHERE h.judged) AS judged,
       count(*) FILTER (WHERE h.scored) AS scored,
       count(*) FILTER (WHERE h.failed AND NOT h.judged) AS judge_failed,
       count(*) FILTER (WHERE NOT coalesce(h.judged OR h.failed, false)) AS not_judged,
       count(*) FILTER (WHERE NOT coalesce(h.judged OR h.failed, false) AND h.stale) AS stale
FROM a JOIN run_judges j USING (run_id)
LEFT JOIN h ON h.run_id = a.run_id AND h.benchmark = a.benchmark AND h.question_id = a.question_id
           AND h.sample_index = a.sample_index AND h.judge = j.judge
GROUP BY ALL;

-- pass_coverage: run × pass × benchmark: of the run's answers, how many the pass checked as they are now
-- (its row's answer_hash is the answer's), and how many only as an earlier text (stale). A row whose model
-- (detail.detector) could not be asked (model_failed), or gave no verdict the pass could read (unreadable), is
-- no check: the next run asks again.
CREATE OR REPLACE VIEW pass_coverage AS
WITH p AS (
    SELECT run_id, benchmark, question_id, sample_index, pass_name, answer_hash,
           CASE WHEN json_extract(detail, '$.detector') IS NULL THEN 'checked'
                WHEN json_extract(detail, '$.detector.error') IS NOT NULL THEN 'model_failed'
                WHEN json_extract_string(detail, '$.detector.verdict') IS NULL THEN 'unreadable'
                ELSE 'checked' END AS outcome
    FROM pass_deltas WHERE strategy = ''
)
SELECT a.run_id, n.pass_name, a.benchmark, count(DISTINCT a.question_id || '/' || a.sample_index) AS answers,
       count(DISTINCT a.question_id || '/' || a.sample_index) FILTER (
           WHERE p.outcome = 'checked' AND coalesce(p.answer_hash = a.answer_hash, true)) AS checked,
       count(DISTINCT a.question_id || '/' || a.sample_index) FILTER (WHERE p.answer_hash <> a.answer_hash) AS stale,
       count(DISTINCT a.question_id || '/' || a.sample_index) FILTER (
           WHERE p.outcome = 'model_failed' AND coalesce(p.answer_hash = a.answer_hash, true)) AS model_failed,
       count(DISTINCT a.question_id || '/' || a.sample_index) FILTER (
           WHERE p.outcome = 'unreadable' AND coalesce(p.answer_hash = a.answer_hash, true)) AS unreadable
FROM answers a
JOIN benchmark_info USING (benchmark)
JOIN (SELECT DISTINCT run_id, pass_name FROM pass_deltas) n USING (run_id)
LEFT JOIN p ON p.run_id = a.run_id AND p.benchmark = a.benchmark AND p.question_id = a.question_id
           AND p.sample_index = a.sample_index AND p.pass_name = n.pass_name
WHERE a.strategy = ''
GROUP BY ALL;

-- stage_status: per run, benchmark (those with questions) and stage, the status the rules of 005_status.sql give
-- its counts: generate (one row), judge (one row per judge: judging_status) and passes (one per pass:
-- pass_status), with the most common error of the benchmark's answers (generate) or of the judge's judgements (a
-- failed call, or a reply with no score in it after the fallback) and how often it occurred.
CREATE OR REPLACE VIEW stage_status AS
WITH answer_error AS (
    SELECT run_id, benchmark, error_type || ': ' || left(min(error), 120) AS error, count(*) AS error_count
    FROM answers WHERE error IS NOT NULL AND strategy = '' GROUP BY run_id, benchmark, error_type
    QUALIFY row_number() OVER (PARTITION BY run_id, benchmark ORDER BY count(*) DESC, error_type) = 1
), judge_error AS (
    SELECT run_id, benchmark, judge, left(error, 160) AS error, count(*) AS error_count
    FROM judgements WHERE error <> 'answer_error' AND strategy = '' GROUP BY run_id, benchmark, judge, error
    QUALIFY row_number() OVER (PARTITION BY run_id, benchmark, judge ORDER BY count(*) DESC, error) = 1
)
SELECT c.run_id, c.benchmark, 'generate' AS stage, NULL::VARCHAR AS name,
       generation_status(c.questions, c.answers, c.answer_errors, c.missing) AS status,
       c.questions, c.answers, c.answer_errors, c.missing, NULL::BIGINT AS judged, NULL::BIGINT AS scored,
       NULL::BIGINT AS judge_failed, NULL::BIGINT AS not_judged, NULL::BIGINT AS checked,
       NULL::BIGINT AS not_checked, NULL::BIGINT AS stale, e.error, e.error_count
FROM answer_coverage c LEFT JOIN answer_error e USING (run_id, benchmark)
UNION ALL
SELECT c.run_id, c.benchmark, 'judge', c.judge,
       judging_status(c.answers, c.judged, c.judge_failed, c.not_judged, c.answer_errors, c.scored),
       NULL, c.answers, c.answer_errors, NULL, c.judged, c.scored, c.judge_failed, c.not_judged, NULL, NULL, c.stale,
       e.error, e.error_count
FROM judge_coverage c LEFT JOIN judge_error e USING (run_id, benchmark, judge)
SEMI JOIN answer_coverage a USING (run_id, benchmark)
UNION ALL
SELECT c.run_id, c.benchmark, 'passes', c.pass_name, pass_status(c.answers, c.checked),
       NULL, c.answers, NULL, NULL, NULL, NULL, NULL, NULL, c.checked, c.answers - c.checked, c.stale, NULL, NULL
FROM pass_coverage c SEMI JOIN answer_coverage a USING (run_id, benchmark);

-- run_status: per run and benchmark, each stage's status over its judges or passes (combined_status: one judge
-- that failed beside one that scored makes the judging partial; 'not run' when it has none) and the benchmark's
-- (benchmark_status: the worst of its stages; scores without a pass's deltas are still scores: a failed pass
-- makes it partial);
-- with benchmark NULL, the run itself: its status as readers show it (runs.status: interrupted when no process
-- is writing a run that says running, as shown_status has it), the status its benchmarks give a finished run
-- (finished_status: what the run records when it ends) and each stage over its benchmarks.
CREATE OR REPLACE VIEW run_status AS
WITH benchmarks AS (
    SELECT run_id, benchmark,
           benchmark_status(any_value(status) FILTER (WHERE stage = 'generate'),
                            list(status ORDER BY name) FILTER (WHERE stage = 'judge'),
                            list(status ORDER BY name) FILTER (WHERE stage = 'passes')) AS status,
           any_value(status) FILTER (WHERE stage = 'generate') AS generate,
           coalesce(combined_status(list(status ORDER BY name) FILTER (WHERE stage = 'judge')), 'not run') AS judge,
           coalesce(combined_status(list(status ORDER BY name) FILTER (WHERE stage = 'passes')), 'not run') AS passes
    FROM stage_status GROUP BY run_id, benchmark
)
SELECT run_id, benchmark, status, NULL::VARCHAR AS finished_status, generate, judge, passes FROM benchmarks
UNION ALL
SELECT r.run_id, NULL, r.status,
       finished_status(coalesce(list(b.status ORDER BY b.benchmark) FILTER (WHERE b.benchmark IS NOT NULL), [])),
       combined_status(coalesce(list(b.generate ORDER BY b.benchmark) FILTER (WHERE b.benchmark IS NOT NULL), [])),
       combined_status(coalesce(list(b.judge ORDER BY b.benchmark) FILTER (WHERE b.benchmark IS NOT NULL), [])),
       combined_status(coalesce(list(b.passes ORDER BY b.benchmark) FILTER (WHERE b.benchmark IS NOT NULL), []))
FROM runs r LEFT JOIN benchmarks b USING (run_id)
GROUP BY r.run_id, r.status;
