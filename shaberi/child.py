"""A process of its own for code Shaberi did not write: a clone's judging (``original``), a team's or a plugin's
templates (``sandbox.Renderer``).

One JSON line a request on the child's stdin, one JSON object an answer on its stdout, each within a deadline, so
the run never waits on it for ever: a hang is cut (the child killed), an exit or a garbled answer is a reason
(``ChildFailed``). Its environment is the caller's choice (``environment``: every variable, a credential's value
replaced by a placeholder; or only those named), and Python starts it with ``-P``: the folder the user runs from is
not on its module path, so a ``base64.py`` there (a team's templates folder) is never imported. The child's side
(``serve``) answers on a copy of stdout of its own, so the code's prints cannot forge one, and ends when its parent
does.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import orjson

from .redact import REDACTED, holds_secret, is_credential_name

__all__ = ["Child", "ChildFailed", "environment", "serve"]


class ChildFailed(Exception):
    """The child exited, let a deadline pass (``late``), or answered with something other than a JSON object:
    ``reason``."""

    def __init__(self, reason: str, late: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.late = reason, late


class Child:
    """``python -P -m MODULE ARGS`` with pipes to it, in ``env`` (default: ``environment()``); ``ask`` one request at
    a time (a lock: threads may share it)."""

    def __init__(self, module: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-P", "-m", module, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=environment() if env is None else env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._buffer = b""
        self.lock = threading.Lock()
        weakref.finalize(self, _stop, self.proc)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, message: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
        """Send ``message`` (None: only wait for the next answer, as for the child's first) and return the answer
        within ``seconds`` in all. On any failure the child is stopped and ``ChildFailed`` says why."""
        deadline = time.monotonic() + seconds
        data = b"" if message is None else orjson.dumps(message) + b"\n"
        while data:
            if not select.select([], [self._in], [], max(0.0, deadline - time.monotonic()))[1]:
                self._fail(f"took no request for {seconds:g} s", late=True)
            try:
                data = data[os.write(self._in, data):]
            except OSError:  # it is gone: reading its answer says how
                break
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                self._fail(f"gave no answer within {seconds:g} s", late=True)
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                try:
                    code: int | str = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    code = "unknown"
                self._fail(f"exited (code {code})")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            answer = orjson.loads(line)
        except orjson.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict):
            self._fail(f"answered {line[:80]!r}")
        return answer

    def stop(self) -> None:
        _stop(self.proc)

    def _fail(self, reason: str, late: bool = False) -> NoReturn:
        self.stop()
        raise ChildFailed(reason, late)


def environment(only: frozenset[str] | None = None) -> dict[str, str]:
    """This process's environment for a child: with ``only``, just the variables named there (and the locale's);
    either way, each variable named like a credential (``redact.is_credential_name``) or whose value holds one (a
    key's shape, a URL's password, a bearer token) holds a placeholder instead."""
    return {k: REDACTED if is_credential_name(k) or holds_secret(v) else v for k, v in os.environ.items()
            if only is None or k in only or k.startswith("LC_")}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    for pipe in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError):
            if pipe is not None:
                pipe.close()


def serve() -> tuple[Iterator[dict[str, Any]], Callable[[dict[str, Any]], None]]:
    """The child's side: its requests (until stdin closes) and how to answer one. Its own prints, and anything
    else it writes to stdout, go nowhere; Ctrl-C is the parent's to handle (it closes our stdin); and once the
    parent is gone (killed: our stdin may never close while we are busy) we end too."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115  # for the life of the process
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_orphaned, args=(os.getppid(),), daemon=True).start()

    def send(answer: dict[str, Any]) -> None:
        answers.write(orjson.dumps(answer) + b"\n")
        answers.flush()

    return (orjson.loads(line) for line in sys.stdin.buffer), send


def _orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)
