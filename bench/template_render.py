"""What the bounded sandbox costs a render (``shaberi.sandbox``): each shipped judging template rendered for a long
answer, against the same template in a plain ``jinja2.Environment`` (the floor, measured here); then how long a
template that spins or grows takes to be refused, and how much the process grew meanwhile.

    python bench/template_render.py [--n 3000]
"""

from __future__ import annotations

import argparse
import resource
import time

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
    print("benchmark   plain µs  sandbox µs  ratio")
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
        print(f"{name:10} {floor * 1e6:9.0f} {bounded * 1e6:11.0f} {bounded / floor:6.2f}")

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


if __name__ == "__main__":
    main()
