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
    assert typical == 3 * 600 and cells[6] == "300"  # 3 × max_tokens
    assert cells[7] == f"${prompt / 1e6 * 1000 + typical / 1e6 * 2000:.2f}"  # the --pricing file's prices
    assert "$0.00 *" in next(line for line in dry.stdout.splitlines() if "judging" in line)

    assert shaberi(*common).returncode == 0
    again = shaberi(*common, "--dry-run")
    generation = next(line for line in again.stdout.splitlines() if "generation" in line)
    assert [c.strip() for c in generation.split("│") if c.strip()][2:4] == ["0", "3"]  # all reused now
