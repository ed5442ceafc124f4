"""What the bounded sandbox costs a render (``shaberi.sandbox``): each shipped judging template rendered for a long
answer, against the same template in a plain ``jinja2.Environment`` (the floor, measured here), and the same
templates given as a team's folder (``--judge-prompts``), which render in the render process; then how long a
template that spins, grows, or takes one long step takes to be refused, and how much this process grew meanwhile.

    python bench/template_render.py [--n 3000]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import jinja2

from shaberi import benchmarks as bm
from shaberi.prompts import judge_messages, untrusted
from shaberi.resources import resource_dir
from shaberi.sandbox import BoundedEnvironment, render


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    plain = jinja2.Environment(loader=jinja2.FileSystemLoader(resource_dir("prompts")),
                               undefined=jinja2.StrictUndefined, autoescape=False)
    plain.filters["untrusted"] = untrusted
    question = bm.Question("rakuda", "1", ["質問です" * 50], reference="参考" * 50, category="writing", criteria="基準")
    answer = "回答です。" * 400
    team = Path(tempfile.mkdtemp()) / "team"
    shutil.copytree(resource_dir("prompts") / "judging", team)
    print("benchmark   plain µs  sandbox µs  ratio  folder µs  ratio")
    for name in ("elyza", "tengu", "mt_bench", "rakuda"):
        scale = bm.BENCHMARKS[name].scale
        template = plain.get_template(f"judging/{name}/primary.jinja")
        context = {"question": question, "answer": answer, "scale": scale, "history": []}
        started = time.perf_counter()
        for _ in range(args.n):
            str(template.make_module(context))
        floor = (time.perf_counter() - started) / args.n
        started = time.perf_counter()
        for _ in range(args.n):
            judge_messages(name, question, answer, scale)
        bounded = (time.perf_counter() - started) / args.n
        judge_messages(name, question, answer, scale, (), str(team))  # the render process started
        started = time.perf_counter()
        for _ in range(args.n):
            judge_messages(name, question, answer, scale, (), str(team))
        apart = (time.perf_counter() - started) / args.n
        print(f"{name:10} {floor * 1e6:9.0f} {bounded * 1e6:11.0f} {bounded / floor:6.2f} {apart * 1e6:10.0f} "
              f"{apart / floor:6.2f}")

    env = BoundedEnvironment()
    print("\nattack                    refused after  grew MB  said")
    for what, source in [
            ("two loops of 100,000", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                                     "{% endfor %}"),
            ("'x' * 10**10", "{{ 'x' * 10**10 }}"),
            ("1 MB doubled by ~", "{% set s = 'x' * 1000000 %}" + "{% set s = s ~ s %}" * 8 + "{{ s }}"),
            ("a macro branching 60 deep", "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}"
                                          "{{ f(60) }}")]:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        try:
            render(env.from_string(source), {})
            said = "rendered"
        except jinja2.TemplateError as exc:
            said = str(exc)
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        print(f"{what:25} {time.perf_counter() - started:11.2f} s {grew:8.0f}  {said}")

    print("\none long step, in a team's folder (the render process)")
    for i, (what, source) in enumerate([
            ("sum of 400,000 lists", "{{ ('x' * 400000)|batch(1)|sum(start=[])|length }}"),
            ("wordwrap(1) of 4 M chars", "{{ ('x' * 4000000)|wordwrap(1)|length }}"),
            ("nested lists compared", "{% set ns = namespace(a=[], b=[]) %}{% for i in range(40) %}"
                                      "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}"
                                      "{{ ns.a == ns.b }}")]):
        attacked = shutil.copytree(team, team.with_name(f"attack{i}"))  # templates are read once per folder
        primary = attacked / "rakuda" / "primary.jinja"
        primary.write_text(primary.read_text(encoding="utf-8") + "{% if 'BOOM' in answer %}" + source +
                           "{% endif %}", encoding="utf-8")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        try:
            judge_messages("rakuda", question, "BOOM", (1, 10), (), str(attacked))
            said = "rendered"
        except jinja2.TemplateError as exc:
            said = str(exc)
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        print(f"{what:25} {time.perf_counter() - started:11.2f} s {grew:8.0f}  {said}")


if __name__ == "__main__":
    main()
