"""One registry for every extension point, and plugins through one entry point group (``shaberi``): the
Registry's grammar and lazy loading in process (one scan of the entry points for every registry), then the
example plugin (examples/shaberi-plugin-example) really installed with pip, listed, chosen and used by the
command line; a broken plugin, or one still listed in a group shaberi no longer reads, refused in one line."""

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
from shaberi.registry import GROUP, PLUGINS, RETIRED_GROUPS, Plugins, Registry

from .conftest import REPO, query, shaberi, write_rakuda
from .test_cli import assert_clean_refusal

EXAMPLE = REPO / "examples" / "shaberi-plugin-example"


# -- the Registry ----------------------------------------------------------------------------------------
@pytest.fixture
def widgets(tmp_path, monkeypatch):
    """A registry of widgets with two built-ins and one of gadgets, sharing the plugins of group ``test.widgets``
    (``test.old``: a retired group); ``widgets.plugin(name, module, source, group)`` makes ``module`` an entry
    point, written from ``source`` (which may use ``REG`` and ``GADGETS``, the registries) when given.
    ``widgets.scans`` counts the scans of the installed entry points."""
    home = types.ModuleType("widgets_home")
    plugins = Plugins("test.widgets", retired=("test.old",))
    home.REG = reg = Registry("widget", takes_all=True, plugins=plugins)  # type: ignore[attr-defined]
    home.GADGETS = Registry("gadget", plugins=plugins)  # type: ignore[attr-defined]
    reg.register("first", 1)
    reg.register("second")(2)
    monkeypatch.setitem(sys.modules, "widgets_home", home)
    monkeypatch.syspath_prepend(str(tmp_path))
    points: list[importlib.metadata.EntryPoint] = []
    scans = []

    def entry_points() -> importlib.metadata.EntryPoints:
        scans.append(1)
        return importlib.metadata.EntryPoints(points)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    modules: list[str] = []

    def plugin(name: str, module: str, source: str | None = None, group: str = "test.widgets") -> None:
        if source is not None:
            (tmp_path / f"{module}.py").write_text("from widgets_home import GADGETS, REG\n" + source)
            modules.append(module)
        points.append(importlib.metadata.EntryPoint(name, module, group))

    reg.plugin = plugin  # type: ignore[attr-defined]
    reg.gadgets = home.GADGETS  # type: ignore[attr-defined]
    reg.scans = scans  # type: ignore[attr-defined]
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
    no_all = Registry("gadget", plugins=Plugins("test.gadgets"))
    no_all.register("a", 1)
    with pytest.raises(UsageError, match=r"^unknown gadget all; choose from: a$"):
        no_all.resolve("all")


def test_plugins_load_on_the_first_read_once_after_the_builtins(widgets):
    widgets.plugin("extra", "widget_extra", "REG.register('third', 3)\nSEEN = list(REG)  # a read while loading\n")
    widgets.register("fourth", 4)  # registering reads nothing
    assert "widget_extra" not in sys.modules and widgets.source.loaded == [] and widgets.scans == []
    assert widgets.names() == ["first", "second", "fourth", "third"]
    assert sys.modules["widget_extra"].SEEN == ["first", "second", "fourth", "third"]
    assert [p.entry_point.name for p in widgets.source.loaded] == ["extra"]
    assert widgets.resolve("all")[-1] == "third" and [p.entry_point.name for p in widgets.source.loaded] == ["extra"]
    assert widgets.scans == [1]


def test_one_plugin_module_registers_into_every_registry_after_one_scan(widgets):
    widgets.plugin("both", "widget_both", "REG.register('third', 3)\nGADGETS.register('cog', 'c')\n")
    widgets.plugin("more", "widget_more", "GADGETS.register('gear', 'g')\n")
    assert widgets.gadgets.names() == ["cog", "gear"] and widgets.names() == ["first", "second", "third"]
    assert widgets.scans == [1]  # the first read of either registry scanned once, for both
    assert [(str(p), p.brought) for p in widgets.source.loaded] == [
        ("both = widget_both", [("widget", "third"), ("gadget", "cog")]), ("more = widget_more", [("gadget", "gear")])]
    assert [(str(p), name) for p, name in widgets.gadgets.plugin_items()] == [("both = widget_both", "cog"),
                                                                             ("more = widget_more", "gear")]


def test_a_plugin_listed_in_a_retired_group_is_one_line_saying_which_group_to_use(widgets):
    widgets.plugin("old", "widget_old", "REG.register('third', 3)\n", group="test.old")
    for _ in range(2):  # never silently without it
        with pytest.raises(PluginError) as err:
            widgets.names()
        assert str(err.value) == ("plugin 'old' (test.old = widget_old) is listed in entry point group test.old, which "
                                  "shaberi no longer reads: list its module once in group 'test.widgets' instead "
                                  "(docs/reference/plugins.md), or uninstall it")
    assert "widget_old" not in sys.modules


def test_a_plugin_listed_in_the_group_too_may_keep_its_retired_groups(widgets):
    """A plugin supporting older shaberis as well lists its module in the old groups and in the new one."""
    widgets.plugin("old", "widget_both_ways", "REG.register('third', 3)\n", group="test.old")
    widgets.plugin("old", "widget_both_ways")
    assert widgets.names() == ["first", "second", "third"]


def test_register_builds_the_item_with_the_kinds_make_and_passes_the_decorated_thing_through():
    made = Registry("thing", make=lambda name, fn, *, size: (name, fn(), size), plugins=Plugins("test.things"))

    @made.register("a", size=2)
    def a() -> str:
        return "A"

    assert a() == "A" and made["a"] == ("a", "A", 2)
    with pytest.raises(TypeError, match="a gadget takes no options: size"):
        Registry("gadget", plugins=Plugins("test.gadgets")).register("x", size=1)


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
    widgets.plugin("half", "widget_half", "GADGETS.register('cog', 1)\nREG.register('third', 3)\n"
                                          "REG.register('first', 1)\n")  # then a clash
    for _ in range(2):  # the second read names the clash again, not the half-registered 'third'
        with pytest.raises(PluginError, match="ValueError: widget 'first' is registered already"):
            widgets.names()
    assert "third" not in widgets._items and "cog" not in widgets.gadgets._items  # in no registry


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
    from shaberi.errors import UsageError
    from shaberi.prompts import judging_hash, template_hash
    from shaberi.tables.sql import connect

    bm.BENCHMARKS.register("extra_b", scale=(1, 10), data={"file": "ja/extra_b", "columns": ["q"]},
                           prompts=tmp_path)(lambda rows: [])
    try:
        assert PROMPTS["extra_b"] == tmp_path  # its template folder, which holds nothing
        info = dict(connect(tmp_path).execute("SELECT benchmark, in_overall FROM benchmark_info").fetchall())
        assert info == {"elyza": True, "tengu": True, "mt_bench": True, "rakuda": True, "mt_bench_full": False,
                        "mt_bench_80": False, "extra_b": False}
        with pytest.raises(UsageError, match=r"^no template generation/extra_b.jinja in .*docs/reference/plugins.md"):
            template_hash("generation/extra_b.jinja")
        with pytest.raises(UsageError, match=r"^no template judging/extra_b/primary.jinja"):
            judging_hash("extra_b")
    finally:
        bm.BENCHMARKS.pop("extra_b")
        PROMPTS.pop("extra_b")


def test_every_extension_point_is_a_registry_with_the_builtins_in_their_old_order():
    kinds = {r.kind: r.names() for r in (bm.BENCHMARKS, DATASETS, GRADERS, STRATEGIES, PASSES, PROMPTS)}
    assert kinds == {
        "benchmark": ["elyza", "tengu", "mt_bench", "rakuda", "mt_bench_full", "mt_bench_80"],
        "dataset": ["arc_challenge", "arc_easy", "gpqa", "gsm8k", "hallumix", "hellaswag", "hle",
                    "math500", "mmlu_pro", "simpleqa", "truthfulqa"],
        "grader": ["llm", "math", "mcq", "numeric"],
        "strategy": ["council", "elo", "majority", "standard"],
        "pass": ["format_validation", "lang_mixing", "repetition", "safety_check"],
        "prompt folder": [],
    }
    assert all(r.source is PLUGINS for r in (bm.BENCHMARKS, DATASETS, GRADERS, STRATEGIES, PASSES, PROMPTS))
    assert PLUGINS.group == GROUP == "shaberi" and "shaberi.passes" in RETIRED_GROUPS
    assert bm.resolve("all") == ["elyza", "tengu", "mt_bench", "rakuda"] == list(bm.OVERALL)
    assert [isinstance(g, Grader) for g in GRADERS.values()] == [False, True, True, True]
    assert [isinstance(g, ModelGrader) for g in GRADERS.values()] == [True, False, False, False]
    assert [isinstance(p, Consulting) for p in build("lang_mixing,repetition")] == [True, False]
    assert [STRATEGIES[n].name for n in STRATEGIES] == STRATEGIES.names()  # named where registered
    assert [PASSES[n].name for n in PASSES] == PASSES.names()


def test_a_builtin_benchmark_names_its_code_data_entry_and_templates_in_its_module():
    """Registered exactly as a plugin's: the module's ``BENCHMARKS.register`` call holds its data entry and
    its template folder, and the templates it needs are there."""
    for name, spec in bm.BENCHMARKS.items():
        module = sys.modules[spec.convert.__module__]
        assert module.__name__ == f"shaberi.benchmarks.{name}" and module.DATA is spec.data
        assert spec.prompts == bm.BUILTIN_PROMPTS
        assert (spec.prompts / "generation" / f"{name}.jinja").is_file()
        assert {"primary.jinja", "fallback.jinja"} <= {p.name for p in (spec.prompts / "judging" / name).iterdir()}
        assert f"prompts/generation/{name}.jinja" in module.__doc__


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
        "benchmarks: elyza, tengu, mt_bench, rakuda, mt_bench_full, mt_bench_80, kotowaza",
        "datasets: arc_challenge, arc_easy, gpqa, gsm8k, hallumix, hellaswag, hle, math500, mmlu_pro, simpleqa, "
        "truthfulqa, capitals",
        "graders: llm, math, mcq, numeric, exact",
        "strategies: council, elo, majority, standard, shortest",
        "passes: format_validation, lang_mixing, repetition, safety_check, exclamation",
        "prompt folders: shaberi-plugin-example",
        "plugin example = shaberi_plugin_example (shaberi-plugin-example 0.1.0): prompt folder "
        "shaberi-plugin-example, benchmark kotowaza, dataset capitals, grader exact, strategy shortest, pass "
        "exclamation",
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


def test_the_plugin_benchmark_is_compared_head_to_head_with_its_pairwise_template(plugin, server, tmp_path):
    (tmp_path / "d" / "ja").mkdir(parents=True)
    (tmp_path / "d" / "ja" / "kotowaza.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"id": 1, "proverb": "猿も木から落ちる"}, {"id": 2, "proverb": "急がば回れ"}]))
    results = tmp_path / "r"
    for model in ("m1", "m2"):
        made = shaberi("run", "--model", model, "--tag", "v1", "--base-url", server.base_url, "--benchmark",
                       "kotowaza", "--data-dir", str(tmp_path / "d"), "--results-dir", str(results), env=plugin)
        assert made.returncode == 0, made.stderr
    server.reset()
    rated = shaberi("pairwise", "--tags", "m1@v1,m2@v1", "--judge", f"pj@{server.base_url}", "--bootstrap", "20",
                    "--results-dir", str(results), env=plugin)
    assert rated.returncode == 0, rated.stderr
    asked = [messages for messages in server.requests() if "FINAL VERDICT" in messages[0]["content"]]
    assert len(asked) == 4  # two questions, both orders; the candidates are not called
    assert all("ことわざの意味を説明する二つ" in m[0]["content"] for m in asked)  # the plugin's pairwise template
    assert query(results, "SELECT count(*) FROM pairwise WHERE benchmark = 'kotowaza'") == [(4,)]


def test_a_plugin_template_past_a_render_bound_is_one_line_naming_it_before_any_call(plugin, server, tmp_path):
    """A plugin's templates are code Shaberi did not write: a generation or judging template that spins or grows
    without end is refused (exit 2) before any call, nothing written, in every command that renders it."""
    site = tmp_path / "site"
    shutil.copytree(plugin["PYTHONPATH"].split(os.pathsep)[0], site)
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    prompts = site / "shaberi_plugin_example" / "prompts"
    (tmp_path / "d" / "ja").mkdir(parents=True)
    (tmp_path / "d" / "ja" / "kotowaza.jsonl").write_text(json.dumps({"id": 1, "proverb": "急がば回れ"}))
    gt = tmp_path / "d" / "gt" / "capitals"
    gt.mkdir(parents=True)
    (gt / "capitals.jsonl").write_text(json.dumps({"country": "Japan", "capital": "Tokyo"}))
    run = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "kotowaza", "--judge", "j",
           "--data-dir", str(tmp_path / "d"), "--results-dir", str(tmp_path / "r")]
    cache = ["ensemble", "generate-cache", "--model", "gen", "--base-url", server.base_url, "--datasets", "capitals",
             "--n", "2", "--data-dir", str(tmp_path / "d"), "--results-dir", str(tmp_path / "r")]
    spin = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    for template, command, said in [
            ("generation/kotowaza.jinja", run, "longer than 2 s"),
            ("judging/kotowaza/primary.jinja", run, "MB of text"),
            ("generation/capitals.jinja", cache, "longer than 2 s")]:
        path = prompts / template
        kept = path.read_text(encoding="utf-8")
        path.write_text(kept + (spin if "2 s" in said else "{{ 'x' * 10**10 }}"), encoding="utf-8")
        done = shaberi(*command, env=env)
        path.write_text(kept, encoding="utf-8")
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and f"{template} cannot be rendered" in lines[0], done.stderr
        assert said in lines[0] and not (tmp_path / "r").exists() and server.stats()["calls"] == 0


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
def _installed(site: Path, dist: str, entry_points: str) -> dict[str, str]:
    """The environment of a shaberi with distribution ``dist`` installed in ``site`` with these entry points."""
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}


def test_a_broken_plugin_stops_the_commands_that_read_a_registry_in_one_line(server, tmp_path):
    env = _installed(tmp_path / "site", "shaberi-plugin-broken", "[shaberi]\nbroken = shaberi_plugin_nowhere\n")
    data = write_rakuda(tmp_path / "d", ["質問です"])
    run = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--data-dir", str(data)]

    refused = shaberi(*run, "--results-dir", str(tmp_path / "r1"), env=env)
    assert_clean_refusal(refused, tmp_path / "r1", "error: plugin 'broken' (shaberi = shaberi_plugin_nowhere, "
                         "from shaberi-plugin-broken 0.1) cannot be loaded: ModuleNotFoundError: No module named "
                         "'shaberi_plugin_nowhere'; fix or uninstall it")
    assert_clean_refusal(shaberi("list", env=env), tmp_path / "r1", "plugin 'broken'")
    assert server.stats()["calls"] == 0


def test_a_plugin_in_a_retired_group_is_refused_in_one_line_naming_the_group_to_use(server, tmp_path):
    old = "".join(f"[{group}]\nexample = shaberi_plugin_example\n" for group in RETIRED_GROUPS)
    env = _installed(tmp_path / "site", "shaberi-plugin-old", old)
    refused = shaberi("list", env=env)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    assert refused.stderr.strip() == (
        "error: plugin 'example' (shaberi.benchmarks = shaberi_plugin_example, from shaberi-plugin-old 0.1) is "
        "listed in entry point groups shaberi.benchmarks, shaberi.datasets, shaberi.graders, shaberi.passes, "
        "shaberi.prompts, shaberi.strategies, which shaberi no longer reads: list its module once in group "
        "'shaberi' instead (docs/reference/plugins.md), or uninstall it")



# -- a plugin benchmark that would fail only when run ----------------------------------------------------
BAD_BENCHMARK = """
import os
from pathlib import Path

from shaberi.benchmarks import BENCHMARKS, Question

CASE = os.environ["BADBENCH_CASE"]
DATA = {"file": "ja/badbench", "columns": ["id", "q"], "id_columns": ["id"], "opt_in": True}
if CASE == "no_file":
    del DATA["file"]
elif CASE == "missing_file_without_source":
    DATA["file"] = "ja/nowhere"


@BENCHMARKS.register("badbench", scale=(1, 10), data=DATA, prompts=Path(__file__).parent / "badbench_prompts")
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
    (info / "entry_points.txt").write_text("[shaberi]\nbadbench = badbench\n")
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
    ("no_file", "plugin 'badbench' (shaberi = badbench, from badbench 0.1) cannot be loaded: ValueError: "
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
    with pytest.raises(ValueError, match=r"^benchmark 'bad_b' has no data entry: register it with data="):
        bm.BENCHMARKS.register("bad_b", scale=(1, 10), prompts=bm.BUILTIN_PROMPTS)(lambda rows: [])
    with pytest.raises(ValueError, match=r"^benchmark 'bad_b' names no template folder: register it with prompts="):
        bm.BENCHMARKS.register("bad_b", scale=(1, 10), data={"file": "ja/x", "columns": ["q"]})(lambda rows: [])
    for data, said in [({"columns": ["q"]}, "its data entry has no 'file'"),
                       ({"file": "ja/x", "columns": "q"}, "data['columns'] must be a list of column names"),
                       ({"file": "", "columns": ["q"]}, "data['file'] must be a non-empty string"),
                       ({"file": "ja/x", "columns": ["q"], "hf_repo": "o/x"}, "no 'hf_revision' and no 'hf_file'")]:
        with pytest.raises(ValueError, match=re.escape(said)):
            bm.BENCHMARKS.register("bad_b", scale=(1, 10), data=data, prompts=bm.BUILTIN_PROMPTS)(lambda rows: [])
    with pytest.raises(ValueError, match=r"scale must be \(low, high\), two integers with low < high"):
        bm.BENCHMARKS.register("bad_b", scale=(10, 1), data={"file": "ja/x", "columns": ["q"]},
                               prompts=bm.BUILTIN_PROMPTS)(lambda rows: [])
    assert "bad_b" not in bm.BENCHMARKS
