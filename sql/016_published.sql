-- published_rows(mark): every judged row as the original tooling read it (leaderboard --as-published): a legacy
-- file's repeated rows included (superseded judgements of the same text), a set-aside legacy score as it counted
-- it (published: the number after `mark` in the row's error, shaberi/reports/leaderboard.py's AS_PUBLISHED_MARK,
-- which legacy.py writes), everything else as the lineage rule counts it. Raw answers only; Tengu 61–65 left out.
CREATE OR REPLACE MACRO published_rows(mark) AS TABLE
SELECT r.tag, r.model, h.judge, h.benchmark, h.score, h.error,
       CASE WHEN h.score IS NULL AND h.parse_method = 'legacy'
            THEN TRY_CAST(regexp_extract(h.error, mark || '(\S+)$', 1) AS DOUBLE)
            ELSE h.score END AS published
FROM judgement_history h JOIN runs r USING (run_id)
ANTI JOIN excluded_questions x ON x.benchmark = h.benchmark AND x.question_id = h.question_id
WHERE h.strategy = '' AND (h.lineage = 'current' OR (h.parse_method = 'legacy' AND h.lineage = 'superseded'));
