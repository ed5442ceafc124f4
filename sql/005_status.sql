-- shown_status(stored, alive): a run's (or a stage's) status as every reader shows it, from the status its row
-- holds and whether its writer is alive (run_writers; NULL: cannot be told). The one place this rule lives:
-- the runs view, find_runs, the manifest and the API all read it here.
--   running with no live writer: interrupted (killed, or the machine died; resumable)
--   complete, error: the words of older rows for ok, failed
CREATE OR REPLACE MACRO shown_status(stored, alive) AS
    CASE coalesce(stored, 'ok')
        WHEN 'running' THEN CASE WHEN alive = false THEN 'interrupted' ELSE 'running' END
        WHEN 'complete' THEN 'ok'
        WHEN 'error' THEN 'failed'
        ELSE coalesce(stored, 'ok') END;

-- pooled_judge(judge): the pooled row a judge's scores go into: '*' for judges under Shaberi's own prompts,
-- '* [LABEL]' for those under another prompt set ('gpt-4.1 [original:8578939]' pools into '* [original:8578939]':
-- shaberi/promptsets.py), so that pooling never mixes prompt sets. is_pooled(judge): a pooled row.
CREATE OR REPLACE MACRO pooled_judge(judge) AS
    CASE WHEN regexp_matches(judge, ' \[[^\]]+\]$') THEN '* ' || regexp_extract(judge, '\[[^\]]+\]$') ELSE '*' END;
CREATE OR REPLACE MACRO is_pooled(judge) AS starts_with(judge, '*');

-- The status rules (shaberi/status.py reads them here: the one place they live). A status is one of, better to
-- worse: ok, not run, partial, running, interrupted, failed (status_rank; complete and error are older rows'
-- ok and failed: status_word).
--   generation_status   a benchmark's answers: not run (nothing asked or stored), ok (every question answered
--                       without error), failed (no usable answer), else partial
--   judging_status      one judge on one benchmark (scored NULL: as many as judged): not run (nothing to judge, or
--                       never judged), failed (no judgement holds a score: every call failed, or no reply could be
--                       read), ok (nothing failed or left unjudged), else partial
--   pass_status         one pass on one benchmark: ok (every answer checked), failed (none), else partial
--   worst_status        the worst of several ('ok' for none): a whole is as good as its worst part
--   combined_status     parts done side by side (a stage over benchmarks, a benchmark's judging over its judges):
--                       a part that never ran does not count; failed only when every part that ran failed, a failed
--                       part beside usable ones makes the whole partial
--   finished_status     a finished run from its benchmarks': combined, and something never done makes it partial
CREATE OR REPLACE MACRO status_word(s) AS CASE s WHEN 'complete' THEN 'ok' WHEN 'error' THEN 'failed' ELSE s END;
CREATE OR REPLACE MACRO status_rank(s) AS
    coalesce(list_position(['ok', 'not run', 'partial', 'running', 'interrupted', 'failed'], s), 1) - 1;
CREATE OR REPLACE MACRO generation_status(questions, answers, errors, missing) AS
    CASE WHEN questions = 0 OR answers = 0 THEN 'not run'
         WHEN missing = 0 AND errors = 0 THEN 'ok'
         WHEN answers - errors <= 0 THEN 'failed'
         ELSE 'partial' END;
CREATE OR REPLACE MACRO judging_status(answers, judged, failed, not_judged, answer_errors, scored) AS
    CASE WHEN answers = answer_errors OR (judged = 0 AND failed = 0) THEN 'not run'
         WHEN coalesce(scored, judged) = 0 THEN 'failed'
         WHEN failed = 0 AND not_judged = 0 THEN 'ok'
         ELSE 'partial' END;
CREATE OR REPLACE MACRO pass_status(answers, checked) AS
    CASE WHEN answers = 0 THEN 'not run' WHEN checked = answers THEN 'ok' WHEN checked = 0 THEN 'failed'
         ELSE 'partial' END;
CREATE OR REPLACE MACRO known_statuses(statuses) AS
    list_transform(list_filter(statuses, lambda s: coalesce(s, '') <> ''), lambda s: status_word(s));
CREATE OR REPLACE MACRO worst_status(statuses) AS
    coalesce(known_statuses(statuses)[list_position(list_transform(known_statuses(statuses), lambda s: status_rank(s)),
                                                    list_max(list_transform(known_statuses(statuses),
                                                                            lambda s: status_rank(s))))], 'ok');
CREATE OR REPLACE MACRO ran_statuses(statuses) AS list_filter(known_statuses(statuses), lambda s: s <> 'not run');
CREATE OR REPLACE MACRO combined_status(statuses) AS
    CASE WHEN len(ran_statuses(statuses)) = 0 THEN CASE WHEN len(statuses) > 0 THEN 'not run' ELSE 'ok' END
         WHEN len(list_filter(ran_statuses(statuses), lambda s: s <> 'failed')) = 0 THEN 'failed'
         ELSE worst_status(list_filter(ran_statuses(statuses), lambda s: s <> 'failed')
                           || CASE WHEN list_contains(ran_statuses(statuses), 'failed') THEN ['partial']
                                   ELSE []::VARCHAR[] END) END;
CREATE OR REPLACE MACRO finished_status(statuses) AS
    CASE WHEN combined_status(statuses) = 'not run'
           OR (combined_status(statuses) = 'ok' AND list_contains(statuses, 'not run')) THEN 'partial'
         ELSE combined_status(statuses) END;
