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
