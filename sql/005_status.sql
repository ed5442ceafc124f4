-- shown_status(stored, alive, waiting): a run's (or a stage's) status as every reader shows it, from the status
-- its row holds, whether its writer is alive (run_writers; NULL: cannot be told) and whether it submitted provider
-- batches it has not collected (waiting; NULL: none known). The one place this rule lives: the runs view,
-- find_runs, the manifest and the API all read it here.
--   running with no live writer: interrupted (killed, or the machine died; resumable)
--   interrupted, or running with no live writer, with batches under way: waiting (they run on at the provider;
--   the same command collects them)
--   complete, error: the words of older rows for ok, failed
CREATE OR REPLACE MACRO shown_status(stored, alive, waiting) AS
    CASE coalesce(stored, 'ok')
        WHEN 'running' THEN CASE WHEN alive = false THEN CASE WHEN waiting THEN 'waiting' ELSE 'interrupted' END
                                 ELSE 'running' END
        WHEN 'interrupted' THEN CASE WHEN waiting THEN 'waiting' ELSE 'interrupted' END
        WHEN 'complete' THEN 'ok'
        WHEN 'error' THEN 'failed'
        ELSE coalesce(stored, 'ok') END;

-- pooled_judge(judge): the pooled row a judge's scores go into: '*' for judges under Shaberi's own prompts,
-- '* [LABEL]' for those under another prompt set ('gpt-4.1 [original:8578939]' pools into '* [original:8578939]':
-- shaberi/judging/promptsets.py), so that pooling never mixes prompt sets. is_pooled(judge): a pooled row.
CREATE OR REPLACE MACRO pooled_judge(judge) AS
    CASE WHEN regexp_matches(judge, ' \[[^\]]+\]$') THEN '* ' || regexp_extract(judge, '\[[^\]]+\]$') ELSE '*' END;
CREATE OR REPLACE MACRO is_pooled(judge) AS starts_with(judge, '*');

-- imported(generation_config): a run imported from legacy files (shaberi/legacy.py stores no generation config):
-- the one place this rule lives (the leaderboard labels such runs' prompt set unknown, and so does the export).
CREATE OR REPLACE MACRO imported(generation_config) AS generation_config = '{}';

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
--   benchmark_status    a benchmark from its stages' (judges and passes: the statuses of each, NULL or [] for none):
--                       the worst of its answers' and its judging's (combined over its judges); scores without a
--                       pass's deltas are still scores, so a failed pass (combined over its passes) makes it partial
CREATE OR REPLACE MACRO status_word(s) AS CASE s WHEN 'complete' THEN 'ok' WHEN 'error' THEN 'failed' ELSE s END;
CREATE OR REPLACE MACRO status_rank(s) AS
    coalesce(list_position(['ok', 'not run', 'partial', 'running', 'waiting', 'interrupted', 'failed'], s), 1) - 1;
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
-- (A rule's list is bound once: list_transform([x], lambda v: …)[1] names x as v, so a macro used inside another
-- does not repeat its argument's expression at every use; the views stay cheap to bind.)
CREATE OR REPLACE MACRO known_statuses(statuses) AS
    list_transform(list_filter(statuses, lambda s: coalesce(s, '') <> ''), lambda s: status_word(s));
CREATE OR REPLACE MACRO worst_status(statuses) AS
    list_reduce(list_transform(known_statuses(statuses), lambda s: {'r': status_rank(s)::BIGINT, 's': s}),
                lambda a, b: CASE WHEN b.r > a.r THEN b ELSE a END, {'r': -1::BIGINT, 's': 'ok'}).s;
CREATE OR REPLACE MACRO combined_status(statuses) AS
    list_transform([list_filter(known_statuses(statuses), lambda s: s <> 'not run')], lambda ran:
        CASE WHEN len(ran) = 0 THEN CASE WHEN len(statuses) > 0 THEN 'not run' ELSE 'ok' END
             WHEN list_bool_and(list_transform(ran, lambda s: s = 'failed')) THEN 'failed'
             ELSE worst_status(list_filter(ran, lambda s: s <> 'failed')
                               || CASE WHEN list_contains(ran, 'failed') THEN ['partial'] ELSE []::VARCHAR[] END)
        END)[1];
CREATE OR REPLACE MACRO finished_status(statuses) AS
    list_transform([combined_status(statuses)], lambda c:
        CASE WHEN c = 'not run' OR (c = 'ok' AND list_contains(statuses, 'not run')) THEN 'partial' ELSE c END)[1];
CREATE OR REPLACE MACRO benchmark_status(generate, judges, passes) AS
    worst_status([generate]
                 || CASE WHEN len(coalesce(judges, [])) > 0 THEN [combined_status(judges)] ELSE [] END
                 || list_transform([combined_status(coalesce(passes, []))], lambda p:
                        CASE WHEN len(coalesce(passes, [])) = 0 THEN []::VARCHAR[] WHEN p = 'failed' THEN ['partial']
                             ELSE [p] END)[1]);
