"""``--max-cost`` (``budget.py``): a run stops before a call whose worst case could pass the limit, partial with
exit 1 and one line; the same command with a higher limit finishes it, asking no request twice (counted on the
loopback server); an unpriced model is refused with exit 2 before anything is written."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from shaberi.errors import BudgetSpent, UsageError
from shaberi.llm.spending import Budget, Rate, completion_bound, open_budget
from shaberi.testing import LoopbackServer

from .conftest import query, shaberi, write_rakuda
from .test_ensemble import write_gsm8k

# USD per million tokens: a token costs a thousandth of a dollar, so a handful of calls spend whole cents.
PRICES = """
["m"]
input = 1000
output = 1000
["j"]
input = 1000
output = 1000
batch_input = 500
batch_output = 500
"""


def _pricing(tmp_path: Path, text: str = PRICES) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    return path


def _spent(results: Path, pricing: Path | None, model: str | None = None) -> float:
    from shaberi.tables.sql import connect

    return connect(results, pricing).execute("SELECT coalesce(sum(cost_usd), 0) FROM cost WHERE $m IS NULL OR "
                                             "model = $m", {"m": model}).fetchone()[0]


def _run_args(server: LoopbackServer, data: Path, results: Path, pricing: Path) -> list[str]:
    """A run of candidate m judged by j on Rakuda, 100 tokens each, priced from ``pricing``."""
    return ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
            "--max-tokens", "100", "--judge-max-tokens", "100", "--pricing", str(pricing),
            "--data-dir", str(data), "--results-dir", str(results)]


def _adds_up(text: str, limit: float) -> bool:
    """The stop line's figures: spent + the refused call's worst case = a total over the limit."""
    found = re.search(r"--max-cost \$([\d.]+) stopped (?:run|cache entry) \S+ before a call to \S+ that could cost up "
                      r"to \$([\d.]+): the (?:run|entry) has spent .*?\$([\d.]+) \+ \$([\d.]+) = \$([\d.]+) is over "
                      r"the spending limit", text)
    assert found, text
    cap, worst, spent, worst_again, total = map(float, found.groups())
    return (cap == limit and worst == worst_again and abs(spent + worst - total) < 2e-4 and total > limit
            and spent <= limit)


def test_a_run_stops_before_the_limit_partial_and_a_higher_limit_finishes_it_without_asking_anything_twice(tmp_path):
    # questions of one length: every candidate call has the same worst case, so where a run stops depends only on
    # what it has spent (and a second invocation with the same limit sends nothing)
    data = write_rakuda(tmp_path / "d", [f"質問{i:02d}：日本の首都はどこですか？" for i in range(20)])
    results, pricing = tmp_path / "r", _pricing(tmp_path)
    with LoopbackServer() as server:
        args = _run_args(server, data, results, pricing)
        first = shaberi(*args, "--max-cost", "1.5")
        assert first.returncode == 1, first.stderr
        lines = [line for line in first.stderr.splitlines() if "spending limit" in line]
        assert len(lines) == 1 and "raise --max-cost and run the same command again" in lines[0], first.stderr
        assert "status: partial" in first.stdout
        spent = _spent(results, pricing)
        assert 0 < spent <= 1.5  # what was sent never passes the limit, worst cases counted before each call
        assert f"the run has spent ${spent:.4f}, and" in lines[0] and _adds_up(lines[0], 1.5)
        asked = server.stats()
        made = query(results, "SELECT (SELECT count(*) FROM answers WHERE error IS NULL) + "
                              "(SELECT count(*) FROM judgements WHERE score IS NOT NULL)")[0][0]
        assert 0 < made < 40 and made == asked["calls"]  # stopped mid-run, every paid call in the tables
        assert query(results, "SELECT status, error LIKE '%--max-cost%' FROM runs") == [("partial", True)]
        # the same state reads the same: run again with the same limit, it stops at once, exit 1 again
        again = shaberi(*args, "--max-cost", "1.5")
        assert again.returncode == 1 and server.stats()["calls"] == asked["calls"], again.stderr
        done = shaberi(*args, "--max-cost", "100")
        assert done.returncode == 0, done.stderr
        stats = server.stats()
    assert query(results, "SELECT status FROM runs") == [("ok",)]
    assert query(results, "SELECT count(*), count(score) FROM judgements") == [(20, 20)]
    # every request (keyed by what the model was sent) was asked once over the three invocations
    assert stats["calls"] == 40 and set(stats["by_key"].values()) == {1}, stats["by_key"]
    # The run is priced with the prices its limit counted, by every reader, --pricing or not: the cost view, the
    # manifest, view. A reader's own --pricing is looked up first.
    spent = _spent(results, pricing)
    assert spent > 1.5 and _spent(results, None) == pytest.approx(spent, abs=1e-12)
    manifest = json.loads(next(results.rglob("manifest.json")).read_text())
    assert manifest["token_totals"]["run"]["cost_usd"] == pytest.approx(spent, abs=1e-9)
    shown = shaberi("view", "--tag", "default", "--results-dir", str(results))
    assert shown.returncode == 0 and f"${spent:.4f}" in shown.stdout, shown.stdout
    (tmp_path / "free").mkdir()
    free = _pricing(tmp_path / "free", '["m"]\ninput = 0\noutput = 0\n')
    candidate = _spent(results, pricing, "m")
    assert 0 < candidate < spent and _spent(results, free) == pytest.approx(spent - candidate, abs=1e-12)


def test_a_rejudge_the_limit_stops_before_any_call_is_partial_until_it_is_done(tmp_path):
    # The old judgements stand, every one of them scored: what the tables hold is not what the command was asked
    # to do, so the stage and the run read partial (exit 1), the same again, until a higher limit rejudges them.
    data = write_rakuda(tmp_path / "d", [f"質問{i:02d}：日本の首都はどこですか？" for i in range(4)])
    results, pricing = tmp_path / "r", _pricing(tmp_path)
    with LoopbackServer() as server:
        args = _run_args(server, data, results, pricing)
        assert shaberi(*args).returncode == 0
        for _ in range(2):
            stopped = shaberi(*args, "--rejudge", "--max-cost", "0.01")
            assert stopped.returncode == 1 and "status: partial" in stopped.stdout, stopped.stdout + stopped.stderr
            assert server.stats()["calls"] == 8
            (status, stages), = query(results, "SELECT status, stages::JSON->'judge'->>'status' FROM runs")
            assert (status, stages) == ("partial", "partial")
            shown = shaberi("view", "--tag", "default", "--results-dir", str(results))
            assert "status: partial" in shown.stdout and "spending limit stopped it" in shown.stdout, shown.stdout
        done = shaberi(*args, "--rejudge", "--max-cost", "100")
        assert done.returncode == 0 and "status: ok" in done.stdout, done.stderr
        assert server.stats()["calls"] == 12
    assert query(results, "SELECT status, stages::JSON->'judge'->>'status' FROM runs") == [("ok", "ok")]


def test_a_rejudge_the_limit_stops_midway_goes_on_where_it_stopped_without_paying_twice(tmp_path):
    # The limit leaves room for one judge call's worst case at a time above what the run has spent ($1.672; each
    # call's worst case $2.223, what it reports about $0.37): some of the four are rejudged, then the limit stops it.
    data = write_rakuda(tmp_path / "d", [f"質問{i:02d}：日本の首都はどこですか？" for i in range(4)])
    results, pricing = tmp_path / "r", _pricing(tmp_path)
    with LoopbackServer() as server:
        args = _run_args(server, data, results, pricing)
        assert shaberi(*args).returncode == 0 and server.stats()["calls"] == 8
        stopped = shaberi(*args, "--rejudge", "--max-cost", "4.4")
        assert stopped.returncode == 1 and _adds_up(stopped.stderr, 4.4), stopped.stderr
        rejudged = server.stats()["calls"] - 8
        assert 0 < rejudged < 4, stopped.stderr
        done = shaberi(*args, "--rejudge", "--max-cost", "100")  # goes on: the rest only, what it paid for kept
        assert done.returncode == 0 and "status: ok" in done.stdout, done.stderr
        assert server.stats()["calls"] == 12, (rejudged, done.stdout)
        again = shaberi(*args, "--rejudge", "--max-cost", "100")  # finished: a new rejudge asks every one again
        assert again.returncode == 0 and server.stats()["calls"] == 16
    # every judgement stored once: the first judging, the rejudge (stopped, then finished), the second rejudge
    assert query(results, "SELECT count(*) FROM judgement_history") == [(12,)]


def test_the_stop_line_shows_as_many_decimals_as_its_figures_need_to_add_up():
    from shaberi.cli.common import stop_line

    for limit, spent, worst in ((0.0003, 2.2e-05, 0.00031525), (1.5, 1.334, 0.303), (0.01, 0.00995, 0.0000501),
                                (0.00005, 0.00001, 0.0000401)):
        line = stop_line(BudgetSpent("x", limit, "j", worst), "run r", spent, spent)
        assert _adds_up(line, limit), line
        shown = [float(x) for x in re.findall(r"\$([\d.]+)", line)[2:]]  # spent, spent, worst, total
        assert shown[-1] > limit and shown[1] + shown[2] == pytest.approx(shown[3], abs=1e-12), line


def test_a_request_that_timed_out_counts_at_its_worst_case_so_its_retries_cannot_pass_the_limit(tmp_path):
    # each call's worst case is about $0.36 here: the limit leaves room for one at a time, and for one only once a
    # timed-out send (perhaps answered and billed) is counted as spent
    data = write_rakuda(tmp_path / "d", [f"質問{i:02d}：日本の首都はどこですか？" for i in range(3)])
    with LoopbackServer(latency_ms=1500) as server:
        done = shaberi("run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--max-tokens",
                       "100", "--timeout", "1", "--max-retries", "2", "--pricing", str(_pricing(tmp_path)),
                       "--max-cost", "0.45", "--data-dir", str(data), "--results-dir", str(tmp_path / "r"))
        calls = server.stats()["calls"]
    assert done.returncode == 1 and _adds_up(done.stderr, 0.45), done.stderr
    assert "with each call that timed out counted at its worst case" in done.stderr
    assert calls == 1  # not the three sends one call may make (--max-retries 2), nor the other questions'


def test_an_unpriced_remote_model_refuses_max_cost_with_exit_2_and_writes_nothing(tmp_path):
    """A model served elsewhere must be priced (its calls could not be counted); one served on this machine is
    counted at $0, said once; ``--pricing FILE`` adds to the shipped prices, never replaces them."""
    data = write_rakuda(tmp_path / "d", ["質問"])
    results = tmp_path / "r"
    remote = "unpriced@http://192.0.2.1:9/v1"  # TEST-NET-1: refused before any connection is tried
    with LoopbackServer() as server:
        common = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", remote,
                  "--data-dir", str(data), "--results-dir", str(results), "--max-cost", "5"]
        key = {"OPENAI_API_KEY": "sk-test"}  # a remote judge needs a key; it is never reached
        done = shaberi(*common, "--pricing", str(_pricing(tmp_path)), env=key)
        bad = shaberi(*common[:-1], "0", env=key)
        dry = shaberi(*common, "--pricing", str(_pricing(tmp_path)), "--dry-run", env=key)  # refused as the run is
        calls = server.stats()["calls"]
    assert dry.returncode == 2 and "'unpriced' has none in" in dry.stderr, dry.stderr
    assert done.returncode == 2 and "'unpriced' has none in data/pricing.toml nor" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert bad.returncode == 2 and "--max-cost 0 is out of range" in bad.stderr, bad.stderr
    assert calls == 0 and not (results / "tables").exists()


def test_a_local_unpriced_model_is_counted_at_zero_and_said_once(tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2"])
    results = tmp_path / "r"
    with LoopbackServer() as server:
        args = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
                "--max-tokens", "50", "--data-dir", str(data), "--results-dir", str(results), "--max-cost", "5"]
        dry = shaberi(*args, "--dry-run")
        done = shaberi(*args, "--runs", "2")
        calls = server.stats()["calls"]
    assert dry.returncode == 0 and "--max-cost $5, run default: $0.0000 spent so far, at most $0.0000" in dry.stdout
    assert dry.stdout.count("'m' has no price") == 0 and dry.stdout.count("m has no price") == 1, dry.stdout
    assert done.returncode == 0, done.stderr
    for model in ("m", "j"):  # once each for the family, not once per run
        assert done.stderr.count(f"note: {model} has no price and is served on this machine") == 1, done.stderr
    assert calls == 8 and query(results, "SELECT count(*) FROM judgements WHERE score IS NOT NULL") == [(4,)]


def test_a_pricing_file_adds_to_the_shipped_prices(tmp_path):
    from shaberi.tables.sql import connect, load_pricing

    def price(pricing: Path | None, model: str) -> tuple | None:
        row = connect(tmp_path / "r", pricing).execute("SELECT p.model, p.input, p.output FROM (SELECT "
                                                       "price_of(NULL, $m) AS p) WHERE p IS NOT NULL", {"m": model})
        return row.fetchone()

    shipped = {row[0] for row in load_pricing()}
    assert "gpt-4.1" in shipped  # the table the override is measured against
    given = _pricing(tmp_path, PRICES + '["gpt-4.1"]\ninput = 7\noutput = 9\n')
    assert price(given, "gpt-4.1-2025-04-14") == ("gpt-4.1", 7.0, 9.0) and price(given, "m") == ("m", 1000, 1000)
    assert price(None, "gpt-4.1-2025-04-14")[1:] != (7.0, 9.0) and price(None, "m") is None  # type: ignore[index]
    assert all(price(given, k) == price(None, k) for k in shipped - {"gpt-4.1"})  # the others as shipped
    for bad in ("nan", "-1000", "inf", "true", '"3"'):  # no price a limit could count: bad input, never a hang
        with pytest.raises(UsageError, match="is no price"):
            load_pricing(_pricing(tmp_path, f'["m"]\ninput = {bad}\noutput = 1\n'))
    for text, said in (('["m"]\ninput = 1\noutput = 1\ncache_input = 0.1\n', r"\[m\] has no rate cache_input"),
                       ("input = 1\n", "input = 1 is not a \\[model\\] table"),
                       ('["m"]\ninput = 1\n', r"\[m\] has no output")):
        with pytest.raises(UsageError, match=said):
            load_pricing(_pricing(tmp_path, text))


def test_generate_cache_stops_partial_and_resumes_without_paying_twice(tmp_path):
    data = write_gsm8k(tmp_path / "d", n=8)
    results, pricing = tmp_path / "r", _pricing(tmp_path)
    with LoopbackServer() as server:
        args = ["ensemble", "generate-cache", "--model", "m", "--base-url", server.base_url, "--datasets", "gsm8k",
                "--n", "2", "--max-tokens", "50", "--pricing", str(pricing), "--data-dir", str(data),
                "--results-dir", str(results)]
        first = shaberi(*args, "--max-cost", "0.6")
        assert first.returncode == 1 and "raise --max-cost" in first.stderr, first.stderr
        assert 0 < _spent(results, pricing) <= 0.6
        assert _adds_up(first.stderr, 0.6) and f"spent ${_spent(results, pricing):.4f}, and" in first.stderr
        assert query(results, "SELECT status FROM runs") == [("partial",)]
        done = shaberi(*args, "--max-cost", "50")
        assert done.returncode == 0, done.stderr
        stats = server.stats()
    assert query(results, "SELECT status FROM runs") == [("ok",)]
    assert query(results, "SELECT count(*) FROM answers WHERE error IS NULL") == [(16,)]
    assert stats["calls"] == 16  # 8 questions × 2 members, each asked once over both invocations


def test_a_call_is_held_at_its_worst_case_and_settled_at_what_it_reported():
    body = b'{"model":"j","messages":[{"role":"user","content":"abc"}],"max_tokens":100}'
    assert completion_bound(body) == 100 and completion_bound(b'{"max_output_tokens":7}') == 7
    budget = Budget(1.0, 0.25, {("j", False): Rate(1000, 1000), ("j", True): Rate(500, 500)})
    held = asyncio.run(budget.reserve("j", body, batch=True))
    assert held == pytest.approx((len(body) + 100) * 500 / 1e6)  # the batch rates through a batch
    budget.settle(held, "j", True, 10, 20)
    assert budget.held == pytest.approx(0) and budget.spent == pytest.approx(0.25 + 30 * 500 / 1e6)
    with pytest.raises(BudgetSpent, match="no completion limit"):
        asyncio.run(budget.reserve("j", b'{"model":"j","messages":[]}', batch=False))
    budget.spent = 0.9
    with pytest.raises(BudgetSpent, match="over the limit"):
        asyncio.run(budget.reserve("j", body, batch=False))  # 0.9 + 0.17 > 1
    assert budget.refused == 2 and budget.held == pytest.approx(0)


def test_a_call_that_fits_once_the_calls_in_flight_end_waits_for_them_instead_of_stopping_the_run():
    body = b'{"model":"m","messages":[],"max_tokens":100}'
    worst = (len(body) + 100) * 1000 / 1e6

    async def scenario() -> list[str]:
        budget, order = Budget(2.5 * worst, 0.0, {("m", False): Rate(1000, 1000)}), []
        first, second = await budget.reserve("m", body, False), await budget.reserve("m", body, False)
        waiting = asyncio.create_task(budget.reserve("m", body, False))  # a third does not fit beside them
        await asyncio.sleep(0.05)
        order.append("waiting" if not waiting.done() else "sent")
        budget.settle(first, "m", False, 10, 10)  # the first ends having cost little: room for the third
        await waiting
        order.append("sent")
        budget.settle(second, "m", False, 100, 100)
        budget.spent = 2.0 * worst  # spent so far leaves less than one worst case even with nothing in flight
        with pytest.raises(BudgetSpent):
            await budget.reserve("m", body, False)
        return order

    assert asyncio.run(scenario()) == ["waiting", "sent"]


def test_the_budget_starts_from_what_the_run_has_cost_and_prices_batches_at_the_batch_rate(tmp_path):
    pricing = _pricing(tmp_path)
    remote, local = "https://api.example.com/v1", "http://127.0.0.1:8000/v1"
    budget = open_budget(2.0, tmp_path / "empty", pricing, ["m--default"], [("m", False, remote), ("j", True, remote)])
    assert budget.spent == 0 and budget.rates == {("m", False): Rate(1000, 1000), ("j", True): Rate(500, 500)}
    with pytest.raises(UsageError, match="'x' has none in"):
        open_budget(2.0, tmp_path / "empty", pricing, [], [("x", False, remote)])
    with pytest.raises(UsageError, match="'x' has none in"):  # served here and elsewhere: priced, or refused
        open_budget(2.0, tmp_path / "empty", pricing, [], [("x", False, local), ("x", False, remote)])
    free = open_budget(2.0, tmp_path / "empty", pricing, [], [("x", False, local), ("m", False, local)])
    assert free.rates == {("x", False): Rate(0, 0), ("m", False): Rate(1000, 1000)} and free.free == {"x": local}
