"""The import graph: the orchestrator (``shaberi.pipeline``) sits on top; stages, the ensemble, the passes and
the reports never reach up to it (they share ``endpoints``, ``lineage`` and the stage modules instead). And SQL
lives in sql/ and tables/ only: no rule is restated in a Python string."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import shaberi

ROOT = Path(shaberi.__file__).parent
# the command line drives the orchestrator
# The command line, and the sweep's runner: it sits above the orchestrator, running it once per model and run.
CLI_SIDE = {"shaberi.cli.run", "shaberi.cli.local", "shaberi.cli.display", "shaberi.__main__", "shaberi.sweep.runner"}


def _imports() -> dict[str, set[str]]:
    """module -> the shaberi modules it imports (relative imports resolved)."""
    graph: dict[str, set[str]] = {}
    every = {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
             for p in ROOT.rglob("*.py")}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:  # annotations only: never imported when the code runs
                continue
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")
                base = base[:len(base) - node.level + 1] if node.level else []
                name = ".".join([*base, *([node.module] if node.module else [])])
                # ``from .. import benchmarks`` imports shaberi.benchmarks, not the package above it
                subs = {f"{name}.{a.name}" for a in node.names}
                found |= subs | ({name} if node.module or not subs <= every else set())
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[module] = {m for m in found if m.startswith("shaberi")}
    return graph


def test_nothing_but_the_command_line_and_the_sweep_import_the_orchestrator():
    graph = _imports()
    assert len(graph) > 50
    importers = sorted(m for m, deps in graph.items() if "shaberi.pipeline" in deps and m != "shaberi.pipeline")
    assert importers and set(importers) <= CLI_SIDE, importers
    assert "shaberi.llm.endpoints" in graph["shaberi.ensemble.commands"]


def test_the_layers_only_import_downwards():
    """llm/ and tables/ are the bottom: they never import a stage, the orchestrator, the reports, the ensemble
    or the command line; the reports never import a stage that calls a model."""
    graph = _imports()
    above = ("shaberi.generate", "shaberi.judging", "shaberi.passes", "shaberi.pipeline", "shaberi.reports",
             "shaberi.ensemble", "shaberi.cli", "shaberi.api")
    for layer, banned in [("shaberi.llm", above), ("shaberi.tables", above),
                          ("shaberi.reports", ("shaberi.generate", "shaberi.judging", "shaberi.pipeline", "shaberi.cli",
                                               "shaberi.llm"))]:
        found = sorted((m, d) for m, deps in graph.items() if m.startswith(layer) for d in deps
                       if d.startswith(banned))
        assert not found, found


def test_every_command_and_option_says_what_it_does():
    import typer

    from shaberi.cli import app

    def commands(group, path: tuple[str, ...] = ()):
        if hasattr(group, "commands"):  # a group (typer may carry its own click)
            for name, sub in group.commands.items():
                yield from commands(sub, (*path, name))
        else:
            yield " ".join(path), group

    found = list(commands(typer.main.get_command(app)))
    assert len(found) > 15
    assert [name for name, c in found if not (c.help or "").strip()] == []
    assert [(name, p.opts) for name, c in found for p in c.params
            if p.param_type_name == "option" and not p.hidden and not (p.help or "").strip()] == []


def test_format_is_validated_by_the_parser(tmp_path):
    """--format is an Enum: a value outside it ends in exit 2 before any result is read."""
    proc = subprocess.run([sys.executable, "-m", "shaberi", "view", "--format", "xml", "--results-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "'xml' is not one of" in proc.stderr and "markdown" in proc.stderr, proc.stderr


def test_every_bench_script_imports():
    """bench/ reads public names only, and a move inside the package cannot leave one behind unnoticed."""
    import importlib.util

    bench = ROOT.parent / "bench"
    sys.path.insert(0, str(bench))  # the scripts share bench/_common.py
    try:
        for path in sorted(bench.glob("*.py")):
            spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            spec.loader.exec_module(importlib.util.module_from_spec(spec))  # main() runs only as a script
    finally:
        sys.path.remove(str(bench))
    private = [(p.name, n) for p in bench.glob("*.py") for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
               if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("shaberi")
               for a in n.names if a.name.startswith("_")]
    assert not private, private


def test_no_module_but_the_client_encodes_a_request():
    """A request body is built by ``ChatClient.chat`` (``llm.client.encode`` → ``llm.params.chat_body``) only, so
    a model family's rules reach every call: nothing else names ``chat_body`` or writes a dict literal holding a
    model and its messages, and every ``.chat(`` call passes the model, the messages and a sampling, never bytes."""
    builders = {"shaberi.llm.client", "shaberi.llm.params", "shaberi.testing.server"}  # the server reads bodies
    found = []
    for path in ROOT.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        if module in builders:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name | ast.alias) and "chat_body" in (getattr(node, "id", None),
                                                                          getattr(node, "name", None)):
                found.append((module, node.lineno if isinstance(node, ast.Name) else "import", "chat_body"))
            elif isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if "model" in keys and keys & {"messages", "input"}:
                    found.append((module, node.lineno, "a request body"))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "chat"
                  and len(node.args) < 3):
                found.append((module, node.lineno, "chat() without (model, messages, sampling)"))
    assert not found, found


def test_errors_import_nothing_of_the_package_and_no_module_imports_itself_back():
    """``errors`` is the bottom (any module raises its errors: httpx's exception module); foreign errors are
    converted by type where they enter (``tables.failures``, the client), not recognised later by their text. And no
    import circle: a module reaching itself through what it imports (functions importing at call time included)."""
    graph = _imports()
    assert graph["shaberi.errors"] == set()
    modules = set(graph)
    edges = {m: {d for d in deps if d in modules and d != m} for m, deps in graph.items()}

    def reaches(start: str) -> set[str]:
        seen, stack = set(), list(edges[start])
        while stack:
            m = stack.pop()
            if m not in seen:
                seen.add(m)
                stack += edges[m]
        return seen

    # A package and its own modules (its __init__ importing them so that they register, they importing the
    # package's base class) are one concept, not a circle.
    circles = sorted(m for m in modules if any(
        not (d.startswith(f"{m}.") or m.startswith(f"{d}.")) and m in reaches(d) for d in edges[m]))
    assert not circles, circles


def _unit_imports(call_time: bool = False) -> dict[str, set[str]]:
    """shaberi's top-level units (a module of the package root, or a package) -> the units they import when
    they are imported or type-checked: statements at module level, TYPE_CHECKING blocks included; ``call_time``:
    the imports inside functions too."""
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        unit = ".".join(module.split(".")[:2])
        tree = ast.parse(path.read_text(encoding="utf-8"))
        statements = list(ast.walk(tree)) if call_time else [
            *tree.body, *(n for b in tree.body if isinstance(b, ast.If) and "TYPE_CHECKING" in ast.unparse(b.test)
                          for n in b.body)]
        for node in statements:
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")
                base = base[:len(base) - node.level + 1] if node.level else []
                names = ([".".join([*base, node.module])] if node.module
                         else [".".join([*base, a.name]) for a in node.names])
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            graph.setdefault(unit, set()).update(
                u for n in names if n.startswith("shaberi.") and (u := ".".join(n.split(".")[:2])) != unit)
    return graph


def test_no_cycle_between_the_top_level_modules_and_packages():
    """tables <-> run_info closed one (tables.selection read the run-id prefix from run_info, which types its
    rows with tables.rows): run ids now live in tables.ids. Imports at call time closed three more (budget <-> llm,
    benchmarks <-> prompts, judge -> reports -> pairwise -> judge). This walk finds a planted cycle, and none is
    left, at module level nor counting the imports inside functions."""
    graph, every = _unit_imports(), _unit_imports(call_time=True)
    assert "shaberi.tables" in graph["shaberi.run_info"] and len(graph) > 25
    assert "shaberi.pairwise" in every["shaberi.reports"] and "shaberi.judging" in every["shaberi.pairwise"]

    def cycles(g: dict[str, set[str]]) -> list[list[str]]:
        found: list[list[str]] = []

        def walk(path: list[str]) -> None:
            for nxt in sorted(g.get(path[-1], ())):
                if nxt == path[0]:
                    found.append(path)
                elif nxt not in path and nxt > path[0]:  # each cycle once, from its smallest unit
                    walk([*path, nxt])

        for start in sorted(g):
            walk([start])
        return found

    leaves = ("shaberi.errors", "shaberi.unicode_scripts")  # two that import no unit: joined, one cycle
    assert not every.get(leaves[0]) and not every.get(leaves[1])
    planted = {k: set(v) for k, v in graph.items()} | {leaves[0]: {leaves[1]}, leaves[1]: {leaves[0]}}
    assert cycles(planted) == [list(leaves)] and not cycles(graph), cycles(graph)
    assert not cycles(every), cycles(every)


def _source_calls(name: str) -> list[str]:
    """The modules of the package whose code names ``name`` (as an attribute, a name or an import)."""
    found = []
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any((isinstance(n, ast.Attribute) and n.attr == name) or (isinstance(n, ast.Name) and n.id == name)
               or (isinstance(n, ast.ImportFrom) and any(a.name == name for a in n.names)) for n in ast.walk(tree)):
            found.append(path.relative_to(ROOT.parent).as_posix())
    return sorted(found)


def test_only_the_registry_reads_entry_points_and_every_registry_is_made_there():
    """One scan of the installed entry points for every registry (``shaberi.registry.PLUGINS``), one group."""
    assert _source_calls("entry_points") == ["shaberi/registry.py"]
    made = sorted(m for m, deps in _imports().items() if "shaberi.registry.Registry" in deps)
    assert made == ["shaberi.benchmarks", "shaberi.ensemble.datasets", "shaberi.ensemble.graders",
                    "shaberi.ensemble.strategies", "shaberi.passes", "shaberi.resources"]


def test_one_registration_spelling_everywhere():
    """Built-ins register as a plugin does, with ``REGISTRY.register(name, …)``: no decorator of their own."""
    retired = {"benchmark", "dataset", "grader", "strategy", "register"}
    spelled = sorted((path.relative_to(ROOT.parent).as_posix(), d.func.id if isinstance(d, ast.Call) else d.id)
                     for path in [*ROOT.rglob("*.py"), *(ROOT.parent / "examples").rglob("*.py")]
                     for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if isinstance(n, ast.FunctionDef | ast.ClassDef) for d in n.decorator_list
                     if (d.id if isinstance(d, ast.Name) else getattr(d.func, "id", None)
                         if isinstance(d, ast.Call) else None) in retired)
    assert spelled == []


def test_module_names_say_what_they_hold():
    """``run.py`` held ``RunInfo`` beside a command called run; ``scripts.py`` counted Unicode scripts, not
    shell scripts: each is named for what it holds."""
    names = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py")}
    assert "run.py" not in names and "scripts.py" not in names
    assert {"run_info.py", "unicode_scripts.py"} <= names


def test_the_command_line_uses_no_private_module_of_typer():
    private = sorted((p.relative_to(ROOT.parent).as_posix(), m) for p in ROOT.rglob("*.py")
                     for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                     for m in ([n.module or ""] if isinstance(n, ast.ImportFrom) else
                               [a.name for a in n.names] if isinstance(n, ast.Import) else [])
                     if m.split(".")[0] in ("typer", "click") and any(p.startswith("_") for p in m.split(".")[1:]))
    assert private == []


# SQL lives in sql/ (views, macros, sql/queries/ read by tables.sql.query) and in tables/, the layer that builds
# what cannot be written ahead (the raw views over the parts, the latest-row rule from schema.py).
SQL_ALLOWED = ("tables/",)
_SQL = [re.compile(p) for p in (r"\bSELECT\b", r"\b(CREATE|INSERT INTO|DESCRIBE|COPY \(|ATTACH|PRAGMA)\b",
                                r"\bFROM\b[\s\S]*\b(WHERE|JOIN|GROUP BY|ORDER BY)\b", r"^\s*SET \w+\s*=")]


def sql_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal (an f-string's text parts joined) that reads as SQL, docstrings aside."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            skip.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            skip |= {id(v) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        else:
            continue
        if any(p.search(text) for p in _SQL):
            found.append((node.lineno, text))
    return found


def test_the_sql_detector_finds_sql_in_any_string_form():
    source = '''"""SELECT in a docstring is prose."""
x = "SELECT 1"
y = f"SELECT * FROM {t} WHERE a = 1"
z = ("CREATE TEMP VIEW v AS "
     "SELECT 2")
w = "choose from the list where you like"
'''
    assert [line for line, _ in sql_strings(source)] == [2, 3, 4]


def test_no_sql_string_in_python_outside_tables():
    """Every rule is a view or macro in sql/ and every query a named query (sql/queries/): Python passes values and
    names a query or view, so no second copy of a rule hides in a string."""
    found = [f"{path.relative_to(ROOT)}:{line}: {text.strip()[:60]!r}" for path in sorted(ROOT.rglob("*.py"))
             if not str(path.relative_to(ROOT)).startswith(SQL_ALLOWED)
             for line, text in sql_strings(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_every_named_query_is_there():
    """Each query(...) a module names exists in sql/queries/ (a typo fails here, not at a user's command)."""
    from shaberi.tables.sql import query

    names = {node.args[0].value for path in ROOT.rglob("*.py") for node in ast.walk(ast.parse(path.read_text("utf-8")))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "query" and node.args
             and isinstance(node.args[0], ast.Constant)}
    assert len(names) > 50
    for name in sorted(names):
        assert query(name).strip(), name
