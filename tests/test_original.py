"""The original Shaberi's judging from its own code (``../shared/datasets/original/``, as a user's clone): the
requests a loopback judge receives are byte for byte what the original's functions build, for every question of
the four benchmarks, both versions; scores are read as the original reads them.

The original's code is imported here on its own, with its model-calling module replaced by a recorder written
for this test (not Shaberi's replay), and its think-block pattern taken from its ``judge_answers.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path
from unittest import mock

import orjson
import pytest

from shaberi.judging import promptsets
from shaberi.llm.client import ClientConfig
from shaberi.llm.endpoints import ModelAt
from shaberi.pipeline import RunRequest, run
from shaberi.testing import LoopbackServer

from . import conftest
from .conftest import query, shaberi, write_rakuda
from .test_verdict import scipy_p

OLD, NEW = "2025-04-30-451c0aa", "2025-11-26-263ac28"
GPT41, GPT51 = "gpt-4.1-2025-04-14", "gpt-5.1-2025-11-13"
FAST = ClientConfig(timeout=5.0, max_retries=1, backoff_base=0.01, backoff_max=0.02)
# Shaberi benchmark -> (the original's dataset name, our data file, its question column)
DATASETS = {"tengu": ("lightblue/tengu_bench", "tengu_bench", "Question"),
            "elyza": ("elyza/ELYZA-tasks-100", "elyza_tasks_100", "input"),
            "mt_bench": ("shisa-ai/ja-mt-bench-1shot", "ja_mt_bench_1shot", "Question"),
            "rakuda": ("yuzuai/rakuda-questions", "rakuda", "text")}


class Stop(BaseException):
    """The recorder has no reply for this call: the evaluator stops here."""


class Recorder:
    """``get_model_response`` for the original's code: records every messages list, answers from ``replies`` in
    order (an Exception instance is raised, as a failing call), and stops at the first call beyond them."""

    def __init__(self) -> None:
        self.replies: list = []
        self.asked: list[list[dict]] = []

    def __call__(self, messages: list, model_name: str) -> str:
        self.asked.append(copy.deepcopy(messages))
        if not self.replies:
            raise Stop
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def _modules(**replaced: types.ModuleType):
    return mock.patch.dict(sys.modules, replaced)


def _import(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__["print"] = lambda *a, **k: None
    spec.loader.exec_module(module)
    return module


class Original:
    """One version of the original's code, as it runs: its config (judging) and its judge_answers (think pattern)."""

    def __init__(self, clone: Path) -> None:
        self.clone = clone
        self.judge = Recorder()
        llm = types.ModuleType("llm_functions")
        llm.get_model_response = self.judge
        with _modules(llm_functions=llm):
            self.config = _import(clone / "evaluation_datasets_config.py", f"test_original_config_{clone.name}")
        datasets = types.ModuleType("datasets")
        datasets.load_dataset = None
        with _modules(llm_functions=llm, datasets=datasets, evaluation_datasets_config=self.config):
            answers = _import(clone / "judge_answers.py", f"test_original_judge_{clone.name}")
        self.think = getattr(answers, "reasoning_pattern", None)

    def evaluator(self, benchmark: str):
        return self.config.EVAL_MODEL_CONFIGS[DATASETS[benchmark][0]]["evaluator_function"]

    def calls(self, benchmark: str, row: dict, replies: list) -> tuple[list[list[dict]], object]:
        """Run the evaluator with these judge replies: the messages of every call it made, and its result (None
        when it stopped at a call without a reply)."""
        self.judge.replies, self.judge.asked = list(replies), []
        try:
            result = self.evaluator(benchmark)(dict(row), GPT41)
        except Stop:
            result = None
        score = result.get("score") if isinstance(result, dict) else result
        return self.judge.asked, score

    def model_answer(self, raw: str) -> str:
        """The candidate's reply as the original's judging inserts it."""
        return self.think.sub("", raw) if self.think else raw

    def request(self, model: str) -> tuple[str, dict]:
        """What its llm_functions.py passes the OpenAI client for this judge (its client replaced by a recorder)."""
        seen: list = []
        module = self._llm(seen)
        with contextlib.suppress(Stop):
            module.get_response_from_openai([{"role": "user", "content": "x"}], model)
        api, kwargs = seen[0]
        return api, {k: v for k, v in kwargs.items() if k not in ("messages", "input")}

    def generation(self, question: str, model: str, frequency_penalty: float) -> dict:
        """The request its get_answer makes for a question (its generate_answers.py sets ``fp`` from -fp), as the
        body an OpenAI-compatible server receives: litellm's ``hosted_vllm/`` prefix and its connection arguments
        are not part of it."""
        seen: list = []
        module = self._llm(seen)
        module.fp = frequency_penalty
        with contextlib.suppress(Stop):
            module.get_answer(question, model)
        _, kwargs = seen[0]
        return {k: v.removeprefix("hosted_vllm/") if k == "model" else v for k, v in kwargs.items()
                if k not in ("api_base", "api_key")}

    def _llm(self, seen: list) -> types.ModuleType:
        """Its llm_functions.py, with the OpenAI client (and litellm's completion) recording into ``seen``."""

        class Client:
            def __init__(self, **_):
                self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(
                    create=lambda **kw: seen.append(("chat", kw)) or _stop()))
                self.responses = types.SimpleNamespace(create=lambda **kw: seen.append(("responses", kw)) or _stop())

        def _stop():
            raise Stop

        stubs = {"openai": types.SimpleNamespace(OpenAI=Client),
                 "backoff": types.SimpleNamespace(on_exception=lambda *a, **k: (lambda f: f), fibo=None),
                 "datasets": types.SimpleNamespace(Dataset=object),
                 "litellm": types.SimpleNamespace(completion=lambda **kw: seen.append(("chat", kw)) or _stop())}
        with _modules(**{k: types.ModuleType(k) for k in stubs}):
            for k, v in stubs.items():
                sys.modules[k].__dict__.update(vars(v))
            return _import(self.clone / "llm_functions.py", f"test_original_llm_{self.clone.name}")


def dataset_rows(data_dir: Path, benchmark: str) -> dict[str, dict]:
    """The benchmark's rows as the original's answer files hold them, by Shaberi's question id: the dataset's own
    columns, the question column renamed ``Question``, and its 1-based ``id`` where the dataset has none."""
    _, file, column = DATASETS[benchmark]
    rows = {}
    with open(data_dir / "ja" / f"{file}.jsonl", encoding="utf-8") as fh:
        for i, line in enumerate(fh, start=1):
            row = json.loads(line)
            row["Question"] = row.pop(column)
            row.setdefault("id", i)
            rows[str(row["question_id"] if benchmark == "rakuda" else row["id"])] = row
    return rows


def evaluate(server, results: Path, data: Path, clone: Path, judges: list[str], benchmarks: list[str],
             **kw) -> object:
    return conftest.evaluate(server, results, data, judges=judges, benchmarks=benchmarks, model="fake-model",
                             client=FAST, judge_prompts=promptsets.load(str(clone)), **kw)


def _key(messages: list[dict]) -> bytes:
    return orjson.dumps(messages)


@pytest.mark.parametrize("version", [OLD, NEW])
def test_every_judge_request_is_the_originals_byte_for_byte(data_dir, tmp_path, version):
    clone = data_dir / "original" / version
    original = Original(clone)
    judges = [GPT41] + ([GPT51] if version == NEW else [])
    with LoopbackServer(judges=tuple(judges), odd_answers=True) as server:
        out = evaluate(server, tmp_path / "r", data_dir, clone, judges, list(DATASETS))
        requests, bodies, replies = server.requests(), server.bodies(), server.replies()
    assert out.status == "ok" and out.judging.failed == 0
    answers = query(tmp_path / "r", "SELECT benchmark, question_id, content, raw_content FROM answers")
    assert len(answers) == 115 + 100 + 60 + 40
    # what the candidate sent is what is stored: its reply as returned (raw_content where a think block was split)
    sent = Counter(r["content"] for r in replies if r["model"] == "fake-model")
    assert Counter(raw if raw is not None else content for _, _, content, raw in answers) == sent
    assert sum(1 for *_, raw in answers if raw is not None) > 100  # two in three replies carry a think block
    expected: Counter[bytes] = Counter()
    rows = {b: dataset_rows(data_dir, b) for b in DATASETS}
    for benchmark, qid, content, raw in answers:
        text = original.model_answer(raw if raw is not None else content)
        asked, _ = original.calls(benchmark, rows[benchmark][qid] | {"ModelAnswer": text}, [])
        assert len(asked) == 1
        expected[_key(asked[0])] += len(judges)
    judged = [(m, b) for m, b in zip(requests, bodies, strict=True) if b["model"] in judges]
    assert Counter(_key(m) for m, _ in judged) == expected  # every request, byte for byte, none other
    tengu = next(m for m, b in judged if len(m) == 3)  # the worked example: user, assistant, user
    assert [m["role"] for m in tengu] == ["user", "assistant", "user"]
    assert any("{{ question }} {% if x %}" in m[-1]["content"] and "回答の終了]  \n  " in m[-1]["content"]
               for m, _ in judged)  # braces, template syntax and trailing spaces reach the judge untouched
    assert any(("<think>" in m[-1]["content"]) == (version == OLD) for m, _ in judged)
    for model in judges:  # the request fields are what the original's llm_functions.py passes
        api, fields = original.request(model)
        want = {"model": model, **fields, **({"api": "responses"} if api == "responses" else {})}
        assert [b for m, b in judged if b["model"] == model] == [want] * (len(answers))
    if version == NEW:
        assert original.request(GPT51)[0] == "responses" and original.request(GPT41)[0] == "chat"


RAKUDA = {  # question text -> the judge's replies (primary || the original's fallback call)
    "<<judge: 良い回答です。\\nFINAL SCORE: 7.5>> 日本の首都は？": ["良い回答です。\nFINAL SCORE: 7.5"],
    "<<judge@gpt-4.1-2025-04-14?[Judge evaluation]: FINAL SCORE: 4>> <<judge: 採点を忘れました。>> 富士山は？":
        ["採点を忘れました。", "FINAL SCORE: 4"],
    "<<judge: 正確さ 8/10、詳しさ 6/10>> 琵琶湖は？": ["正確さ 8/10、詳しさ 6/10"],
    "<<judge: FINAL SCORE: 6.5>> 四国は？": ["FINAL SCORE: 6.5"],
    "<<judge: FINAL SCORE: 15>> 北海道は？": ["FINAL SCORE: 15"],
    "<<judge: FINAL SCORE: 3 ではなく\\nFINAL SCORE: 9>> 沖縄は？": ["FINAL SCORE: 3 ではなく\nFINAL SCORE: 9"],
    "<<judge: 評価：[[5]]>> 京都は？": ["評価：[[5]]"],
}


@pytest.mark.parametrize("version", [OLD, NEW])
def test_scores_are_read_as_the_original_reads_them_with_its_fallback_call(data_dir, tmp_path, version):
    clone = data_dir / "original" / version
    original = Original(clone)
    data = write_rakuda(tmp_path / "d", list(RAKUDA))
    with LoopbackServer(judges=(GPT41,)) as server:
        evaluate(server, tmp_path / "r", data, clone, [GPT41], ["rakuda"])
        requests, bodies = server.requests(), server.bodies()
        calls = server.stats()["calls"]
    stored = {q: row for q, *row in query(tmp_path / "r", """
        SELECT j.question_id, j.score, j.shaberi_score, j.parse_method, j.error, j.judge, j.prompt_set, a.content,
               j.fallback_output FROM judgements j JOIN answers a USING (question_id)""")}
    label = promptsets.load(str(clone)).label
    judged = [m for m, b in zip(requests, bodies, strict=True) if b["model"] == GPT41]
    for i, (text, replies) in enumerate(RAKUDA.items()):
        score, _, method, error, judge, prompt_set, answer, fallback = stored[f"q{i}"]
        row = {"category": "test", "question_id": f"q{i}", "Question": text, "id": i + 1,
               "ModelAnswer": original.model_answer(answer)}
        asked, want = original.calls("rakuda", row, [*replies, RuntimeError("no more replies")])
        asked = asked[:len(replies)]  # a call beyond the scripted replies is one the server never answered
        assert all(_key(a) in {_key(m) for m in judged} for a in asked), text  # its fallback call too, byte for byte
        assert (judge, prompt_set) == (f"{GPT41} [{label}]", label)
        if want is not None and not 1 <= want <= 10:  # off the scale: no score, the original's value kept
            assert score is None and error.endswith(f"; as published: {want:g}")
        else:
            assert score == want, (text, score, want, error)
        if len(asked) > 1:
            assert fallback == replies[1] and method in ("original:fallback", None)
    if version == NEW:  # banker's rounding, the last FINAL SCORE, the slash average and the fallback call
        assert [stored[f"q{i}"][0] for i in range(7)] == [8, 4, 7, 6, None, 9, 5]
        # Shaberi's grammar on the same replies: no rounding, two disagreeing verdicts or two slash scores are none
        assert [stored[f"q{i}"][1] for i in range(7)] == [7.5, 4, None, 6.5, None, None, 5]
        assert calls == 7 + 7 + 1  # the candidate, the judge, one fallback call: nothing asked twice
    else:  # 2025-04 reads only 評価：[[n]], asks no fallback
        assert [stored[f"q{i}"][0] for i in range(7)] == [None] * 6 + [5]
    differ = query(tmp_path / "r", "SELECT n_readings_differ FROM benchmark_scores WHERE judge = '* [' || "
                                   f"'{label}' || ']'")
    expected_differ = sum(1 for q, (s, o, *_) in stored.items() if s != o)
    assert differ == [(expected_differ,)] and expected_differ > 0
    shown = shaberi("view", "--tag", "default", "--results-dir", str(tmp_path / "r"), "--format", "csv")
    assert f"Shaberi's reading differs on {expected_differ}" in shown.stdout, shown.stdout
    page = shaberi("report", "--tag", "default", "--results-dir", str(tmp_path / "r"), "--out",
                   str(tmp_path / "r.html"))
    assert page.returncode == 0 and f"reading differs on {expected_differ}" in (tmp_path / "r.html").read_text()
    # a second run reads every judgement as stored: nothing is asked again, not even the unread ones
    with LoopbackServer(judges=(GPT41,)) as again:
        out = evaluate(again, tmp_path / "r", data, clone, [GPT41], ["rakuda"], stages=["judge"])
        assert again.stats()["calls"] == 0 and out.judging.reused == 7
    # reprocess replays the stored replies through the clone: the same scores, no call
    from shaberi.pipeline import reprocess_run
    before = query(tmp_path / "r", "SELECT question_id, score, shaberi_score FROM judgements ORDER BY 1")
    assert asyncio.run(reprocess_run(tmp_path / "r", "fake-model", "default", promptsets.load(str(clone)))) == 0
    done = shaberi("run", "--model", "fake-model", "--reprocess", "--results-dir", str(tmp_path / "r"))
    assert done.returncode == 0 and f"note: 7 judgements under {label} left as they are" in done.stderr
    assert query(tmp_path / "r", "SELECT question_id, score, shaberi_score FROM judgements ORDER BY 1") == before


def _legacy_outputs(data_dir: Path) -> list[tuple[str, str]]:
    """(benchmark, judge_output) of every legacy judgement that kept the judge's reply."""
    folders = {dataset.replace("/", "__"): name for name, (dataset, _, _) in DATASETS.items()}
    found = []
    for path in sorted((data_dir / "legacy").rglob("judgements/*/*/*.json")):
        if path.parent.name not in folders:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            score, output = row.get("score"), row.get("judge_output")
            if isinstance(score, dict):
                output = score.get("judge_output", output)
            if isinstance(output, str):
                found.append((folders[path.parent.name], output))
    return found


@pytest.mark.parametrize("version", [OLD, NEW])
def test_shaberis_original_reading_equals_the_originals_on_every_legacy_judge_output(data_dir, version):
    from shaberi import benchmarks as bm
    from shaberi.judging.original import Ask
    from shaberi.judging.stage import original_extraction

    outputs = _legacy_outputs(data_dir)
    assert len(outputs) >= 380
    original, clone = Original(data_dir / "original" / version), promptsets.load(
        str(data_dir / "original" / version)).clone
    row = {"Question": "質問", "ModelAnswer": "回答", "Answer": None, "Criteria": "", "output": "", "eval_aspect": ""}
    read = Counter()
    for benchmark, output in outputs:
        _, theirs = original.calls(benchmark, row, [output, RuntimeError("no fallback reply")])
        step = clone.read(benchmark, row, GPT41, [output])
        ours = None if isinstance(step, Ask) else step.score
        assert ours == theirs and (ours is None or type(theirs) is int), (benchmark, output[-200:])
        found = original_extraction(None if isinstance(step, Ask) else step, 1, bm.BENCHMARKS[benchmark])
        low, high = bm.BENCHMARKS[benchmark].scale
        assert found.score == (theirs if theirs is not None and low <= theirs <= high else None)
        read[theirs is not None] += 1
    # these replies were made under the 2025-11 prompts: its reading finds most scores, 2025-04's (<score>, 評価：[[n]])
    # almost none; either way Shaberi's reading under that rule is the original's own
    assert read[True] > 300 if version == NEW else read[True] < 50, read


def _copy_clone(data_dir: Path, tmp_path: Path, version: str = NEW) -> Path:
    clone = tmp_path / "clone"
    shutil.copytree(data_dir / "original" / version, clone)
    for f in clone.iterdir():
        f.chmod(0o644)
    clone.chmod(0o755)
    return clone


def test_bad_prompt_sets_are_one_line_and_write_nothing(data_dir, tmp_path, server):
    base = ["run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data_dir),
            "--results-dir", str(tmp_path / "r"), "--judge", GPT41, "--limit", "1"]
    broken = _copy_clone(data_dir, tmp_path)
    config = broken / "evaluation_datasets_config.py"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "    question = row['Question']\n    answer = row['output']",
        "    raise KeyError('output')\n    question = row['Question']\n    answer = row['output']"), encoding="utf-8")
    (tmp_path / "empty").mkdir()
    syntax = _copy_clone(data_dir, tmp_path / "s")
    (syntax / "evaluation_datasets_config.py").write_text("def broken(:\n", encoding="utf-8")
    cases = [
        (["--judge-prompts", str(tmp_path / "missing")], "no such folder"),
        (["--judge-prompts", str(tmp_path / "empty")], "neither a clone of the original Shaberi"),
        (["--judge-prompts", str(broken)], "get_elyza_prompt raised KeyError"),
        (["--judge-prompts", str(syntax)], "importing it raised SyntaxError"),
        (["--judge-prompts", str(data_dir / "original" / NEW), "--judge-temperature", "0.5"],
         "--judge-temperature does not apply"),
        (["--judge-prompts", str(data_dir / "original" / NEW), "--judge-temperature", "0"],  # the default, given
         "--judge-temperature does not apply"),
        (["--judge-prompts", str(data_dir / "original" / NEW), "--benchmark", "mt_bench_full"],
         "the original judges no mt_bench_full"),
        (["--judge-prompts", str(config)], "not a folder"),
    ]
    for extra, said in cases:
        done = shaberi(*base, *extra)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and said in lines[0], (extra, done.stderr)
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "r").exists()
    assert server.stats()["calls"] == 0
    alone = shaberi("run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data_dir),
                    "--results-dir", str(tmp_path / "r"), "--judge-prompts", str(data_dir / "original" / NEW))
    assert alone.returncode == 2 and "give --judge MODEL too" in alone.stderr and not (tmp_path / "r").exists()
    tree = str(data_dir / "legacy" / "subset20")
    for spec, said in [(f"nosuch={data_dir / 'original' / OLD}", "has no judge_nosuch folder"),
                       (f"={data_dir / 'original' / OLD}", "give JUDGE=PATH")]:
        done = shaberi("import-legacy", tree, "--results-dir", str(tmp_path / "r"), "--judge-prompts", spec)
        assert done.returncode == 2 and said in done.stderr and not (tmp_path / "r").exists(), done.stderr


def test_provenance_is_recorded_in_runs_the_manifest_and_the_export(data_dir, tmp_path):
    clone = _copy_clone(data_dir, tmp_path)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "original"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    with LoopbackServer(judges=(GPT41,)) as server:
        done = shaberi("run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data_dir),
                       "--results-dir", str(tmp_path / "r"), "--judge", GPT41, "--judge-prompts", str(clone),
                       "--benchmark", "rakuda,tengu", "--limit", "2")
    assert done.returncode == 0, done.stderr
    label = promptsets.load(str(clone)).label
    assert label == f"original:{promptsets.load(str(data_dir / 'original' / NEW)).clone.prompt_hash()[:7]}"
    ((judges, provenance),) = query(tmp_path / "r", "SELECT judges, judge_prompts FROM runs")
    assert judges == [f"{GPT41} [{label}]@{server.base_url}"]
    entry = orjson.loads(provenance)[label]
    files = {n: hashlib.sha256((clone / n).read_bytes()).hexdigest()
             for n in ("evaluation_datasets_config.py", "llm_functions.py", "judge_answers.py")}
    assert (entry["kind"], entry["path"], entry["commit"], entry["dirty"], entry["files"]) == (
        "original", str(clone), commit, False, files)
    assert {"get_tengu_prompt", "tengu_bench_evaluator", "_fallback_score_from_analysis"} <= set(entry["functions"])
    assert entry["requests"] == {GPT41: {"api": "chat", "temperature": 0, "max_tokens": 1024}}
    folder = next((tmp_path / "r").rglob("manifest.json")).parent
    assert orjson.loads((folder / "manifest.json").read_bytes())["judge_prompts"][label]["commit"] == commit
    exported = [orjson.loads(line) for f in (folder / "artifacts" / "shaberi" / "judgements").rglob("*.jsonl")
                for line in f.read_bytes().splitlines()]
    assert len(exported) == 4 and {(e["judge_model"], e["prompt_set"]) for e in exported} == {
        (f"{GPT41} [{label}]", label)}
    # a commit that changes no judging file changes nothing: the same label, nothing judged again
    (clone / "README.md").write_text("notes\n", encoding="utf-8")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "docs"], check=True)
    assert promptsets.load(str(clone)).label == label
    # an edit to the clone's prompts is another prompt set: labelled by content, judged again
    config = clone / "evaluation_datasets_config.py"
    config.write_text(config.read_text(encoding="utf-8").replace("あなたは採点者です。", "あなたは採点者です！"),
                      encoding="utf-8")
    dirty = promptsets.load(str(clone))
    assert dirty.clone.dirty and dirty.label == f"original:{dirty.clone.prompt_hash()[:7]}" != label
    # without git, every judging file is in the label: a copy whose request code differs is another prompt set
    copy, other = _copy_clone(data_dir, tmp_path / "a"), _copy_clone(data_dir, tmp_path / "b")
    llm = other / "llm_functions.py"
    llm.write_text(llm.read_text(encoding="utf-8").replace("evaluation_max_tokens = 1024",
                                                           "evaluation_max_tokens = 2048"), encoding="utf-8")
    assert promptsets.load(str(copy)).label != promptsets.load(str(other)).label
    assert promptsets.load(str(other)).clone.request(GPT41).fields["max_tokens"] == 2048


def test_a_folder_of_templates_is_a_prompt_set_of_its_own_beside_shaberis(data_dir, tmp_path, server):
    team = tmp_path / "team"
    shutil.copytree(Path(__file__).resolve().parent.parent / "prompts" / "judging", team)
    primary = team / "rakuda" / "primary.jinja"
    primary.write_text(primary.read_text(encoding="utf-8").replace("## 採点する回答", "## 採点する回答（チーム版）"),
                       encoding="utf-8")
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2"])
    common = dict(model="m", base_url=server.base_url, results_dir=tmp_path / "r", data_dir=data,
                  benchmarks=["rakuda"], judges=[ModelAt("j", server.base_url)], client=FAST)
    asyncio.run(run(RunRequest(**common)))
    server.reset()
    asyncio.run(run(RunRequest(**common, judge_prompts=promptsets.load(str(team)))))
    team_requests = server.requests()
    assert len(team_requests) == 2 and all("（チーム版）" in m[-1]["content"] for m in team_requests)
    rows = query(tmp_path / "r", "SELECT judge, prompt_set, count(*) FROM judgements GROUP BY ALL ORDER BY 1")
    assert rows == [("j", None, 2), ("j [templates:team]", "templates:team", 2)]
    pooled = query(tmp_path / "r", "SELECT judge, n FROM benchmark_scores WHERE judge LIKE '*%' ORDER BY 1")
    assert pooled == [("*", 2), ("* [templates:team]", 2)]  # never pooled together
    shown = shaberi("view", "--tag", "default", "--results-dir", str(tmp_path / "r"), "--judge", "* [templates:team]")
    assert shown.returncode == 0 and "judge: * [templates:team]" in shown.stdout, shown.stderr
    # another folder of the same name would take its judgements over: refused, nothing asked
    elsewhere = tmp_path / "other" / "team"
    shutil.copytree(team, elsewhere)
    server.reset()
    done = shaberi("run", "--model", "m", "--data-dir", str(data), "--results-dir", str(tmp_path / "r"),
                   "--benchmark", "rakuda", "--stages", "judge", "--judge", f"j@{server.base_url}",
                   "--judge-prompts", str(elsewhere))
    assert done.returncode == 2 and "rename one of the two folders" in done.stderr and server.stats()["calls"] == 0
    # a template that does not compile is bad input before any call, named, and nothing is written
    broken = tmp_path / "broken"
    shutil.copytree(team, broken)
    (broken / "rakuda" / "primary.jinja").write_text("{% if %}", encoding="utf-8")
    done = shaberi("run", "--model", "m", "--base-url", server.base_url, "--data-dir", str(data), "--results-dir",
                   str(tmp_path / "r2"), "--benchmark", "rakuda", "--judge", "j", "--judge-prompts", str(broken))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "rakuda/primary.jinja, line 1 cannot be rendered" in lines[0]
    assert not (tmp_path / "r2").exists() and server.stats()["calls"] == 0
    (broken / "rakuda" / "primary.jinja").write_bytes(b"\xff\xfe\x00bad")
    done = shaberi("run", "--model", "m", "--base-url", server.base_url, "--data-dir", str(data), "--results-dir",
                   str(tmp_path / "r2"), "--benchmark", "rakuda", "--judge", "j", "--judge-prompts", str(broken))
    assert done.returncode == 2 and "is not UTF-8 text" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r2").exists()


def _judged_twice(data_dir: Path, tmp_path: Path, server: LoopbackServer, clone: Path) -> Path:
    """Ten questions of each benchmark answered once, judged by one judge under Shaberi's prompts and under the
    clone's (``--stages judge --judge-prompts``)."""
    results = tmp_path / "r"
    common = ["--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data_dir), "--results-dir",
              str(results), "--tag", "t", "--judge", GPT41, "--limit", "10"]
    assert shaberi("run", *common).returncode == 0
    done = shaberi("run", *common, "--stages", "judge", "--judge-prompts", str(clone))
    assert done.returncode == 0, done.stderr
    return results


def test_compare_shows_what_changing_prompts_does_to_the_same_answers(data_dir, tmp_path):
    import numpy as np

    clone = data_dir / "original" / NEW
    label = promptsets.load(str(clone)).label
    with LoopbackServer(judges=(GPT41,)) as server:
        results = _judged_twice(data_dir, tmp_path, server, clone)
        assert server.stats()["calls"] == 40 + 40 + 40  # answers, Shaberi's judging, the original's
    qualified = f"{GPT41} [{label}]"
    plain = shaberi("compare", "t", "t", "--results-dir", str(results))
    assert plain.returncode == 2 and "name another tag" in plain.stderr  # one judge, two prompt sets: asked by name
    done = shaberi("compare", "t", "t", "--judge-a", GPT41, "--judge-b", qualified, "--results-dir", str(results),
                   "--format", "json")
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert (report["a"]["judge"], report["b"]["judge"]) == (GPT41, qualified)
    scores = query(results, "SELECT benchmark, question_id, judge, score_10 FROM scores")
    *benchmarks, overall = report["benchmarks"]
    assert len(benchmarks) == 4 and overall["title"] == "Overall" and report["family"] == 5
    for c in benchmarks:
        by = {(q, j): s for b, q, j, s in scores if b == c["benchmark"]}
        paired = sorted(q for q, j in by if j == GPT41 and (q, qualified) in by and by[(q, GPT41)] is not None
                        and by[(q, qualified)] is not None)
        d = np.array([by[(q, qualified)] - by[(q, GPT41)] for q in paired])
        assert c["n"] == len(paired) == 10 and c["diff"] == pytest.approx(d.mean(), abs=1e-9)
        # the test, recomputed: scipy's exact sign-flip test, and the interval the shifts it does not reject at the
        # family's level (5 rows)
        assert c["p"] == pytest.approx(scipy_p([d]), abs=1e-12)
        if c["ci_low"] is not None:
            assert scipy_p([d], c["ci_low"] + 1e-6) >= 0.01 > scipy_p([d], c["ci_low"] - 1e-6)
    assert overall["diff"] == pytest.approx(np.mean([c["diff"] for c in benchmarks]), abs=1e-9)
    # two tags judged under different prompt sets share no judge: refused, never pooled
    with LoopbackServer(judges=(GPT41,)) as server:
        assert shaberi("run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data_dir),
                       "--results-dir", str(results), "--tag", "u", "--judge", GPT41, "--limit", "10",
                       "--judge-prompts", str(clone)).returncode == 0
    mixed = shaberi("compare", "t", "u", "--judge", GPT41, "--results-dir", str(results))
    assert mixed.returncode == 2 and f"judge {GPT41!r} has no judgements for 'u'" in mixed.stderr


def test_rejudge_under_a_prompt_set_asks_again_and_keeps_the_history(data_dir, tmp_path):
    clone = data_dir / "original" / NEW
    label = promptsets.load(str(clone)).label
    with LoopbackServer(judges=(GPT41,)) as server:
        results = _judged_twice(data_dir, tmp_path, server, clone)
        server.reset()
        again = shaberi("run", "--model", "fake-model", "--data-dir", str(data_dir), "--results-dir", str(results),
                        "--tag", "t", "--judge", f"{GPT41}@{server.base_url}", "--rejudge", "--judge-prompts",
                        str(clone))
        assert again.returncode == 0, again.stderr
        assert server.stats()["calls"] == 40  # every answer asked again under the clone's prompts, nothing else
    rows = query(results, "SELECT judge, lineage, count(*) FROM judgement_history GROUP BY ALL ORDER BY ALL")
    assert rows == [(GPT41, "current", 40), (f"{GPT41} [{label}]", "current", 40),
                    (f"{GPT41} [{label}]", "superseded", 40)]


def _ranked(rows: list[dict]) -> bool:
    """Complete rows first, then by Average (All), highest first: the board's one order."""
    keys = [(r["Complete"] != "4/4", -(r["Average (All)"] or 0)) for r in rows]
    return keys == sorted(keys)


def test_a_plain_legacy_import_and_a_new_run_under_the_originals_prompts_share_one_leaderboard(data_dir, tmp_path):
    """``import-legacy`` without ``--judge-prompts``, then a run judged with the clone: one board ranks the new model
    among the imported ones in the same judge columns, each row labelled with its prompt set; re-imported naming
    the prompts, no column that has data is empty."""
    old = data_dir / "original" / OLD
    label = promptsets.load(str(old)).label
    results = tmp_path / "r"
    tree = data_dir / "legacy" / "subset20"
    done = shaberi("import-legacy", str(tree), "--results-dir", str(results))
    assert done.returncode == 0, done.stderr
    with LoopbackServer(judges=(GPT41,)) as server:
        base = ["run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data_dir),
                "--results-dir", str(results), "--judge", GPT41, "--limit", "5"]
        assert shaberi(*base, "--tag", "new", "--judge-prompts", str(old)).returncode == 0
        assert shaberi(*base, "--tag", "own").returncode == 0
    shown = shaberi("leaderboard", "--tag", "legacy,new,own", "--results-dir", str(results), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    rows = orjson.loads(shown.stdout)
    assert not [c for c in rows[0] if "[" in c]  # one set of judge columns: no prompt set's own
    legacy_gpt41 = sorted({p.stem.replace("__", "/") for p in (
        tree / "data" / "judgements" / f"judge_{GPT41}").rglob("*.json")})
    in_gpt41 = sorted((r["Tag"], r["model_name"], r["Prompts"]) for r in rows if r["Average (GPT4.1)"] is not None)
    assert in_gpt41 == sorted([("legacy", m, "unknown") for m in legacy_gpt41]
                              + [("new", "fake-model", label), ("own", "fake-model", "shaberi")])
    assert len(rows) == len({(r["Tag"], r["model_name"]) for r in rows})  # one prompt set per run: a row each
    assert _ranked(rows)
    new = next(r for r in rows if r["Tag"] == "new")
    ((elyza,),) = query(results, "SELECT avg(j.score) * 2 FROM judgements j JOIN runs r USING (run_id) "
                                 f"WHERE r.tag = 'new' AND j.benchmark = 'elyza' AND j.judge = '{GPT41} [{label}]'")
    assert new["ELYZA 100 (GPT4.1)"] == pytest.approx(elyza, abs=1e-9)
    assert new["Average (All)"] == new["Average (GPT4.1)"]  # its one judge is its pool
    table = shaberi("leaderboard", "--tag", "legacy,new", "--results-dir", str(results), "--format", "markdown")
    assert table.returncode == 0 and "share the judge columns, each row's Prompts saying which" in table.stdout
    # re-imported naming the GPT-4.1 folder's prompts: its judgements join the new run's prompt set, the other
    # judges' stay unknown; every row's (All) pools its own set, so no column that has data is empty
    again = shaberi("import-legacy", str(tree), "--results-dir", str(results), "--judge-prompts", f"{GPT41}={old}")
    assert again.returncode == 0, again.stderr
    rows = orjson.loads(shaberi("leaderboard", "--tag", "legacy,new", "--results-dir", str(results),
                                "--format", "json").stdout)
    assert _ranked(rows) and {r["Prompts"] for r in rows} == {label, "unknown"}
    for r in rows:
        judged = [c for c, v in r.items() if c.startswith("Average (") and c != "Average (All)" and v is not None]
        assert judged and r["Average (All)"] is not None, r
        if r["Prompts"] == label:  # the GPT-4.1 judgements alone
            assert judged == ["Average (GPT4.1)"] and r["Average (All)"] == pytest.approx(r["Average (GPT4.1)"])
    columns = [c for c in rows[0] if c.endswith(")") and "(" in c]
    assert all(any(r[c] is not None for r in rows) for c in columns if "(All)" in c)
    assert sorted(r["model_name"] for r in rows if r["Prompts"] == label) == sorted([*legacy_gpt41, "fake-model"])


# The flags that make Shaberi's generation request the original's (README: prompt sets), beside its defaults
# (the same system prompt, temperature 0.2, max_tokens 6000): its -fp default is 1.0 (its README says the
# published runs used 0.5: give that instead); 2025-04 also asked 2048 tokens and min_p 0.1.
PARITY = {OLD: ["--frequency-penalty", "1.0", "--max-tokens", "2048", "--extra-body", '{"min_p": 0.1}'],
          NEW: ["--frequency-penalty", "1.0"]}


@pytest.mark.parametrize("version", [OLD, NEW])
def test_the_readmes_generation_flags_send_what_the_original_sends(data_dir, tmp_path, version):
    original = Original(data_dir / "original" / version)
    with LoopbackServer() as server:
        done = shaberi("run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data_dir),
                       "--results-dir", str(tmp_path / "r"), *PARITY[version])
        assert done.returncode == 0, done.stderr
        sent = Counter(orjson.dumps({"messages": m, **b}, option=orjson.OPT_SORT_KEYS)
                       for m, b in zip(server.requests(), server.bodies(), strict=True))
    rows = {b: dataset_rows(data_dir, b) for b in DATASETS}
    asked = query(tmp_path / "r", "SELECT benchmark, question_id FROM questions")
    expected = Counter(orjson.dumps(original.generation(rows[b][q]["Question"], "fake-model", 1.0),
                                    option=orjson.OPT_SORT_KEYS) for b, q in asked)
    assert len(asked) == 315 and sent == expected


def test_a_clone_that_imports_another_model_calling_function_is_read_the_same(data_dir, tmp_path):
    """The first versions imported ``get_response_from_openai`` from llm_functions: any such function is the seam."""
    clone = _copy_clone(data_dir, tmp_path)
    config = clone / "evaluation_datasets_config.py"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "from llm_functions import get_model_response",
        "from llm_functions import get_response_from_openai as get_model_response"), encoding="utf-8")
    row = {"Question": "質問 {x}", "ModelAnswer": "回答  ", "category": "c", "question_id": "1", "id": 1}
    step = promptsets.load(str(clone)).clone.read("rakuda", row, GPT41, [])
    asked, _ = Original(data_dir / "original" / NEW).calls("rakuda", row, [])
    assert step.messages == asked[0]



def _clone_with(data_dir: Path, tmp_path: Path, name: str, old: str, new: str, file: str = "llm_functions.py",
                version: str = NEW) -> Path:
    clone = _copy_clone(data_dir, tmp_path / name, version)
    path = clone / file
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return clone


def test_what_a_clones_code_does_wrong_is_bad_input_or_an_unscored_judgement_never_a_lost_call(data_dir, tmp_path):
    """The clone's code is run: its client options are never sent or stored, an exit is not ours, and a call it
    asks after a reply it cannot take still lands in the tables."""
    data = write_rakuda(tmp_path / "d", ["<<judge: 採点できません>> 質問1"])
    secret = "sk-SECRETSECRET123456"
    keyed = _clone_with(data_dir, tmp_path, "keyed", "    response = client.chat.completions.create(\n"
                        "        messages=messages,\n        model=model_name,",
                        "    response = client.chat.completions.create(\n        messages=messages,\n"
                        "        model=model_name, api_key=os.environ.get('OPENAI_API_KEY'), timeout=30, "
                        "extra_headers={'x-a': '1'}, extra_body={'top_k': 20, 'api_key': "
                        "os.environ['OPENAI_API_KEY']},")
    exits = _clone_with(data_dir, tmp_path, "exits", "import re\n", "import re, sys\nsys.exit(0)\n",
                        "evaluation_datasets_config.py")
    asks_badly = _clone_with(data_dir, tmp_path, "asks", "        fallback_output = get_model_response(messages, "
                             "judge_model_name)", "        fallback_output = get_model_response(fallback_prompt, "
                             "judge_model_name)", "evaluation_datasets_config.py")
    raw_call = _clone_with(data_dir, tmp_path, "raw", "def get_response_from_openai(messages: list, model_name: str)"
                           " -> str:\n", "def get_response_from_openai(messages: list, model_name: str) -> str:\n"
                           "    return 'no client at all'\n")
    with LoopbackServer(judges=(GPT41,)) as server:
        base = ["run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data), "--benchmark",
                "rakuda", "--judge", GPT41]
        for clone, said in [(exits, "importing it raised SystemExit"), (raw_call, "makes no OpenAI client request")]:
            done = shaberi(*base, "--results-dir", str(tmp_path / clone.name), "--judge-prompts", str(clone))
            assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, (
                done.stderr)
            assert not (tmp_path / clone.name).exists()
        assert server.stats()["calls"] == 0
        done = shaberi(*base, "--results-dir", str(tmp_path / "k"), "--judge-prompts", str(keyed),
                       env={"OPENAI_API_KEY": secret})
        assert done.returncode == 1 and "nothing usable" in done.stderr, done.stderr  # the judge gave no score
        assert (f"note: judge {GPT41}: " in done.stderr and "passes api_key, extra_headers, timeout, top_k: not sent"
                in done.stderr), done.stderr
        sent = [b for b in server.bodies() if b["model"] == GPT41]
        assert sent == [{"model": GPT41, "temperature": 0, "max_tokens": 1024}] * 2  # and its fallback
        assert not any(secret in str(b) for b in server.bodies())
        assert not any(secret.encode() in f.read_bytes() for f in (tmp_path / "k").rglob("*") if f.is_file())
        ((recorded,),) = query(tmp_path / "k", "SELECT judge_prompts FROM runs LIMIT 1")
        (recorded,) = orjson.loads(recorded).values()  # by the prompt set's label
        assert recorded["requests"] == {GPT41: {"api": "chat", "temperature": 0, "max_tokens": 1024}}
        assert recorded["dropped"] == {GPT41: ["api_key", "extra_headers", "timeout", "top_k"]}
        server.reset()
        done = shaberi(*base, "--results-dir", str(tmp_path / "a"), "--judge-prompts", str(asks_badly))
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert server.stats()["calls"] == 2  # the candidate, the judge: its fallback call was never sent
        ((error, requests),) = query(tmp_path / "a", "SELECT j.error, (SELECT sum(requests) FROM token_usage WHERE "
                                                     "stage = 'judging') FROM judgements j")
        assert requests == 1 and "not a list of {role, content} messages" in error  # the paid call is in the table


def test_a_clones_request_is_taken_only_with_the_originals_fields_and_never_with_a_key(monkeypatch):
    """Only temperature, max tokens and the Responses API's reasoning; a value holding a key in the environment, or
    shaped like one, is dropped too (by name: the value is nowhere)."""
    from shaberi.judging.original import _fields

    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    fields, dropped = _fields("responses", {
        "model": "m", "input": [], "temperature": 0, "max_output_tokens": 10, "reasoning": {"effort": "tok-1234567890"},
        "extra_body": {"api_key": "x", "top_k": 2}, "timeout": 3, "extra_headers": {"a": "b"}})
    assert fields == {"temperature": 0, "max_output_tokens": 10}
    assert dropped == ["api_key", "extra_headers", "reasoning", "timeout", "top_k"]
    fields, dropped = _fields("chat", {"temperature": "sk-abcdefghijklmnop", "max_tokens": 5,
                                                   "max_completion_tokens": object(), "extra_body": "x"})
    assert fields == {"max_tokens": 5} and dropped == ["extra_body", "max_completion_tokens", "temperature"]
    fields, dropped = _fields("responses", {"reasoning": {"effort": "none"}, "temperature": 0})
    assert fields == {"reasoning": {"effort": "none"}, "temperature": 0} and not dropped


def test_a_clone_that_exits_hangs_or_prints_at_import_is_one_line_before_any_call(data_dir, tmp_path):
    """The clone's code runs in a process of its own: an exit there (os._exit: no exception to catch) or a sleep is
    bad input naming the clone, before anything is written or paid; what it prints goes nowhere."""
    data = write_rakuda(tmp_path / "d", ["<<judge: 理由。\nFINAL SCORE: 7>> 質問1"])
    exits = _clone_with(data_dir, tmp_path, "exits", "import re\n", "import re, os\nos._exit(0)\n",
                        "evaluation_datasets_config.py")
    sleeps = _clone_with(data_dir, tmp_path, "sleeps", "import re\n", "import re, time\ntime.sleep(3600)\n",
                         "evaluation_datasets_config.py")
    prints = _clone_with(data_dir, tmp_path, "prints", "import re\n", "import re, os, sys\nprint('hello')\n"
                         "sys.stdout.write('{\"ready\": 1}\\n'); sys.__stdout__.write('x\\n')\n"
                         "os.write(1, b'junk\\n')\n", "evaluation_datasets_config.py")
    with LoopbackServer(judges=(GPT41,)) as server:
        base = ["run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data), "--benchmark",
                "rakuda", "--judge", GPT41]
        for clone, said in [(exits, "the clone's code exited (code 0) while starting"),
                            (sleeps, "the clone's code gave no answer within 2 s while starting")]:
            done = shaberi(*base, "--results-dir", str(tmp_path / clone.name), "--judge-prompts", str(clone),
                           env={"SHABERI_CLONE_TIMEOUT": "2"})
            assert done.returncode == 2 and said in done.stderr and str(clone) in done.stderr, done.stderr
            assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / clone.name).exists()
        assert server.stats()["calls"] == 0
        done = shaberi(*base, "--results-dir", str(tmp_path / "p"), "--judge-prompts", str(prints))
        assert done.returncode == 0 and not done.stdout.count("junk"), done.stderr
    assert query(tmp_path / "p", "SELECT score, parse_method FROM judgements") == [(7.0, "original")]


@pytest.mark.parametrize("fault", ["exits", "hangs"])
def test_a_clone_that_fails_mid_run_fails_the_stage_keeps_the_paid_reply_and_resumes(data_dir, tmp_path, fault):
    """The clone's evaluator dies (or hangs) the first time it reads a paid reply: the run fails (exit 1), the reply
    is kept, and the same command reads it without paying for it again."""
    marker = tmp_path / "failed-once"
    act = "os._exit(3)" if fault == "exits" else "time.sleep(3600)"
    clone = _clone_with(data_dir, tmp_path, "mid", "import re\n", "import re\n", "evaluation_datasets_config.py")
    config = clone / "evaluation_datasets_config.py"
    config.write_text(config.read_text(encoding="utf-8") + f"""

import os, time


def _once(fn):
    def evaluator(data, judge_model_name):
        result = fn(data, judge_model_name)  # asks the judge (stopped there) until it has the reply
        if not os.path.exists({str(marker)!r}):
            open({str(marker)!r}, "w").close()
            {act}
        return result
    evaluator.__name__ = fn.__name__
    return evaluator


for _entry in EVAL_MODEL_CONFIGS.values():
    _entry["evaluator_function"] = _once(_entry["evaluator_function"])
""", encoding="utf-8")
    data = write_rakuda(tmp_path / "d", ["<<judge: 理由。\nFINAL SCORE: 7>> 質問1"])
    with LoopbackServer(judges=(GPT41,)) as server:
        args = ["run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data),
                "--results-dir", str(tmp_path / "r"), "--benchmark", "rakuda", "--judge", GPT41,
                "--judge-prompts", str(clone)]
        failed = shaberi(*args, env={"SHABERI_CLONE_TIMEOUT": "3"})
        said = "exited (code 3)" if fault == "exits" else "gave no answer within 3 s"
        assert failed.returncode == 1 and said in failed.stderr and "Traceback" not in failed.stderr, failed.stderr
        assert server.stats()["calls"] == 2 and marker.exists()  # the answer and the judge's reply
        assert query(tmp_path / "r", "SELECT status FROM runs") == [("failed",)]
        done = shaberi(*args)
        assert done.returncode == 0, done.stderr
        assert server.stats()["calls"] == 2  # the paid reply was read again, not asked again
    assert query(tmp_path / "r", "SELECT score, parse_method FROM judgements") == [(7.0, "original")]
    assert query(tmp_path / "r", "SELECT sum(requests) FROM token_usage WHERE stage = 'judging'") == [(1,)]


def test_a_clone_that_fails_after_its_paid_fallback_reply_resumes_without_paying_for_either_again(data_dir, tmp_path):
    """The clone's process dies once it has both replies (the first unreadable, then its fallback's): the run fails,
    both paid replies are kept, and the same command reads them back: three calls in all, each counted once."""
    marker = tmp_path / "failed-once"
    clone = _clone_with(data_dir, tmp_path, "late", "import re\n", "import re\n", "evaluation_datasets_config.py")
    config = clone / "evaluation_datasets_config.py"
    config.write_text(config.read_text(encoding="utf-8") + f"""

import os


def _once(fn):
    def evaluator(data, judge_model_name):
        result = fn(data, judge_model_name)  # stopped at each reply it has not got yet: here, it has both
        if not os.path.exists({str(marker)!r}):
            open({str(marker)!r}, "w").close()
            os._exit(3)
        return result
    evaluator.__name__ = fn.__name__
    return evaluator


for _entry in EVAL_MODEL_CONFIGS.values():
    _entry["evaluator_function"] = _once(_entry["evaluator_function"])
""", encoding="utf-8")
    data = write_rakuda(tmp_path / "d", [f"<<judge@{GPT41}?[Judge evaluation]: FINAL SCORE: 6>> "
                                         "<<judge: 採点不能です>> 質問1"])
    with LoopbackServer(judges=(GPT41,)) as server:
        args = ["run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data),
                "--results-dir", str(tmp_path / "r"), "--benchmark", "rakuda", "--judge", GPT41,
                "--judge-prompts", str(clone)]
        failed = shaberi(*args)
        assert failed.returncode == 1 and "exited (code 3)" in failed.stderr, failed.stderr
        assert server.stats()["calls"] == 3 and marker.exists()  # the answer, the reply and its fallback
        done = shaberi(*args)
        assert done.returncode == 0, done.stderr
        assert server.stats()["calls"] == 3  # both paid replies read back, neither asked again
    assert query(tmp_path / "r", "SELECT score, parse_method, fallback_output FROM judgements") == [
        (6.0, "original:fallback", "FINAL SCORE: 6")]
    assert query(tmp_path / "r", "SELECT sum(requests) FROM token_usage WHERE stage = 'judging'") == [(2,)]


def test_an_evaluators_score_that_is_no_finite_number_is_no_score(data_dir):
    from shaberi.judging.original import _evaluate  # what the clone's process runs for each reading

    row = {"Question": "q", "ModelAnswer": "a", "category": "c", "question_id": "1", "id": 1}
    for returned in (10**400, float("inf"), float("nan"), True, "5", {"score": None}):
        step = _evaluate(lambda data, model, returned=returned: returned, None, row, GPT41, ["FINAL SCORE: 5"])
        assert step.score is None and (step.error is None) == (returned == {"score": None}), (returned, step)


def test_a_judge_answers_pattern_built_from_a_named_constant_is_read(data_dir, tmp_path):
    clone = _clone_with(data_dir, tmp_path, "named", "reasoning_pattern = re.compile(r'<(think|thinking|reason)>.*?"
                        "</(think|thinking|reason)>', re.DOTALL | re.IGNORECASE)",
                        "THINK = r'<think>.*?</think>'\nreasoning_pattern = re.compile(THINK, re.DOTALL)",
                        "judge_answers.py")
    assert promptsets.load(str(clone)).clone.think.pattern == "<think>.*?</think>"



def test_a_run_killed_before_the_originals_fallback_call_answers_asks_only_that_call_again(data_dir, tmp_path):
    from shaberi.judging.stage import AWAITING

    from .conftest import kill_when

    data = write_rakuda(tmp_path / "d", [f"<<judge@{GPT41}?[Judge evaluation]: FINAL SCORE: 6>> "
                                         "<<judge: 採点不能です>> [[fail:hang*1]] 質問1"])
    with LoopbackServer(judges=(GPT41,)) as server:
        args = ["run", "--model", "fake-model", "--base-url", server.base_url, "--data-dir", str(data),
                "--results-dir", str(tmp_path / "r"), "--benchmark", "rakuda", "--judge", GPT41, "--timeout", "2",
                "--max-retries", "1", "--judge-prompts", str(data_dir / "original" / NEW)]
        assert kill_when(server, args, calls=5) == 5  # killed while the original's fallback call hangs
        done = shaberi(*args)
        assert done.returncode == 0, done.stderr
        assert server.stats()["calls"] == 6
    assert query(tmp_path / "r", "SELECT score, parse_method, fallback_output FROM judgements") == [
        (6.0, "original:fallback", "FINAL SCORE: 6")]
    assert query(tmp_path / "r", "SELECT sum(requests) FROM token_usage WHERE stage = 'judging'") == [(3,)]
    assert query(tmp_path / "r", "SELECT error, lineage FROM judgement_history ORDER BY created_at") == [
        (AWAITING, "superseded"), (None, "current")]  # the paid reply, journaled before the kill, kept as history
    # the tokens counted once each: token_usage's are the judgement's own (its two calls), none of them again
    assert query(tmp_path / "r", "SELECT sum(prompt_tokens), sum(completion_tokens) FROM token_usage "
                                 "WHERE stage = 'judging'") == query(
        tmp_path / "r", "SELECT sum(prompt_tokens), sum(completion_tokens) FROM judgements")


def test_a_sweep_plan_judges_with_its_prompt_set(data_dir, tmp_path):
    clone = _copy_clone(data_dir, tmp_path)
    label = promptsets.load(str(clone)).label
    with LoopbackServer(judges=(GPT41,)) as server:
        plan = tmp_path / "plan.toml"
        plan.write_text(f"tag = 'wk'\nbenchmarks = ['rakuda']\nlimit = 2\ndata_dir = '{data_dir}'\n"
                        "judge_prompts = 'clone'\n"  # relative: to the plan's folder
                        f"[[judges]]\nmodel = '{GPT41}'\nbase_url = '{server.base_url}'\n"
                        f"[[models]]\nmodel = 'fake-model'\nbase_url = '{server.base_url}'\n", encoding="utf-8")
        done = shaberi("sweep", str(plan), "--local", "--results-dir", str(tmp_path / "r"), timeout=300)
        assert done.returncode == 0, done.stderr
    assert query(tmp_path / "r", "SELECT DISTINCT judge, prompt_set FROM judgements") == [(f"{GPT41} [{label}]", label)]
    ((provenance,),) = query(tmp_path / "r", "SELECT judge_prompts FROM runs")
    assert orjson.loads(provenance)[label]["path"] == str(clone)
