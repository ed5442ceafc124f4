-- shaberi run (shaberi/cli/run.py).

-- name: other_original_readings
-- after --reprocess with a clone of the original: the judgements of run $run read by another clone ($label's are
-- this one's), left as they are
SELECT prompt_set, count(*) FROM judgements
WHERE run_id = $run AND prompt_set LIKE 'original:%' AND prompt_set IS DISTINCT FROM $label
GROUP BY 1 ORDER BY 1;
