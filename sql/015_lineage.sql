-- The lineage rule (shaberi/lineage.py), written once; every view, report and export reads judgements
-- through it.
-- judgement_history: every stored judgement with its lineage:
--   stale       the answer was regenerated since: the text this judgement judged is no longer the answer
--               (checked only where both sides carry a hash: legacy imports and older parts are taken as
--               they are)
--   current     the latest judgement of the answer's text by this judge: the one that counts; a call that
--               failed (judge_error) returned no judgement, so it supersedes none that did (a --rejudge whose
--               calls fail leaves the scores as they were; the failures stay as history)
--   superseded  the same judge judged the same text again later (a newer judging prompt, or a re-run)
CREATE OR REPLACE VIEW judgement_history AS
WITH checked AS (
    SELECT j.*, a.answer_hash AS current_answer_hash,
           coalesce(j.answer_hash <> a.answer_hash, false) AS stale
    FROM judgement_rows j
    LEFT JOIN answers a USING ({key:answers})
), ranked AS (
    SELECT *, row_number() OVER (
        PARTITION BY {key:answers}, judge, stale
        ORDER BY coalesce(error LIKE 'judge_error%', false), created_at DESC, prompt_hash DESC NULLS LAST) AS newest
    FROM checked
)
SELECT * EXCLUDE (stale, newest),
       CASE WHEN stale THEN 'stale' WHEN newest = 1 THEN 'current' ELSE 'superseded' END AS lineage
FROM ranked;

-- judgements: the ones that count, one per answer and judge.
CREATE OR REPLACE VIEW judgements AS
SELECT * EXCLUDE (lineage, current_answer_hash) FROM judgement_history WHERE lineage = 'current';
