-- shaberi inspect (shaberi/reports/inspector.py): a run's questions, one by one. $run: the run inspected.

-- name: benchmarks
SELECT benchmark FROM answers WHERE run_id = $r UNION SELECT benchmark FROM judgements WHERE run_id = $r ORDER BY 1;

-- name: judges
SELECT DISTINCT judge FROM judgements WHERE run_id = $r ORDER BY 1;

-- name: pools
-- the pooled rows of the run's judges: '*' (Shaberi's prompts), '* [LABEL]' per other prompt set
SELECT DISTINCT pooled_judge(judge) FROM judgements WHERE run_id = $r ORDER BY 1;

-- name: rows
-- one row per question answered or judged (a partial run shows what it has): the score (0–10; $judge a judge or
-- a pool, whose judges' mean it is), without passes, the pass delta, the difference to $other_run / $other_judge
-- when $comparing, the error, the first turn, and how many rows the filters match (total). $sort names the order
-- (inspector.SORTS); nulls last, then a stable key. The matching marker is where inspect.matching goes when searching.
WITH per AS (
    SELECT run_id, benchmark, question_id, avg(score_10) AS score,
           avg(original_score_10) AS original, any_value(error) FILTER (WHERE error IS NOT NULL) AS jerr
    FROM scores WHERE strategy = '' AND sample_index = 0
      AND (judge = $judge OR pooled_judge(judge) = $judge)
    GROUP BY ALL
), other AS (
    SELECT benchmark, question_id, avg(score_10) AS score FROM scores
    WHERE run_id = $other_run AND strategy = '' AND sample_index = 0
      AND (judge = $other_judge OR pooled_judge(judge) = $other_judge) GROUP BY ALL
), keys AS (  -- answered or judged: a partial run shows what it has
    SELECT benchmark, question_id FROM answers WHERE run_id = $run AND strategy = '' AND sample_index = 0
    UNION
    SELECT benchmark, question_id FROM judgements WHERE run_id = $run AND strategy = '' AND sample_index = 0
)
SELECT k.benchmark, k.question_id, p.score, p.original, p.score - p.original AS pass_delta,
       CASE WHEN $comparing THEN o.score - p.score END AS difference,
       CASE WHEN $comparing THEN o.score END AS other_score, coalesce(a.error, p.jerr) AS error,
       qq.turns[1] AS question, count(*) OVER () AS total
FROM keys k
LEFT JOIN answers a ON a.run_id = $run AND a.benchmark = k.benchmark AND a.question_id = k.question_id
                   AND a.strategy = '' AND a.sample_index = 0
LEFT JOIN questions qq ON qq.run_id = $run AND qq.benchmark = k.benchmark AND qq.question_id = k.question_id
LEFT JOIN per p ON p.run_id = $run AND p.benchmark = k.benchmark AND p.question_id = k.question_id
LEFT JOIN other o ON o.benchmark = k.benchmark AND o.question_id = k.question_id
WHERE ($bench IS NULL OR k.benchmark = $bench)
  AND (NOT $errors_only OR coalesce(a.error, p.jerr) IS NOT NULL) /*matching*/
ORDER BY CASE WHEN $sort = 'errors' THEN coalesce(a.error, p.jerr) IS NULL END,
         CASE WHEN $sort IN ('score ↑', 'errors') THEN p.score END ASC NULLS LAST,
         CASE WHEN $sort = 'score ↓' THEN p.score END DESC NULLS LAST,
         CASE WHEN $sort = 'difference' AND $comparing THEN abs(o.score - p.score) END DESC NULLS LAST,
         CASE WHEN $sort = 'pass delta' THEN p.score - p.original END ASC NULLS LAST,
         k.benchmark, length(k.question_id), k.question_id
LIMIT $limit;

-- name: matching
-- the question whose id $needle is, or whose prompt (any turn), answer or any current judge reply (or fallback
-- reply, of any judge) holds it, case-insensitively (contains: % and _ are literal); added to inspect.rows only
-- when searching, so the unfiltered list reads no judge reply
AND (lower(k.question_id) = lower($needle)
     OR coalesce(contains(lower(array_to_string(qq.turns, chr(10))), lower($needle))
              OR contains(lower(a.content), lower($needle)), false)
     OR EXISTS (SELECT 1 FROM judgements j
                WHERE j.run_id = $run AND j.benchmark = k.benchmark AND j.question_id = k.question_id
                  AND j.strategy = '' AND j.sample_index = 0
                  AND coalesce(contains(lower(j.judge_output), lower($needle))
                               OR contains(lower(j.fallback_output), lower($needle)), false)))

-- name: question
SELECT turns, reference, criteria, category FROM questions WHERE run_id = $run AND benchmark = $bench
AND question_id = $q;

-- name: answer
SELECT content, reasoning, error, finish_reason FROM answers WHERE run_id = $run AND benchmark = $bench
AND question_id = $q AND strategy = '' AND sample_index = 0;

-- name: judgements
-- every judgement of the answer, current first in each judge's history
SELECT judge, score, score_scale, parse_method, judge_output, fallback_output, error, prompt_hash, lineage
FROM judgement_history WHERE run_id = $run AND benchmark = $bench AND question_id = $q
AND strategy = '' AND sample_index = 0 ORDER BY judge, created_at DESC;

-- name: passes
SELECT pass_name, delta, reason, detail FROM pass_deltas WHERE run_id = $run AND benchmark = $bench
AND question_id = $q AND strategy = '' AND sample_index = 0 ORDER BY pass_name;
