-- shaberi ensemble quick-eval (shaberi/ensemble/grading.py): what its graders did.

-- name: grader_counts
-- per judge of $judges: the grades that count (the judgements view) of this evaluation's answers (every member and
-- strategy answer of the sampled questions in $run, and the separate baseline's sample 0 in $base), the unreadable
-- ones (a parse method of $unreadable) and those without a score
SELECT judge, count(*), count(*) FILTER (WHERE list_contains($unreadable, parse_method)),
       count(*) FILTER (WHERE score IS NULL)
FROM judgements
WHERE list_contains($ids, question_id) AND list_contains($judges, judge) AND (
      (run_id = $run AND list_contains($strategies, strategy))
      OR (run_id = $base AND strategy = '' AND sample_index = 0))
GROUP BY 1;
