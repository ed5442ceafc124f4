-- shaberi leaderboard (shaberi/reports/leaderboard.py). $tags: the tags (or base tags) ranked.

-- name: published
-- per tag, model, judge and benchmark: the values --as-published averages (published_rows), and the factor to 0–10
SELECT p.tag, p.model, p.judge, p.benchmark, list(p.published), any_value(b.to_ten)
FROM published_rows($mark) p JOIN benchmark_info b USING (benchmark)
WHERE p.published IS NOT NULL AND ($tags IS NULL OR list_contains($tags, p.tag)) GROUP BY ALL;

-- name: published_note
-- how many set-aside legacy scores --as-published counts, and how many of them lay outside the judging scale
SELECT count(*) FILTER (WHERE error LIKE 'legacy: score % outside the %'), count(*)
FROM published_rows($mark) WHERE score IS NULL AND published IS NOT NULL AND list_contains($tags, tag);

-- name: own_scores
-- each question counted once (score_means), to set beside the published numbers
SELECT r.tag, r.model, s.judge, s.benchmark, b.title, s.score FROM score_means s JOIN runs r USING (run_id)
JOIN benchmark_info b ON b.benchmark = s.benchmark
WHERE s.score IS NOT NULL ORDER BY r.model, s.judge = '*' DESC, s.judge, b.position;

-- name: family_stats
SELECT base_tag, model, judge, benchmark, mean, ci_low, ci_high, runs FROM multi_run_stats
WHERE mean IS NOT NULL AND list_contains($tags, base_tag);

-- name: family_judges
SELECT DISTINCT base_tag, model, judge FROM benchmark_scores
WHERE NOT is_pooled(judge) AND score IS NOT NULL AND tag <> base_tag AND list_contains($tags, base_tag);

-- name: left_out
-- family members left out of the statistics, with why
SELECT r.base_tag, r.model, r.tag, c.reasons FROM run_completeness c JOIN runs r USING (run_id)
WHERE NOT c.complete AND c.judge = '*' AND r.tag <> r.base_tag AND list_contains($tags, r.base_tag)
ORDER BY r.model, r.run_index;

-- name: single_scores
SELECT r.tag, r.model, s.judge, s.benchmark, s.score FROM score_means s JOIN runs r USING (run_id)
WHERE list_contains($tags, r.tag);

-- name: japanese_share
-- the share of Japanese in the answers' letters (answer_letters), per tag and model, then per family (base tag): a
-- family's row, listed last, is its members' answers
WITH letters AS (SELECT r.tag, r.base_tag, r.model, a.japanese_chars, a.letter_chars FROM answer_letters a
                 JOIN runs r USING (run_id))
SELECT 1 AS k, tag, model, sum(japanese_chars) / nullif(sum(letter_chars), 0) FROM letters GROUP BY ALL
UNION ALL
SELECT 2 AS k, base_tag, model, sum(japanese_chars) / nullif(sum(letter_chars), 0) FROM letters GROUP BY ALL
ORDER BY k;

-- name: imported
-- runs imported from legacy files (no generation config)
SELECT tag, model FROM runs WHERE imported(generation_config);
