-- shaberi/status.py: the statuses of runs' benchmarks and stages, as the stage_status and run_status views give
-- them (sql/020_coverage.sql). $runs: the runs (NULL: every run the connection holds).

-- name: stages
-- every stage row with its benchmark's status; benchmarks in name order, then generate, judges, passes by name
SELECT s.* , r.status AS benchmark_status
FROM stage_status s JOIN run_status r USING (run_id, benchmark)
WHERE $runs IS NULL OR list_contains($runs, s.run_id)
ORDER BY s.run_id, s.benchmark, s.stage = 'generate' DESC, s.stage, s.name;
