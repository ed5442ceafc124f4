"""Two-turn MT-Bench (opt-in): turn 2 is generated after the model's own turn-1 answer and judged on the
whole conversation, math/reasoning/coding against the reference answer."""

from __future__ import annotations

import json

from shaberi import benchmarks as bm
from shaberi.errors import UsageError
from shaberi.llm.client import ClientConfig

from . import conftest
from .conftest import query

FAST = ClientConfig(timeout=2.0, max_retries=1, backoff_base=0.01, backoff_max=0.02)


def write_two_turn(data_dir, rows, refs):
    (data_dir / "ja").mkdir(parents=True, exist_ok=True)
    with open(data_dir / "ja" / "ja_mt_bench_full_2turn.jsonl", "w", encoding="utf-8") as fh:
        for qid, category, turns in rows:
            fh.write(json.dumps({"question_id": qid, "category": category, "turns": turns}, ensure_ascii=False) + "\n")
    with open(data_dir / "ja" / "ja_mt_bench_reference_gpt4.jsonl", "w", encoding="utf-8") as fh:
        for qid, turns in refs:
            fh.write(json.dumps({"question_id": qid, "choices": [{"index": 0, "turns": turns}]}, ensure_ascii=False)
                     + "\n")
    return data_dir


def evaluate(server, results, data):
    return conftest.evaluate(server, results, data, benchmarks=["mt_bench_full"], judges=["j"])


def test_the_real_files_give_160_turns_and_all_stays_the_four(data_dir):
    d = bm.load("mt_bench_full", data_dir)
    assert len(d.questions) == 160 and d.rows == 80 and d.known_version
    assert [q.question_id for q in d.questions[:3]] == ["1:1", "1:2", "2:1"]
    assert d.questions[1].turns == [d.questions[0].turns[0], d.questions[1].turns[1]]
    guided = {q.category for q in d.questions if q.extra["reference_guided"]}
    assert guided == {"math", "reasoning", "coding"} and all(q.reference for q in d.questions)
    assert "mt_bench_full" not in bm.resolve("all")
    try:
        bm.resolve("nope")
    except UsageError as exc:
        assert "(opt-in: mt_bench_full, mt_bench_80)" in str(exc)


def test_turn_two_continues_the_models_own_conversation_and_is_judged_on_it(server, tmp_path):
    data = write_two_turn(tmp_path / "d", [
        (1, "math", ["<<answer: 答えは42です。>> 6×7は？", "それを2で割ると？"]),
        (2, "writing", ["春の詩を書いて", "<<judge: 一貫しています。\\nFINAL SCORE: 8>> 夏の詩も書いて"]),
    ], [(1, ["42", "21"]), (2, ["（省略）", "（省略）"])])
    server.reset()
    evaluate(server, tmp_path / "r", data)
    sent = server.requests()
    turn2 = next(m for m in sent if m[-1]["content"] == "それを2で割ると？")
    assert [m["role"] for m in turn2] == ["system", "user", "assistant", "user"]
    assert turn2[2]["content"] == "答えは42です。"  # the model's own turn-1 answer

    judge_turn2 = next(m for m in sent if m[0]["role"] == "system" and "FINAL SCORE" in m[0]["content"]
                       and "それを2で割ると？" in m[-1]["content"])
    prompt = judge_turn2[-1]["content"]
    assert "答えは42です。" in prompt and "## 正解例\n21" in prompt  # conversation and turn-2 reference
    judge_writing = next(m for m in sent if m[0]["role"] == "system" and "夏の詩も書いて" in m[-1]["content"])
    assert "正解例" not in judge_writing[-1]["content"]  # writing is not reference-guided

    assert query(tmp_path / "r", "SELECT question_id, score FROM judgements WHERE question_id = '2:2'") == [("2:2", 8)]
    assert query(tmp_path / "r", "SELECT count(*), count(score) FROM judgements") == [(4, 4)]


def test_a_failed_first_turn_skips_the_second_and_both_are_retried(server, tmp_path):
    data = write_two_turn(tmp_path / "d", [(1, "stem", ["水はなぜ凍る？", "氷はなぜ浮く？"])], [])
    server.reset()
    server.fail_next(500, 500)  # turn 1 and its one retry
    evaluate(server, tmp_path / "r", data)
    rows = query(tmp_path / "r", "SELECT question_id, error_type FROM answers ORDER BY 1")
    assert rows == [("1:1", "server_error"), ("1:2", "dependency")]
    assert query(tmp_path / "r", "SELECT DISTINCT error FROM judgements") == [("answer_error",)]
    assert server.stats()["calls"] == 2  # turn 2 was never sent

    evaluate(server, tmp_path / "r", data)  # the resume answers turn 1, then turn 2, then judges both
    assert query(tmp_path / "r", "SELECT question_id, error FROM answers ORDER BY 1") == [("1:1", None), ("1:2", None)]
    assert query(tmp_path / "r", "SELECT count(score) FROM judgements") == [(2,)]
