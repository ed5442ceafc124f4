"""The documentation: the generated reference is current, the site builds with ``mkdocs build --strict``, and
every snippet marked ``<!-- runs in tests/test_docs.py -->`` runs (against the loopback server)."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from shaberi.testing import LoopbackServer

from .conftest import REPO, shaberi

MARK = "<!-- runs in tests/test_docs.py -->"
# Setting up, which a reader's machine does: installing, serving a model, a key, downloading (the tests have the files)
SKIPPED = ("pip ", "python3 -m venv", "vllm ", "export ", "shaberi data pull ")


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", REPO / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_is_current():
    """The CLI reference, tables and views pages are what docs/generate.py makes of the code now."""
    assert _generator().stale() == [], "run python docs/generate.py and commit the pages"


def test_a_changed_option_makes_the_cli_reference_stale(tmp_path, monkeypatch):
    generate = _generator()
    page = tmp_path / "cli.md"
    page.write_text(generate.cli().replace("--judge-prompts", "--judge-prompt"), encoding="utf-8")
    monkeypatch.setattr(generate, "REFERENCE", tmp_path)
    monkeypatch.setattr(generate, "PAGES", {"cli.md": generate.cli})
    assert generate.stale() == ["cli.md"]


def test_the_site_builds_strict(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8").count("shaberi run")


def _pages() -> list[Path]:
    """README.md, then the pages in the order of the site's navigation."""
    def walk(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        items = nav.values() if isinstance(nav, dict) else nav
        return [page for item in items for page in walk(item)]  # type: ignore[union-attr]

    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    return [REPO / "README.md", *(REPO / "docs" / page for page in walk(nav))]


def _snippets(page: Path) -> list[tuple[str, str]]:
    """(language, code) of each marked fenced block."""
    pattern = re.escape(MARK) + r"\n```(\w+)\n(.*?)\n```"
    return re.findall(pattern, page.read_text(encoding="utf-8"), flags=re.S)


def _commands(code: str) -> list[list[str]]:
    lines = re.sub(r"\\\n\s*", " ", code).splitlines()  # continued lines joined
    commands = []
    for line in lines:
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if not line or line.startswith("#") or line.startswith(SKIPPED):
            continue
        assert line.startswith("shaberi "), f"a marked snippet runs shaberi commands only: {line!r}"
        commands.append(shlex.split(line))
    return commands


def test_the_marked_snippets_run(tmp_path, data_dir, monkeypatch):
    """Each marked bash block's shaberi commands (endpoints pointed at the loopback server, --limit 1 on run) and
    each marked python block, in one working directory, page after page."""
    ran = 0
    monkeypatch.chdir(tmp_path)
    (tmp_path / "datasets").symlink_to(data_dir)  # where the pages put the benchmark files
    with LoopbackServer() as server:
        for page in _pages():
            for language, code in _snippets(page):
                where = f"{page.relative_to(REPO)}: {code[:60]!r}"
                if language == "python":
                    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
                    assert done.returncode == 0, f"{where}\n{done.stderr}"
                    ran += 1
                    continue
                assert language == "bash", where
                for args in _commands(code):
                    args = [server.base_url if a in ("http://127.0.0.1:8000/v1", "https://api.openai.com/v1")
                            else re.sub(r"@https?://[^ ]+/v1$", "@" + server.base_url, a) for a in args[1:]]
                    if args[0] == "run" and "--limit" not in args:
                        args += ["--limit", "1"]
                    done = shaberi(*args, cwd=tmp_path)
                    assert done.returncode == 0, f"{where}: shaberi {shlex.join(args)}\n{done.stderr}"
                    ran += 1
    assert ran >= 6  # the quickstart's commands and the API page's snippet at least


def test_the_readme_is_short_and_ci_runs_its_second_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    first = re.search(r"```bash\n(.*?)\n```", readme, flags=re.S)
    assert first is not None
    commands = first.group(1).splitlines()
    assert len(commands) == 2 and commands[0].endswith("shaberi demo")
    assert commands[1] in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_every_environment_variable_the_code_reads_is_documented():
    read = {name for path in (REPO / "shaberi").rglob("*.py")
            for name in re.findall(r'"(SHABERI_[A-Z_]+)"', path.read_text(encoding="utf-8"))}
    page = (REPO / "docs" / "reference" / "environment.md").read_text(encoding="utf-8")
    assert len(read) >= 7 and not {name for name in read if f"`{name}`" not in page}
