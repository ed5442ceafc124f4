"""math (MATH-500): math-verify parses the answer (``\\boxed{}`` first, then any LaTeX or expression) and
checks it against the gold symbolically. math-verify bounds its own time with ``signal.alarm``, which
only works on the main thread, so its timeouts are turned off and this module bounds the whole
extraction and comparison itself, with one SIGALRM timer on the main thread (a timed-out answer is
graded wrong, method ``timeout``)."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

from ...benchmarks import Question
from . import GRADERS, Extraction

TIME_LIMIT = 10.0  # seconds for one answer's parse and comparison


class _TimedOut(Exception):
    pass


@contextlib.contextmanager
def _bounded(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("math grading uses SIGALRM and must run on the main thread")

    def expire(*_: object) -> None:
        raise _TimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _parse(text: str) -> list:
    from math_verify import parse

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # it warns that we bound its time ourselves
    return parse(text, parsing_timeout=None)


def extract(text: str, question: Question) -> Extraction:
    try:
        with _bounded(TIME_LIMIT):
            parsed = _parse(text)
    except _TimedOut:
        return Extraction(None, "timeout")
    return Extraction(str(parsed[0]), "math_verify") if parsed else Extraction(None, "none")


def grade(response: str | None, question: Question) -> tuple[bool, Extraction]:
    from math_verify import verify

    try:
        with _bounded(TIME_LIMIT):
            answer = _parse(response or "")
            if not answer:
                return False, Extraction(None, "none")
            gold = _parse(f"${question.reference}$")
            return bool(verify(gold, answer, timeout_seconds=None)), Extraction(str(answer[0]), "math_verify")
    except _TimedOut:
        return False, Extraction(None, "timeout")


class _Math:
    """``GRADERS["math"]``: a ``Grader`` comparing the parsed forms, not the extracted strings."""

    name = "math"
    version = "1"
    extract = staticmethod(extract)
    grade = staticmethod(grade)


GRADERS.register("math", _Math())
