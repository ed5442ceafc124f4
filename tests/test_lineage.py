"""Numbers you can trust: every score comes from the current answer, the judge and prompt that judged it;
stages touch only what they are asked to; history is kept and counted as such, never averaged.

Everything over real HTTP (the loopback server, candidate and judge calls told apart by the judge's system
prompt) and the real command line in subprocesses."""

from __future__ import annotations

import json

import pytest

from shaberi.tables.store import Store

from .conftest import query, run_cli, shaberi, write_rakuda


def candidate_calls(server) -> int:
    """Chat requests that were not judge calls (a judge's system prompt asks for FINAL SCORE)."""
    return sum(1 for messages in server.requests()
               if not any(m["role"] == "system" and "FINAL SCORE" in m["content"] for m in messages))


def judge_calls(server) -> list[str]:
    """The last user message of every judge call (the judged question is in it)."""
    return [messages[-1]["content"] for messages in server.requests()
            if any(m["role"] == "system" and "FINAL SCORE" in m["content"] for m in messages)]


def run(server, results, data, *args: str, tag: str = "t"):
    return run_cli(server.base_url, results, data, "--benchmark", "rakuda", *args, tag=tag)


def test_rejudge_never_calls_the_candidate_whoever_addresses_the_run(server, tmp_path):
    data = write_rakuda(tmp_path / "d", [f"質問{i}" for i in range(5)])
    results = tmp_path / "r"
    assert run(server, results, data, "--runs", "2", "--judge", "j1", tag="fam").returncode == 0
    config = query(results, "SELECT tag, generation_config FROM runs ORDER BY tag")
    answers = query(results, "SELECT * FROM raw_answers ORDER BY run_id, question_id")

    server.reset()
    member = run(server, results, data, "--rejudge", "--judge", "j2", tag="fam-run1")  # addressed by its own tag
    assert member.returncode == 0, member.stderr
    assert candidate_calls(server) == 0 and len(judge_calls(server)) == 5
    server.reset()
    family = run(server, results, data, "--rejudge", "--judge", "j2", "--runs", "2", tag="fam")  # by base tag
    assert family.returncode == 0, family.stderr
    assert candidate_calls(server) == 0 and len(judge_calls(server)) == 10
    # The answers and the recorded generation config (seed included) are untouched.
    assert query(results, "SELECT * FROM raw_answers ORDER BY run_id, question_id") == answers
    assert query(results, "SELECT tag, generation_config FROM runs ORDER BY tag") == config
    assert [json.loads(c)["seed"] for _, c in config] == [1, 2]
    assert query(results, "SELECT count(*) FROM judgements WHERE judge = 'j2'") == [(10,)]
    # The dry run of the same: judging only, over the run's own benchmark (the data dir holds no other).
    server.reset()
    dry = run(server, results, data, "--rejudge", "--judge", "j2", "--runs", "2", "--dry-run", tag="fam")
    assert dry.returncode == 0, dry.stderr
    assert "judging" in dry.stdout and "generation" not in dry.stdout and "fam-run2" in dry.stdout
    assert server.stats()["calls"] == 0


def test_rejudge_and_judge_stage_refuse_without_answers_or_judges(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2"])
    results = tmp_path / "r"
    for args, needle in [(["--rejudge", "--judge", "j"], "no stored answers for model 'm' tag 't'"),
                         (["--stages", "judge", "--judge", "j"], "no stored answers"),
                         (["--rejudge"], "--rejudge calls the judges again"),
                         (["--rejudge", "--judge", "j", "--stages", "generate,judge"], "never generates")]:
        proc = run(server, results, data, *args)
        assert proc.returncode == 2 and needle in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and not results.exists()
    assert server.stats()["calls"] == 0
    # A family with a member that has no answers: refused before any member is judged.
    assert run(server, results, data, tag="fam-run1").returncode == 0
    server.reset()
    proc = run(server, results, data, "--rejudge", "--judge", "j", "--runs", "2", tag="fam")
    assert proc.returncode == 2 and "--runs 2 asked for, but only 1 run of 'fam' exists" in proc.stderr, proc.stderr
    assert server.stats()["calls"] == 0 and query(results, "SELECT count(*) FROM judgements") == [(0,)]


def test_benchmark_scopes_the_judge_stage(server, tmp_path, data_dir):
    results = tmp_path / "r"
    common = ["--model", "m", "--base-url", server.base_url, "--limit", "3", "--results-dir", str(results),
              "--data-dir", str(data_dir)]
    assert shaberi("run", *common, "--benchmark", "rakuda,elyza").returncode == 0
    server.reset()
    proc = shaberi("run", *common, "--stages", "judge", "--judge", "j", "--benchmark", "rakuda")
    assert proc.returncode == 0, proc.stderr
    assert candidate_calls(server) == 0 and len(judge_calls(server)) == 3  # rakuda's three answers only
    assert query(results, "SELECT benchmark, count(*) FROM judgements GROUP BY 1") == [("rakuda", 3)]
    # Without --limit, --stages judge judges every stored answer of the benchmarks it is given.
    server.reset()
    assert shaberi("run", *common[:4], *common[6:], "--stages", "judge", "--judge", "j").returncode == 0
    assert len(judge_calls(server)) == 3  # elyza's three; rakuda's are stored
    bad = shaberi("run", *common, "--stages", "judge", "--judge", "j", "--benchmark", "tengu")
    assert bad.returncode == 2 and "has no answers for tengu" in bad.stderr


def test_regenerated_answers_leave_no_stale_score_counted(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["<<judge: FINAL SCORE: 8>> 質問1", "<<judge: FINAL SCORE: 6>> 質問2",
                                         "<<judge: FINAL SCORE: 4>> 質問3"])
    results = tmp_path / "r"
    assert run(server, results, data, "--judge", "j").returncode == 0
    # A new seed: every answer is generated again (another text), and nothing is judged.
    again = run(server, results, data, "--seed", "5")
    assert again.returncode == 0, again.stderr
    view = json.loads(shaberi("view", "--tag", "t", "--format", "json", "--results-dir", str(results)).stdout)
    rakuda = next(r for r in view["scores"][0]["rows"] if r["benchmark"] == "Rakuda")
    assert rakuda["score"] is None and rakuda["not_judged"] == 3
    assert "3 not judged, 3 of them judged as an earlier answer: stale" in rakuda["note"]
    assert view["scores"][0]["status"] == "partial"
    assert query(results, "SELECT count(*) FROM scores") == [(0,)]
    assert query(results, "SELECT lineage, count(*) FROM judgement_history GROUP BY 1") == [("stale", 3)]
    # Judging again scores the new answers; the old judgements stay as history.
    server.reset()
    assert run(server, results, data, "--stages", "judge", "--judge", "j").returncode == 0
    assert candidate_calls(server) == 0 and len(judge_calls(server)) == 3
    assert query(results, "SELECT lineage, count(*) FROM judgement_history GROUP BY 1 ORDER BY 1") == [
        ("current", 3), ("stale", 3)]
    assert query(results, "SELECT avg(score) FROM scores") == [(6.0,)]


def test_the_latest_judging_prompt_counts_and_an_older_one_is_kept(server, tmp_path, monkeypatch):
    import asyncio

    from shaberi import prompts as prompts_module
    from shaberi.llm.client import ClientConfig
    from shaberi.llm.endpoints import ModelAt
    from shaberi.pipeline import RunRequest
    from shaberi.pipeline import run as run_pipeline

    data = write_rakuda(tmp_path / "d", ["<<judge: FINAL SCORE: 8>> 質問1", "<<judge: FINAL SCORE: 6>> 質問2"])
    results = tmp_path / "r"

    def evaluate(tag: str, **kw) -> None:
        asyncio.run(run_pipeline(RunRequest(model="m", base_url=server.base_url, results_dir=results, data_dir=data,
                                            benchmarks=["rakuda"], tag=tag, judges=[ModelAt("j", server.base_url)],
                                            client=ClientConfig(max_retries=0), **kw)))

    evaluate("old")
    evaluate("both")
    old_hash = query(results, "SELECT DISTINCT prompt_hash FROM judgements")[0][0]
    # an upgrade's new prompt
    monkeypatch.setattr(prompts_module, "judging_hash", lambda benchmark, judging=None: "prompt-v2")
    evaluate("both", stages=["judge"])
    rows = query(results, "SELECT r.tag, h.prompt_hash, h.lineage, count(*) FROM judgement_history h JOIN runs r "
                          "USING (run_id) GROUP BY ALL ORDER BY 1, 2")
    assert rows == sorted([("both", old_hash, "superseded", 2), ("both", "prompt-v2", "current", 2),
                           ("old", old_hash, "current", 2)])
    # A run judged only under the older prompt keeps its scores; every score says which prompt it came from.
    assert query(results, "SELECT r.tag, s.prompt_hashes, s.n FROM benchmark_scores s JOIN runs r USING (run_id) "
                          "WHERE judge = 'j' ORDER BY 1") == [("both", ["prompt-v2"], 2), ("old", [old_hash], 2)]


def test_limit_on_an_existing_run_keeps_every_question_and_pass_delta(server, tmp_path):
    looping = "\\n".join(["ループ" * 10] * 4)  # the repetition pass flags it
    data = write_rakuda(tmp_path / "d", [f"<<answer: {f'回答{i}' if i % 2 else looping}>> 質問{i}" for i in range(6)])
    results = tmp_path / "r"
    assert run(server, results, data, "--judge", "j", "--passes", "repetition").returncode == 0
    deltas = query(results, "SELECT question_id, delta FROM pass_deltas ORDER BY 1")
    assert len(deltas) == 6 and any(d for _, d in deltas)
    proc = run(server, results, data, "--judge", "j", "--passes", "repetition", "--limit", "2")
    assert proc.returncode == 0, proc.stderr
    assert query(results, "SELECT count(*) FROM questions") == [(6,)]
    assert query(results, "SELECT count(*) FROM answers") == [(6,)]
    assert query(results, "SELECT question_id, delta FROM pass_deltas ORDER BY 1") == deltas
    assert query(results, "SELECT n FROM benchmark_scores WHERE judge = 'j'") == [(6,)]


def test_a_repeated_question_id_is_refused_before_any_call(server, tmp_path):
    data = tmp_path / "d"
    (data / "ja").mkdir(parents=True)
    lines = [{"category": "c", "question_id": "a", "text": "質問1"}, {"category": "c", "question_id": "b", "text": "2"},
             {"category": "c", "question_id": "a", "text": "質問3"}]
    (data / "ja" / "rakuda.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    proc = run(server, tmp_path / "r", data)
    assert proc.returncode == 2 and "rakuda.jsonl:3: question id a repeats" in proc.stderr
    assert "rakuda.jsonl:1" in proc.stderr and server.stats()["calls"] == 0 and not (tmp_path / "r").exists()
    lines[2] = {"category": "c", "question_id": "c"}  # no text
    (data / "ja" / "rakuda.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    proc = run(server, tmp_path / "r", data)
    assert proc.returncode == 2 and "rakuda.jsonl:3: the row lacks the upstream column(s) text" in proc.stderr
    assert server.stats()["calls"] == 0 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("stage", ["generate", "passes"])
def test_a_pass_or_generation_on_a_store_with_history_counts_only_current_judgements(server, tmp_path, stage):
    """The passes see the judges' current scores: not a stale judgement's (the lineage rule in Python)."""
    data = write_rakuda(tmp_path / "d", ["<<judge: FINAL SCORE: 8>> 質問1"])
    results = tmp_path / "r"
    assert run(server, results, data, "--judge", "j").returncode == 0
    assert run(server, results, data, "--seed", "3", "--judge", "j").returncode == 0  # regenerated and re-judged
    run_id = query(results, "SELECT run_id FROM runs")[0][0]
    from shaberi.passes.runner import answer_items

    ((item, a_hash),) = list(answer_items(Store(results), run_id))
    assert item.scores == {"j": 8.0} and a_hash == query(results, "SELECT answer_hash FROM answers")[0][0]
    assert query(results, "SELECT count(*) FROM judgement_history") == [(2,)]


def test_a_killed_rejudge_resumes_without_paying_twice(tmp_path):
    """--rejudge calls every judge again; killed half-way and run again, it keeps what it had judged: only the
    calls in flight at the kill are paid twice."""
    from shaberi.testing import LoopbackServer

    from .conftest import kill_when

    data = write_rakuda(tmp_path / "d", [f"質問{i}" for i in range(10)])
    results = tmp_path / "r"
    with LoopbackServer(latency_ms=250) as slow:
        args = ["run", "--model", "m", "--base-url", slow.base_url, "--benchmark", "rakuda", "--judge", "j",
                "--judge-concurrency", "2", "--concurrency", "2", "--results-dir", str(results), "--data-dir",
                str(data)]
        assert shaberi(*args).returncode == 0
        slow.reset()
        assert 6 <= kill_when(slow, [*args, "--rejudge"], 6) < 10
        again = shaberi(*args, "--rejudge")
        assert again.returncode == 0, again.stderr
        total = slow.stats()["calls"]
    assert 10 <= total <= 10 + 2  # the rest, and at most the two calls that were in flight
    assert query(results, "SELECT count(*) FROM judgements") == [(10,)]
