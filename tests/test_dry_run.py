"""`shaberi run --dry-run`: the planned calls, tokens and cost, with no call and nothing written."""

from __future__ import annotations

from .conftest import shaberi, write_rakuda


def test_dry_run_calls_nothing_counts_reuse_and_prices_with_the_given_table(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2", "質問3"])
    pricing = tmp_path / "prices.toml"
    pricing.write_text('["priced-model"]\ninput = 1000.0\noutput = 2000.0\n', encoding="utf-8")
    common = ["run", "--model", "priced-model", "--base-url", server.base_url, "--benchmark", "rakuda",
              "--judge", "unpriced-judge", "--results-dir", str(tmp_path / "r"), "--data-dir", str(data),
              "--pricing", str(pricing), "--max-tokens", "100"]
    server.reset()
    dry = shaberi(*common, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert server.stats()["calls"] == 0 and not (tmp_path / "r").exists()
    generation = next(line for line in dry.stdout.splitlines() if "generation" in line)
    cells = [c.strip() for c in generation.split("│") if c.strip()]
    assert cells[2:4] == ["3", "0"]  # three calls planned, none reused
    prompt, typical = (int(c.lstrip("~").replace(",", "")) for c in cells[4:6])
    assert typical == 3 * 100 and cells[6] == "300"  # the typical 600 tokens cut to --max-tokens; 3 × max_tokens
    assert cells[7] == f"${prompt / 1e6 * 1000 + typical / 1e6 * 2000:.2f}"  # the --pricing file's prices
    assert "$0.00 *" in next(line for line in dry.stdout.splitlines() if "judging" in line)

    assert shaberi(*common).returncode == 0
    again = shaberi(*common, "--dry-run")
    generation = next(line for line in again.stdout.splitlines() if "generation" in line)
    assert [c.strip() for c in generation.split("│") if c.strip()][2:4] == ["0", "3"]  # all reused now


def _table(stdout: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in stdout.splitlines() if line.startswith("│")]


def test_dry_run_predicts_what_the_run_then_calls_for_a_family(server, tmp_path):
    """A family half done: the dry run's calls are the server's calls of the real run that follows, member by
    member; then nothing is left to call, and --rejudge plans every judgement again."""
    data = write_rakuda(tmp_path / "d", [f"質問{i}" for i in range(5)])
    common = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--runs", "2",
              "--judge", "ja", "--judge", "jb", "--results-dir", str(tmp_path / "r"), "--data-dir", str(data)]
    assert shaberi(*common, "--limit", "2").returncode == 0
    server.reset()
    dry = shaberi(*common, "--limit", "4", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    rows = _table(dry.stdout)
    assert [r[:5] for r in rows] == [
        ["default-run1", "generation", "m", "2", "2"], ["default-run1", "judging", "ja", "2", "2"],
        ["default-run1", "judging", "jb", "2", "2"], ["default-run2", "generation", "m", "2", "2"],
        ["default-run2", "judging", "ja", "2", "2"], ["default-run2", "judging", "jb", "2", "2"],
        ["Total", "", "", "12", "12"]]
    assert server.stats()["calls"] == 0
    assert shaberi(*common, "--limit", "4").returncode == 0
    assert server.stats()["calls"] == 12  # what the dry run said: 2 answers and 2 × 2 judgements per member
    done = _table(shaberi(*common, "--limit", "4", "--dry-run").stdout)
    assert done[-1][:5] == ["Total", "", "", "0", "24"]  # everything stored: no call
    again = _table(shaberi("run", "--model", "m", "--benchmark", "rakuda", "--runs", "2", "--judge",
                           f"ja@{server.base_url}",
                           "--rejudge", "--limit", "4", "--dry-run", "--results-dir", str(tmp_path / "r"),
                           "--data-dir", str(data)).stdout)
    assert [r[:5] for r in again] == [["default-run1", "judging", "ja", "4", "0"],
                                      ["default-run2", "judging", "ja", "4", "0"], ["Total", "", "", "8", "0"]]
    # A new judge on the stored answers reads no data file, as the run itself does not.
    new_judge = ["run", "--model", "m", "--runs", "2", "--stages", "judge", "--judge", f"jc@{server.base_url}",
                 "--results-dir", str(tmp_path / "r"), "--data-dir", str(tmp_path / "nowhere")]
    planned = _table(shaberi(*new_judge, "--dry-run").stdout)
    assert planned[-1][:5] == ["Total", "", "", "8", "0"]
    server.reset()
    assert shaberi(*new_judge).returncode == 0 and server.stats()["calls"] == 8


def test_dry_run_of_two_turn_conversations_and_rerun_matches_the_calls(server, tmp_path, data_dir):
    """MT-Bench's second turns are planned with their first (no crash), and --rerun plans every answer again."""
    common = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "mt_bench_full", "--limit", "4",
              "--judge", "j", "--results-dir", str(tmp_path / "r"), "--data-dir", str(data_dir)]
    dry = shaberi(*common, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [r[:3] for r in _table(dry.stdout)] == [["generation", "m", "4"], ["judging", "j", "4"], ["Total", "", "8"]]
    assert shaberi(*common).returncode == 0 and server.stats()["calls"] == 8  # 4 turns answered, then judged
    rerun = _table(shaberi(*common, "--rerun", "--dry-run").stdout)
    assert [r[:3] for r in rerun] == [["generation", "m", "4"], ["judging", "j", "4"], ["Total", "", "8"]]
    server.reset()
    assert shaberi(*common, "--rerun").returncode == 0
    # The server answers alike: the same texts again, whose judgements are reused. The plan is the bound.
    assert server.stats()["calls"] == 4


def test_dry_run_prices_a_batched_judge_at_its_batch_rates_and_a_judge_without_them_at_its_own(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2", "質問3"])
    pricing = tmp_path / "prices.toml"
    pricing.write_text('["batched-judge"]\ninput = 1000.0\noutput = 2000.0\nbatch_input = 400.0\nbatch_output = 900.0\n'
                       '["plain-judge"]\ninput = 1000.0\noutput = 2000.0\n', encoding="utf-8")
    rows = {}
    for judge in ("batched-judge", "plain-judge"):
        for batch in ([], ["--judge-batch"]):
            dry = shaberi("run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge",
                          judge, "--results-dir", str(tmp_path / "r"), "--data-dir", str(data), "--pricing",
                          str(pricing), "--dry-run", *batch)
            assert dry.returncode == 0, dry.stderr
            rows[(judge, bool(batch))] = next(r for r in _table(dry.stdout) if r[0] == "judging")
    for (judge, batch), cells in rows.items():
        prompt, typical, most = (int(c.lstrip("~").replace(",", "")) for c in cells[4:7])
        rates = (400.0, 900.0) if judge == "batched-judge" and batch else (1000.0, 2000.0)
        assert cells[7] == f"${prompt / 1e6 * rates[0] + typical / 1e6 * rates[1]:,.2f}", (judge, batch, cells)
        assert cells[8] == f"${prompt / 1e6 * rates[0] + most / 1e6 * rates[1]:,.2f}", (judge, batch, cells)
