"""A template is code Shaberi did not write: it renders in Jinja's sandbox, each render bounded in time and size.

Every attack here hung the run, exhausted memory or reached Python's internals with a plain ``jinja2.Environment``
(the templates folder of ``--judge-prompts``, a plugin's templates).
"""

from __future__ import annotations

import os
import resource
import shutil
from pathlib import Path

import jinja2
import pytest

from shaberi.prompts import _env
from shaberi.sandbox import SIZE_LIMIT, BoundedEnvironment, RenderLimit, module, render

from .conftest import REPO, query, shaberi, write_rakuda

SPIN = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
BIG = "{% set s = 'x' * 1000000 %}"
ATTACKS = {  # what it does: (template, what the refusal says)
    "range of 10**12": ("{% for i in range(10**12) %}{% endfor %}", "MB"),
    "nested loops": (SPIN, "longer than 2 s"),
    "nested loops over a string": ("{% set s = 'x' * 100000 %}{% for a in s %}{% for b in s %}{% endfor %}"
                                   "{% endfor %}", "longer than 2 s"),
    "exponential macro": ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                          "{{ f(60) }}", "longer than 2 s"),
    "endless recursion": ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursed"),
    "string times 10**10": ("{{ 'x' * 10**10 }}", "MB"),
    "list times 10**9": ("{{ ([1] * 10**9)|length }}", "MB"),
    "a huge power": ("{{ 7 ** 10000000 }}", "MB"),
    "center filter": ("{{ 'x'|center(10**10) }}", "MB"),
    "ljust method": ("{{ 'x'.ljust(10**10) }}", "MB"),
    "replace filter": (BIG + "{{ s|replace('x', 'xxxxxxxxxx') }}", "MB"),
    "replace method": (BIG + "{{ s.replace('x', 'xxxxxxxxxx') }}", "MB"),
    "format filter width": ("{{ '%999999999s'|format('') }}", "MB"),
    "percent width": ("{{ '%999999999s' % '' }}", "MB"),
    "str.format width": ("{{ '{:>999999999}'.format('') }}", "MB"),
    "output in a loop": (BIG + "{% for i in range(100) %}{{ s }}{% endfor %}", "MB"),
    "block set in a loop": (BIG + "{% for i in range(1000) %}{% set t %}{{ s }}{{ s }}{{ s }}{{ s }}{{ s }}"
                                  "{% endset %}{% endfor %}", "MB"),
    "doubling by ~": (BIG + "{% set s = s ~ s %}{% set s = s ~ s %}{% set s = s ~ s %}{{ s }}", "MB"),
    "join filter of copies": (BIG + "{{ ([s] * 1000)|join }}", "MB"),
    "join method of copies": (BIG + "{{ ''.join([s] * 1000) }}", "MB"),
    "indent of many lines": ("{% set s = '\n' * 1000000 %}{{ s|indent(1000) }}", "MB"),
    "batch padding": ("{{ [1]|batch(10**9, 0)|list }}", "MB"),
    "a growing list": ("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
                       "{% set ns.l = ns.l + ['x' * 1000 ~ i] %}{% endfor %}", "MB"),
    "tojson indent": ("{{ {'a': 1}|tojson(10**9) }}", "MB"),
    "a width as an argument": ("{{ '%*s' % (1000000000, 'x') }}", "MB"),
    "a nested format width": ("{{ '{:>{}}'.format('x', 1000000000) }}", "MB"),
    "a mapping's value, many times": (BIG + "{{ ('%(a)s' * 300) % {'a': s} }}", "MB"),
    "join over a string": ("{{ ('ab' * 500)|join('x' * 1000000) }}", "MB"),
    "join over a range": ("{{ range(1000)|join('x' * 1000000) }}", "MB"),
    "join method over a string": (BIG + "{{ s.join('y' * 300) }}", "MB"),
    "lipsum paragraphs": ("{{ lipsum(300000)|length }}", "MB"),
    "Python's internals": ("{{ ().__class__.__base__.__subclasses__() }}", "unsafe"),
    "a global's module": ("{{ range.__module__ }}", "unsafe"),
    "mutating a list": ("{% set l = [] %}{{ l.append(1) }}", "unsafe"),
    "lipsum": ("{{ lipsum(10**7) }}", "MB"),
}
# One step, long on its own, that no check between steps can cut (minutes to hours in this process): a template
# that is not ours renders in a process of its own, killed past the bound.
LONG_STEPS = {
    "sum of lists": "{{ ('x' * 400000)|batch(1)|sum(start=[])|length }}",
    "wordwrap of a long word": "{{ ('x' * 4000000)|wordwrap(1)|length }}",
    "comparing shared nested lists": "{% set ns = namespace(a=[], b=[]) %}{% for i in range(40) %}"
                                     "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}"
                                     "{{ ns.a == ns.b }}",
}


@pytest.mark.parametrize("name", ATTACKS)
def test_an_attack_ends_with_one_template_error_in_bounded_memory(name):
    """Each ends (pytest-timeout is the hang detector) with a TemplateError, and the process grows by far less
    than the attack asks for (gigabytes)."""
    template, said = ATTACKS[name]
    env = BoundedEnvironment(undefined=jinja2.StrictUndefined)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for run in (render, module):
        with pytest.raises(jinja2.TemplateError) as raised:
            str(run(env.from_string(template), {}))
        assert said in str(raised.value), raised.value
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert grown < 50 * SIZE_LIMIT, grown


def test_the_bounds_are_per_render_and_a_render_inside_them_is_unchanged():
    """Just under the size bound renders, and a render after a refused one starts with a whole budget."""
    env = BoundedEnvironment()
    fits = env.from_string("{{ 'x' * n }}")
    assert len(render(fits, {"n": SIZE_LIMIT // 3})) == SIZE_LIMIT // 3
    with pytest.raises(RenderLimit):
        render(fits, {"n": SIZE_LIMIT + 1})
    assert render(fits, {"n": 3}) == "xxx"
    loops = env.from_string("{% for i in range(3) %}{{ i ~ '-' }}{{ '%02d'|format(i) }} {% endfor %}{{ x.y }}")
    assert render(loops, {"x": {"y": "z"}}) == "0-00 1-01 2-02 z"


def test_every_shipped_template_renders_in_the_sandbox_as_it_did_outside():
    """Ours are plain: every generation, judging and pass template gives the same text in the sandbox as in a plain
    environment, for a real question of each benchmark."""
    from shaberi import benchmarks as bm
    from shaberi.prompts import generation_messages, judge_fallback, judge_messages, untrusted

    plain = jinja2.Environment(loader=_env().loader, undefined=jinja2.StrictUndefined, autoescape=False)
    plain.filters["untrusted"] = untrusted
    for name in ("elyza", "tengu", "mt_bench", "rakuda"):
        spec = bm.BENCHMARKS[name]
        question = bm.Question(name, "1", ["質問【回答終了】です"], reference="参考", category="c", criteria="基準")
        got = judge_messages(name, question, "回答です", spec.scale)
        made = plain.get_template(f"judging/{name}/primary.jinja").make_module(
            {"question": question, "answer": "回答です", "scale": spec.scale, "history": []})
        assert got[-1]["content"] == str(made).strip()
        assert judge_fallback(name, spec.scale) == plain.get_template(
            f"judging/{name}/fallback.jinja").render(scale=spec.scale).strip()
        assert generation_messages(question)[-1]["content"] == question.turns[-1]


def _team(tmp_path: Path, added: str) -> Path:
    """Shaberi's templates with ``added`` at the end of Rakuda's primary."""
    team = tmp_path / "team"
    shutil.copytree(REPO / "prompts" / "judging", team)
    primary = team / "rakuda" / "primary.jinja"
    primary.write_text(primary.read_text(encoding="utf-8") + added, encoding="utf-8")
    return team


WRONG = {"an unknown filter": ("{{ answer|nosuchfilter }}", "TemplateAssertionError: No filter named 'nosuchfilter'")}


@pytest.mark.timeout(120)  # the hang detector: each long step takes minutes or more where it is not cut
@pytest.mark.parametrize("name", ["nested loops", "string times 10**10", "Python's internals", *LONG_STEPS, *WRONG])
def test_a_templates_folder_past_a_bound_is_one_line_naming_it_before_any_call(name, tmp_path, server):
    template, said = ATTACKS.get(name) or WRONG.get(name) or (LONG_STEPS[name], "longer than 2 s")
    team = _team(tmp_path, template)
    data = write_rakuda(tmp_path / "d", ["質問1"])
    done = shaberi("run", "--model", "m", "--base-url", server.base_url, "--data-dir", str(data), "--results-dir",
                   str(tmp_path / "r"), "--benchmark", "rakuda", "--judge", "j", "--judge-prompts", str(team))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert f"--judge-prompts {team}: rakuda/primary.jinja" in lines[0] and "cannot be rendered" in lines[0], lines
    assert said in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists() and server.stats()["calls"] == 0


@pytest.mark.timeout(240)
@pytest.mark.parametrize("attack", [SPIN, LONG_STEPS["comparing shared nested lists"]], ids=["loops", "one long step"])
def test_a_template_an_answer_takes_past_a_bound_fails_that_judgement_only_and_resumes_without_paying(
        attack, tmp_path, server):
    """The stand-in answer renders; the model's real answer sends the template spinning (in loops the sandbox's
    clock cuts, or in one step of C its process is killed for): that judgement is a prompt_error, no call and no
    score (as an unreadable reply: the benchmark's other judgements stand, the next render in a new process), and
    the same command pays for nothing more. A benchmark where every answer does it is failed: exit 1, every time."""
    team = _team(tmp_path, "{% if 'BOOM' in answer %}" + attack + "{% endif %}")
    for results, texts, code, status in [("r", ["<<answer: BOOM>> 質問1", "<<judge: FINAL SCORE: 7>> 質問2"], 0, "ok"),
                                         ("r2", ["<<answer: BOOM>> 質問1", "<<answer: BOOM!>> 質問2"], 1, "failed")]:
        server.reset()
        data = write_rakuda(tmp_path / f"d-{results}", texts)
        args = ["run", "--model", "m", "--base-url", server.base_url, "--data-dir", str(data), "--results-dir",
                str(tmp_path / results), "--benchmark", "rakuda", "--judge", "j", "--judge-prompts", str(team)]
        for _ in range(2):  # the run, then the same command again
            done = shaberi(*args)
            assert done.returncode == code and "Traceback" not in done.stderr, done.stderr
            assert server.stats()["calls"] == 2 + (code == 0)  # the answers, and one judgement where it renders
        said = "prompt_error: judging/rakuda/primary.jinja: the render took longer than 2 s"
        rows = query(tmp_path / results, "SELECT question_id, score, error FROM judgements ORDER BY 1")
        assert rows == ([("q0", None, said), ("q1", 7.0, None)] if code == 0 else [("q0", None, said),
                                                                                  ("q1", None, said)])
        assert query(tmp_path / results, "SELECT status FROM runs") == [(status,)]
        assert code == 0 or f"nothing usable; most common: {said}" in done.stderr


def test_a_template_not_ours_renders_in_a_process_with_capped_memory_and_no_credentials(tmp_path, monkeypatch):
    """The render process: its address space capped, no key in its environment, a new one after one is killed;
    ours render here (no process started)."""
    from shaberi import prompts
    from shaberi.benchmarks import Question
    from shaberi.sandbox import MEMORY_LIMIT, Renderer

    monkeypatch.setattr(prompts, "_RENDERER", Renderer("shaberi.prompts"))
    from shaberi.child import environment

    kept = {"SECRET_KEY_BASE": "base-secret", "GH_PAT": "pat-value", "MYSQL_PWD": "mysql-password",
            "HF_HOME_X": "hf_" + "h" * 34, "AWS_ID": "AKIA" + "A" * 16, "OPENAI_APIKEY": "apikey-value"}
    for name, value in [("OPENAI_API_KEY", "sk-test-" + "k" * 40), ("OPENAI_API_KEY_2", "second-key-value"),
                        ("DATABASE_URL", "postgres://u:db-password@h/db"), ("JUDGE_CRED", "named-by-the-user"),
                        *kept.items()]:
        monkeypatch.setenv(name, value)
    given = environment()  # a clone's: every variable, a credential's value (by its name or its shape) replaced
    assert all(given[name] == "[redacted]" for name in kept) and given["PATH"] == os.environ["PATH"], given
    question = Question("rakuda", "1", ["質問"], reference="参考", category="c", criteria="基準")
    assert prompts.judge_messages("rakuda", question, "回答", (1, 10)) and prompts._RENDERER._child is None
    team = _team(tmp_path, "{% if 'BOOM' in answer %}" + LONG_STEPS["comparing shared nested lists"] + "{% endif %}")
    assert "回答" in prompts.judge_messages("rakuda", question, "回答", (1, 10), (), str(team))[-1]["content"]
    child = prompts._RENDERER._child
    assert child is not None and child.alive
    limits = Path(f"/proc/{child.proc.pid}/limits").read_text()
    assert f"Max address space         {MEMORY_LIMIT}" in limits, limits
    environ = Path(f"/proc/{child.proc.pid}/environ").read_bytes()  # it renders: it needs no more than a path
    assert b"PATH=" in environ and not any(secret in environ for secret in (
        b"sk-test-", b"second-key-value", b"db-password", b"named-by-the-user"))
    with pytest.raises(RenderLimit, match="longer than 2 s"):
        prompts.judge_messages("rakuda", question, "BOOM", (1, 10), (), str(team))
    assert not child.alive  # killed: the next render starts another
    assert "回答" in prompts.judge_messages("rakuda", question, "回答", (1, 10), (), str(team))[-1]["content"]
    assert prompts._RENDERER._child is not None and prompts._RENDERER._child is not child


def test_the_render_process_reports_what_it_cannot_make_as_a_template_error(tmp_path):
    """What only the render process meets is one TemplateError, as in this process: a context it cannot be sent,
    text that is not Unicode, a template nested too deep to compile; and the next render is made."""
    from shaberi import prompts

    team = tmp_path / "team"
    shutil.copytree(REPO / "prompts" / "judging", team)
    primary = team / "rakuda" / "primary.jinja"
    cases = [({"question": {"turns": ["q"]}, "answer": lambda: 1}, "{{ answer }}", "cannot be sent"),
             ({}, '{% set system %}S{{ "\\ud800" }}{% endset %}x', "not valid Unicode"),
             ({}, "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "RecursionError")]
    for i, (context, source, said) in enumerate(cases):
        folder = shutil.copytree(team, tmp_path / f"t{i}")
        (folder / "rakuda" / "primary.jinja").write_text(source, encoding="utf-8")
        with pytest.raises(jinja2.TemplateError, match=said):
            prompts._made("judging/rakuda/primary.jinja", context, str(folder))
    assert "回答" in prompts._made("judging/rakuda/primary.jinja", {
        "question": {"turns": ["q"], "category": "c"}, "answer": "回答", "scale": (1, 10), "history": []},
        str(team))[0]
    assert primary.is_file()


def test_every_template_a_folders_judging_reads_is_in_its_hash(tmp_path):
    """A shared file by any name (``common.jinja``) and a parent named in single quotes are hashed: editing either
    judges afresh instead of reusing what the old text made; a parent in no folder is one line."""
    from shaberi.errors import UsageError
    from shaberi.prompts import _folder_hash

    team = _team(tmp_path, '{% include "judging/common.jinja" %}')
    (team / "common.jinja").write_text("共通の指示", encoding="utf-8")
    (team / "rakuda" / "pairwise.jinja").write_text("{% extends 'judging/elyza/pairwise.jinja' %}", encoding="utf-8")
    (team / "elyza" / "pairwise.jinja").write_text("親 {{ a }} {{ b }}", encoding="utf-8")
    scores, pairs = _folder_hash("rakuda", str(team), False), _folder_hash("rakuda", str(team), True)
    (team / "common.jinja").write_text("共通の指示、改訂", encoding="utf-8")
    assert _folder_hash("rakuda", str(team), False) != scores
    (team / "elyza" / "pairwise.jinja").write_text("親、改訂 {{ a }} {{ b }}", encoding="utf-8")
    assert _folder_hash("rakuda", str(team), True) not in (pairs, _folder_hash("rakuda", None, True))
    (team / "rakuda" / "pairwise.jinja").write_text('{% extends "judging/nowhere/pairwise.jinja" %}', encoding="utf-8")
    with pytest.raises(UsageError, match=r"extends judging/nowhere/pairwise\.jinja, which is in none of"):
        _folder_hash("rakuda", str(team), True)


def test_a_python_file_in_the_folder_a_run_starts_from_is_never_imported(tmp_path, server):
    """The render process does not put the working folder on its module path: a team's folder run from with
    ``--judge-prompts .`` may hold a ``base64.py``, and it stays a file."""
    team = _team(tmp_path, "")
    marker = tmp_path / "imported"
    (team / "base64.py").write_text(f"open({str(marker)!r}, 'w').close()\nfrom binascii import *\n",
                                    encoding="utf-8")
    data = write_rakuda(tmp_path / "d", ["<<judge: FINAL SCORE: 7>> 質問1"])
    done = shaberi("run", "--model", "m", "--base-url", server.base_url, "--data-dir", str(data), "--results-dir",
                   str(tmp_path / "r"), "--benchmark", "rakuda", "--judge", "j", "--judge-prompts", ".", cwd=team)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert query(tmp_path / "r", "SELECT score FROM judgements") == [(7.0,)]


def test_a_templates_folder_holds_only_its_own_template_files(tmp_path, server):
    """A link out of the folder would send another file's text to the judge (``{% include %}``); a device or a
    folder named ``*.jinja`` would hang or break the hashing; an included file not in UTF-8 was blamed on the
    template including it: each is one line naming the file, before any call."""
    secret, outside = tmp_path / "secret.txt", tmp_path / "outside"
    secret.write_text("SECRET-1234", encoding="utf-8")
    outside.mkdir()
    (outside / "notes.jinja").write_text("SECRET-1234", encoding="utf-8")
    data = write_rakuda(tmp_path / "d", ["質問1"])
    notes = "judging/notes.jinja"
    for i, (included, make, said) in enumerate([  # what the template includes, how the folder holds it, what is said
            (notes, lambda t: (t / "notes.jinja").symlink_to(secret), "notes.jinja links out of the folder"),
            (notes, lambda t: (t / "notes.jinja").mkdir(), "notes.jinja is not a file"),
            (notes, lambda t: (t / "notes.jinja").symlink_to("/dev/zero"), "notes.jinja links out of the folder"),
            (notes, lambda t: (t / "notes.jinja").write_text("x" * (2 << 20)), "notes.jinja is over 1 MB"),
            (notes, lambda t: (t / "notes.jinja").write_bytes("説明".encode("shift_jis")),
             "notes.jinja is not UTF-8 text"),
            # a file by another name, a folder linked from outside: neither is a template of the folder
            ("judging/notes.txt", lambda t: (t / "notes.txt").symlink_to(secret),
             "TemplateNotFound: judging/notes.txt"),
            ("judging/linked/notes.jinja", lambda t: (t / "linked").symlink_to(outside),
             "TemplateNotFound: judging/linked/notes.jinja")]):
        team = _team(tmp_path / str(i), f'{{% include "{included}" %}}')
        make(team)
        done = shaberi("run", "--model", "m", "--base-url", server.base_url, "--data-dir", str(data),
                       "--results-dir", str(tmp_path / "r"), "--benchmark", "rakuda", "--judge", "j",
                       "--judge-prompts", str(team))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and said in lines[0], done.stderr
        assert not (tmp_path / "r").exists() and server.stats()["calls"] == 0
