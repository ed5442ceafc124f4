"""Every pass is linear in the answer's length: each pass's ``check`` on adversarial answers (one unbroken word,
unbroken kana, hyphenated letters, address-like dots, a repeated sentence, one long line, Markdown) of
growing size. Linear work doubles with the size: the printed ratio t(2n) / t(n) stays near 2 (a quadratic
pass shows 4). The floor is one regex scan over the same text (``re.findall(r"\\S+")``), measured in the same
run.

    python bench/pass_scaling.py [MAX_CHARS]      (default 400,000)
"""

from __future__ import annotations

import re
import sys
import time

from shaberi.passes import PASSES, Item

SHAPES = {
    "word": "a",
    "kana": "あ",
    "hyphens": "a-",
    "dots": "x.",
    "sentence": "東京は日本の首都です。",
    "line": "The quick brown fox jumps over the lazy dog and ",
    "markdown": "- **項目** `code` [link](http://x.y) $x$\n",
}


def timed(fn, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
    sizes = [top // 4, top // 2, top]
    names = [n for n in PASSES if n != "safety_check"]  # safety_check's rules read the reply, not the answer
    print(f"{'pass':<18}{'shape':<10}" + "".join(f"{s:>12,}" for s in sizes) + f"{'t(2n)/t(n)':>12}{'÷ floor':>10}")
    for name in names:
        p = PASSES[name]()
        for shape, unit in SHAPES.items():
            def check(text: str, p: object = p) -> None:
                p.check(Item("rakuda", "q", 0, "", "質問", "質問", text, None, "stop", (1, 10)))  # type: ignore[attr-defined]

            texts = [(unit * (s // len(unit) + 1))[:s] for s in sizes]
            times = [timed(check, t) for t in texts]
            floor = timed(lambda t: re.findall(r"\S+", t), texts[-1])
            ratio = times[-1] / times[-2] if times[-2] else float("nan")
            print(f"{name:<18}{shape:<10}" + "".join(f"{t:>11.3f}s" for t in times)
                  + f"{ratio:>12.2f}{times[-1] / max(floor, 1e-9):>10.0f}")


if __name__ == "__main__":
    main()
