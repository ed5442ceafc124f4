"""One registry for every extension point, and plugins through entry points: the Registry's grammar and lazy
loading in process, then the example plugin (examples/shaberi-plugin-example) really installed with pip,
listed, chosen and used by the command line; a broken plugin refused in one line where it is needed, and
only there."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from shaberi import benchmarks as bm
from shaberi.ensemble.datasets import DATASETS
from shaberi.ensemble.graders import GRADERS, Grader, ModelGrader
from shaberi.ensemble.strategies import STRATEGIES
from shaberi.errors import PluginError, UsageError
from shaberi.passes import PASSES, Consulting, build
from shaberi.prompts import PROMPTS
from shaberi.registry import Registry

from .conftest import REPO, query, shaberi, write_rakuda
from .test_cli import assert_clean_refusal

EXAMPLE = REPO / "examples" / "shaberi-plugin-example"


# -- the Registry ----------------------------------------------------------------------------------------
@pytest.fixture
def widgets(tmp_path, monkeypatch):
    """A registry of widgets with two built-ins; ``widgets.plugin(name, module, source)`` makes ``module`` an entry
    point of its group, written from ``source`` (which may use ``REG``, the registry) when given."""
    home = types.ModuleType("widgets_home")
    home.REG = reg = Registry("widget", "test.widgets", takes_all=True)  # type: ignore[attr-defined]
    reg.register("first", 1)
    reg.register("second")(2)
    monkeypatch.setitem(sys.modules, "widgets_home", home)
    monkeypatch.syspath_prepend(str(tmp_path))
    points: list[importlib.metadata.EntryPoint] = []
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [e for e in points if e.group == group])
    modules: list[str] = []

    def plugin(name: str, module: str, source: str | None = None) -> None:
        if source is not None:
            (tmp_path / f"{module}.py").write_text("from widgets_home import REG\n" + source)
            modules.append(module)
        points.append(importlib.metadata.EntryPoint(name, module, "test.widgets"))

    reg.plugin = plugin  # type: ignore[attr-defined]
    yield reg
    for module in modules:
        sys.modules.pop(module, None)


def test_register_as_a_decorator_or_a_call_once_per_name(widgets):
    @widgets.register("third")
    def third() -> int:
        return 3

    assert widgets.names() == ["first", "second", "third"] and widgets["third"] is third
    assert "second" in widgets and "nope" not in widgets and widgets.get("nope") is None
    assert dict(widgets.items())["first"] == 1 and len(widgets) == 3
    with pytest.raises(ValueError, match="widget 'first' is registered already"):
        widgets.register("first", 10)
    with pytest.raises(KeyError, match="unknown widget 'nope'; registered: first, second, third"):
        widgets["nope"]


def test_resolve_is_the_command_line_grammar_with_one_error_listing_the_choices(widgets):
    assert widgets.resolve("all") == ["first", "second"]
    assert widgets.resolve(" second, first ,second,, ") == ["second", "first"]  # blanks dropped, each once
    assert widgets.resolve("all", ["second"]) == ["second"]
    with pytest.raises(UsageError, match=r"^unknown widget third, fourth; choose from: all, first, second$"):
        widgets.resolve("first,third,fourth")
    with pytest.raises(UsageError, match=r"^unknown widget ' , '; choose from: all, second \(opt-in: first\)$"):
        widgets.resolve(" , ", ["second"], ["first"])
    no_all = Registry("gadget", "test.gadgets")
    no_all.register("a", 1)
    with pytest.raises(UsageError, match=r"^unknown gadget all; choose from: a$"):
        no_all.resolve("all")


def test_plugins_load_on_the_first_read_once_after_the_builtins(widgets):
    widgets.plugin("extra", "widget_extra", "REG.register('third', 3)\nSEEN = list(REG)  # a read while loading\n")
    widgets.register("fourth", 4)  # registering reads nothing
    assert "widget_extra" not in sys.modules and widgets.plugins == []
    assert widgets.names() == ["first", "second", "fourth", "third"]
    assert sys.modules["widget_extra"].SEEN == ["first", "second", "fourth", "third"]
    assert [ep.name for ep in widgets.plugins] == ["extra"]
    assert widgets.resolve("all")[-1] == "third" and [ep.name for ep in widgets.plugins] == ["extra"]


def test_a_plugin_that_cannot_load_is_one_line_naming_it_on_every_read(widgets):
    widgets.plugin("gone", "no_such_module_for_shaberi")
    for _ in range(2):  # never half a registry: reading again fails again
        with pytest.raises(PluginError) as err:
            widgets.resolve("first")
        assert str(err.value) == ("plugin 'gone' (test.widgets = no_such_module_for_shaberi) cannot be loaded: "
                                  "ModuleNotFoundError: No module named 'no_such_module_for_shaberi'; fix or "
                                  "uninstall it")


def test_a_plugin_failing_inside_its_import_is_one_line_too(widgets):
    widgets.plugin("boom", "widget_boom", "raise RuntimeError('first line\\nsecond line')\n")
    with pytest.raises(PluginError, match=r"^plugin 'boom' .* RuntimeError: first line; fix or uninstall it$"):
        widgets.names()


def test_a_plugin_failing_half_way_or_exiting_leaves_nothing_registered(widgets):
    widgets.plugin("half", "widget_half", "REG.register('third', 3)\nREG.register('first', 1)\n")  # then a clash
    for _ in range(2):  # the second read names the clash again, not the half-registered 'third'
        with pytest.raises(PluginError, match="ValueError: widget 'first' is registered already"):
            widgets.names()
    assert "third" not in widgets._items


def test_a_plugin_that_exits_at_import_is_an_error_not_the_end_of_the_command(widgets):
    widgets.plugin("bye", "widget_bye", "raise SystemExit(0)\n")
    with pytest.raises(PluginError, match=r"^plugin 'bye' .* SystemExit: 0; fix or uninstall it$"):
        widgets.names()


def test_a_name_nothing_registered_is_one_line():
    from shaberi.registry import UnknownName

    with pytest.raises(UnknownName) as err:
        GRADERS["exact"]  # e.g. a cache graded by a plugin that is no longer installed
    assert isinstance(err.value, KeyError) and str(err.value).startswith("unknown grader 'exact'; registered: ")


def test_a_plugin_benchmark_never_changes_the_overall_score_and_brings_its_templates(tmp_path):
    from shaberi.benchmarks import benchmark
    from shaberi.errors import UsageError
    from shaberi.prompts import judging_hash, template_hash
    from shaberi.tables.sql import connect

    benchmark("extra_b", scale=(1, 10), data={"file": "ja/extra_b", "columns": ["q"]})(lambda rows: [])
    try:
        info = dict(connect(tmp_path).execute("SELECT benchmark, in_overall FROM benchmark_info").fetchall())
        assert info == {"elyza": True, "tengu": True, "mt_bench": True, "rakuda": True, "mt_bench_full": False,
                        "mt_bench_80": False, "extra_b": False}
        with pytest.raises(UsageError, match=r"^no template generation/extra_b.jinja in .*docs/reference/plugins.md"):
            template_hash("generation/extra_b.jinja")
        with pytest.raises(UsageError, match=r"^no template judging/extra_b/primary.jinja"):
            judging_hash("extra_b")
    finally:
        bm.BENCHMARKS.pop("extra_b")


def test_every_extension_point_is_a_registry_with_the_builtins_in_their_old_order():
    groups = {r.group: r.names() for r in (bm.BENCHMARKS, DATASETS, GRADERS, STRATEGIES, PASSES, PROMPTS)}
    assert groups == {
        "shaberi.benchmarks": ["elyza", "mt_bench", "mt_bench_80", "mt_bench_full", "rakuda", "tengu"],
        "shaberi.datasets": ["arc_challenge", "arc_easy", "gpqa", "gsm8k", "hallumix", "hellaswag", "hle",
                             "math500", "mmlu_pro", "simpleqa", "truthfulqa"],
        "shaberi.graders": ["llm", "math", "mcq", "numeric"],
        "shaberi.strategies": ["council", "elo", "majority", "standard"],
        "shaberi.passes": ["format_validation", "lang_mixing", "repetition", "safety_check"],
        "shaberi.prompts": [],
    }
    assert bm.resolve("all") == ["elyza", "tengu", "mt_bench", "rakuda"]  # data/datasets.toml's order
    assert [isinstance(g, Grader) for g in GRADERS.values()] == [False, True, True, True]
    assert [isinstance(g, ModelGrader) for g in GRADERS.values()] == [True, False, False, False]
    assert [isinstance(p, Consulting) for p in build("lang_mixing,repetition")] == [True, False]


# -- the example plugin, installed -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> dict[str, str]:
    """The environment of a shaberi with examples/shaberi-plugin-example installed (pip, offline)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", "--no-compile", "--target", str(target), str(EXAMPLE)],
                   check=True, capture_output=True, text=True, timeout=300)
    assert (target / "shaberi_plugin_example" / "prompts" / "judging" / "kotowaza" / "primary.jinja").is_file()
    return {"PYTHONPATH": os.pathsep.join([str(target), str(REPO)])}


def test_the_plugin_is_listed_after_the_builtins_and_offered_as_a_choice(plugin, server, tmp_path):
    listed = shaberi("list", env=plugin)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "benchmarks: elyza, mt_bench, mt_bench_80, mt_bench_full, rakuda, tengu, kotowaza",
        "datasets: arc_challenge, arc_easy, gpqa, gsm8k, hallumix, hellaswag, hle, math500, mmlu_pro, simpleqa, "
        "truthfulqa, capitals",
        "graders: llm, math, mcq, numeric, exact",
        "strategies: council, elo, majority, standard, shortest",
        "passes: format_validation, lang_mixing, repetition, safety_check, exclamation",
        "prompt folders: shaberi-plugin-example",
        "plugin example = shaberi_plugin_example (shaberi-plugin-example 0.1.0): shaberi.benchmarks, "
        "shaberi.datasets, shaberi.graders, shaberi.strategies, shaberi.passes, shaberi.prompts",
    ]
    without = shaberi("list")
    assert "kotowaza" not in without.stdout and "plugin " not in without.stdout
    data = write_rakuda(tmp_path / "d", ["質問です"])
    args = ["run", "--model", "m", "--base-url", server.base_url, "--data-dir", str(data), "--results-dir",
            str(tmp_path)]
    assert_clean_refusal(shaberi(*args, "--benchmark", "nope", env=plugin), tmp_path,
                         "choose from: all, elyza, tengu, mt_bench, rakuda (opt-in: mt_bench_full, mt_bench_80, "
                         "kotowaza)")
    assert_clean_refusal(shaberi(*args, "--benchmark", "rakuda", "--passes", "nope", env=plugin), tmp_path,
                         "unknown pass nope; choose from: format_validation, lang_mixing, repetition, safety_check, "
                         "exclamation")
    vote = shaberi("ensemble", "quick-eval", "--model", "m", "--strategy", "vote", "--results-dir", str(tmp_path),
                   env=plugin)
    assert_clean_refusal(vote, tmp_path, "unknown strategy vote; choose from: all, council, elo, majority, standard, "
                                         "shortest")


def test_the_plugin_benchmark_is_generated_and_judged_with_its_templates_and_its_pass_scores(plugin, server, tmp_path):
    (tmp_path / "d" / "ja").mkdir(parents=True)
    (tmp_path / "d" / "ja" / "kotowaza.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"id": 1, "proverb": "猿も木から落ちる<<answer: すごい！！！！ 本当に！>>"},
        {"id": 2, "proverb": "急がば回れ<<answer: 急ぐときほど安全な道を選べ、という意味です。>>"}]))
    results = tmp_path / "r"
    done = shaberi("run", "--model", "m", "--base-url", server.base_url, "--benchmark", "kotowaza", "--judge", "j",
                   "--passes", "exclamation,repetition", "--data-dir", str(tmp_path / "d"), "--results-dir",
                   str(results), env=plugin)
    assert done.returncode == 0, done.stderr
    assert "2 answers (0 reused, 2 called, 0 errors)" in done.stdout and "judged 2" in done.stdout
    assert "changing the score of: exclamation 1, repetition 0" in done.stdout
    asked = [m for messages in server.requests() for m in messages if m["role"] == "system"]
    assert any("ことわざの意味を説明" in m["content"] for m in asked)  # the plugin's judging template
    assert sum("日本語と日本文化に詳しい" in m["content"] for m in asked) == 2  # and its generation template
    assert query(results, "SELECT question_id, delta, reason FROM pass_deltas WHERE pass_name = 'exclamation' "
                          "ORDER BY 1") == [("1", -0.9, "5 exclamation marks"), ("2", 0.0, "")]
    scores = shaberi("sql", "SELECT title, n FROM benchmark_scores WHERE benchmark = 'kotowaza' AND judge = '*'",
                     "--format", "csv", "--results-dir", str(results), env=plugin)
    assert scores.stdout.splitlines() == ["title,n", "Kotowaza (example plugin),2"], scores.stderr


def test_the_plugin_dataset_grader_and_strategy_in_the_ensemble_pipeline(plugin, server, tmp_path):
    gt = tmp_path / "d" / "gt" / "capitals"
    gt.mkdir(parents=True)
    gold = ["Tokyo", "Paris", "Nairobi", "Lima"]
    (gt / "capitals.jsonl").write_text("\n".join(json.dumps({"country": f"country {i}<<answer: {c}>>", "capital": c})
                                                 for i, c in enumerate(gold)))
    args = ["--data-dir", str(tmp_path / "d"), "--results-dir", str(tmp_path / "r")]
    made = shaberi("ensemble", "generate-cache", "--model", "gen", "--base-url", server.base_url, "--datasets",
                   "capitals", "--n", "2", *args, env=plugin)
    assert made.returncode == 0, made.stderr
    assert server.stats()["calls"] == 8 and all(  # the plugin's generation template, which includes shaberi's
        "as briefly as possible" in messages[-1]["content"] for messages in server.requests())
    members = [["Tokyo", "The capital of France is Paris.", "Nairobi", "Cusco, though Lima is bigger."],
               ["Kyoto is the capital.", "Paris", "Mombasa", "Lima"],
               ["tokyo!", "Lyon", "The capital is Nairobi.", "Lima."]]
    files = []
    for i, answers in enumerate(members):
        files.append(tmp_path / f"member{i}.jsonl")
        files[-1].write_text("\n".join(json.dumps({"question_id": str(q), "response": r})
                                       for q, r in enumerate(answers, start=1)))
    assert shaberi("ensemble", "import-responses", "--dataset", "capitals", "--model", "three",
                   *map(str, files), *args, env=plugin).returncode == 0
    evaluated = shaberi("ensemble", "quick-eval", "--model", "three", "--strategy", "shortest,majority", "--out",
                        str(tmp_path / "q.json"), "--results-dir", str(tmp_path / "r"), env=plugin)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "capitals: grader exact: 20 graded, 0 unreadable" in evaluated.stdout
    result = json.loads((tmp_path / "q.json").read_text())["datasets"]["capitals"]
    assert result["baseline"] == [1, 0, 1, 0]  # member 0, graded by the whole reply
    assert result["strategies"]["shortest"]["correct"] == [1, 0, 1, 1]  # "Lyon" is the shortest for France
    assert query(tmp_path / "r", "SELECT DISTINCT judge FROM judgements") == [("exact:exact",)]
    (detail,) = query(tmp_path / "r", "SELECT reasoning FROM answers WHERE strategy = 'shortest' AND "
                                      "question_id = '2'")[0]
    assert json.loads(detail) == {"winner": 2, "lengths": [31, 5, 4]}


# -- a broken plugin -------------------------------------------------------------------------------------
def test_a_broken_plugin_stops_only_the_commands_that_read_its_registry(server, tmp_path):
    site = tmp_path / "site"
    info = site / "shaberi_plugin_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shaberi-plugin-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[shaberi.passes]\nbroken = shaberi_plugin_nowhere\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    data = write_rakuda(tmp_path / "d", ["質問です"])
    run = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--data-dir", str(data)]

    refused = shaberi(*run, "--passes", "repetition", "--results-dir", str(tmp_path / "r1"), env=env)
    assert_clean_refusal(refused, tmp_path / "r1", "error: plugin 'broken' (shaberi.passes = shaberi_plugin_nowhere, "
                         "from shaberi-plugin-broken 0.1) cannot be loaded: ModuleNotFoundError: No module named "
                         "'shaberi_plugin_nowhere'; fix or uninstall it")
    assert_clean_refusal(shaberi("list", env=env), tmp_path / "r1", "plugin 'broken'")
    fine = shaberi(*run, "--results-dir", str(tmp_path / "r2"), env=env)  # no pass: the registry is never read
    assert fine.returncode == 0 and "1 answers" in fine.stdout, fine.stderr
    counted = shaberi("sql", "SELECT count(*) AS n FROM answers", "--format", "csv", "--results-dir",
                      str(tmp_path / "r2"), env=env)
    assert counted.stdout.splitlines() == ["n", "1"], counted.stderr



# -- a plugin benchmark that would fail only when run ----------------------------------------------------
BAD_BENCHMARK = """
import os
from pathlib import Path

from shaberi.benchmarks import Question, benchmark
from shaberi.prompts import PROMPTS

PROMPTS.register("badbench", Path(__file__).parent / "badbench_prompts")
CASE = os.environ["BADBENCH_CASE"]
DATA = {"file": "ja/badbench", "columns": ["id", "q"], "id_columns": ["id"], "opt_in": True}
if CASE == "no_file":
    del DATA["file"]
elif CASE == "missing_file_without_source":
    DATA["file"] = "ja/nowhere"


@benchmark("badbench", scale=(1, 10), data=DATA)
def convert(rows):
    for row in rows:
        turns = [] if CASE == "empty_turns" else [row["q"]]
        yield Question("badbench", row["id"] if CASE == "int_id" else str(row["id"]), turns)
"""


@pytest.fixture
def badbench(tmp_path) -> tuple[dict[str, str], Path]:
    """The environment of a shaberi with plugin ``badbench`` installed (its templates the example plugin's), and
    a data dir holding its file; ``BADBENCH_CASE`` says how it is broken."""
    site = tmp_path / "site"
    info = site / "badbench-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: badbench\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[shaberi.benchmarks]\nbadbench = badbench\n"
                                           "[shaberi.prompts]\nbadbench = badbench\n")
    (site / "badbench.py").write_text(BAD_BENCHMARK)
    prompts = EXAMPLE / "shaberi_plugin_example" / "prompts"
    (site / "badbench_prompts" / "judging").mkdir(parents=True)
    (site / "badbench_prompts" / "generation").mkdir()
    shutil.copyfile(prompts / "generation" / "kotowaza.jinja", site / "badbench_prompts" / "generation" /
                    "badbench.jinja")
    shutil.copytree(prompts / "judging" / "kotowaza", site / "badbench_prompts" / "judging" / "badbench")
    (tmp_path / "d" / "ja").mkdir(parents=True)
    (tmp_path / "d" / "ja" / "badbench.jsonl").write_text('{"id": 1, "q": "猿も木から落ちる"}\n', encoding="utf-8")
    return {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}, tmp_path / "d"


@pytest.mark.parametrize(("case", "said"), [
    ("no_file", "plugin 'badbench' (shaberi.benchmarks = badbench, from badbench 0.1) cannot be loaded: ValueError: "
                "benchmark 'badbench': its data entry has no 'file'"),
    ("missing_file_without_source", "badbench: no dataset file at "),
    ("empty_turns", "badbench.jsonl: its Convert made a question (question_id '1') with no turns"),
    ("int_id", "its Convert made a question whose question_id is 1 (int), not a non-empty string"),
])
def test_a_plugin_benchmark_that_would_fail_when_run_is_refused_before_any_run_row(badbench, server, tmp_path, case,
                                                                                      said):
    env, data = badbench
    results = tmp_path / "r"
    proc = shaberi("run", "--model", "m", "--base-url", server.base_url, "--benchmark", "badbench", "--data-dir",
                   str(data), "--results-dir", str(results), env={**env, "BADBENCH_CASE": case})
    assert_clean_refusal(proc, results, said)
    assert not results.exists() or not any(results.rglob("*")), "no run row, no folder"
    assert server.stats()["calls"] == 0
    works = shaberi("run", "--model", "m", "--base-url", server.base_url, "--benchmark", "badbench", "--data-dir",
                    str(data), "--results-dir", str(results), env={**env, "BADBENCH_CASE": "fine"})
    assert works.returncode == 0 and "1 answers" in works.stdout, works.stderr  # the same plugin, not broken


def test_a_benchmark_registered_with_a_bad_data_entry_or_scale_is_refused_there():
    for data, said in [({"columns": ["q"]}, "its data entry has no 'file'"),
                       ({"file": "ja/x", "columns": "q"}, "data['columns'] must be a list of column names"),
                       ({"file": "", "columns": ["q"]}, "data['file'] must be a non-empty string"),
                       ({"file": "ja/x", "columns": ["q"], "hf_repo": "o/x"}, "no 'hf_revision' and no 'hf_file'")]:
        with pytest.raises(ValueError, match=re.escape(said)):
            bm.benchmark("bad_b", scale=(1, 10), data=data)(lambda rows: [])
    with pytest.raises(ValueError, match=r"scale must be \(low, high\), two integers with low < high"):
        bm.benchmark("bad_b", scale=(10, 1), data={"file": "ja/x", "columns": ["q"]})(lambda rows: [])
    assert "bad_b" not in bm.BENCHMARKS
