-- shaberi/status.py: the statuses of runs' benchmarks and stages by the rules of sql/005_status.sql, as the
-- stage_status and run_status views apply them (sql/020_coverage.sql). $runs: the runs (NULL: every run the
-- connection holds).

-- name: stages
-- every stage row with its benchmark's status (benchmark_status, as run_status has it: the stage rows are read
-- once); benchmarks in name order, then generate, judges, passes by name
WITH s AS MATERIALIZED (SELECT * FROM stage_status WHERE $runs IS NULL OR list_contains($runs, run_id)),
b AS (
    SELECT run_id, benchmark,
           benchmark_status(any_value(status) FILTER (WHERE stage = 'generate'),
                            list(status ORDER BY name) FILTER (WHERE stage = 'judge'),
                            list(status ORDER BY name) FILTER (WHERE stage = 'passes')) AS benchmark_status
    FROM s GROUP BY run_id, benchmark
)
SELECT s.*, b.benchmark_status FROM s JOIN b USING (run_id, benchmark)
ORDER BY s.run_id, s.benchmark, s.stage = 'generate' DESC, s.stage, s.name;
