"""Test support shipped with the package: a loopback OpenAI-compatible server in its own process."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from types import TracebackType
from typing import Any

__all__ = ["LoopbackServer"]


class LoopbackServer:
    """Start ``shaberi.testing.server`` in a subprocess on 127.0.0.1 and stop it on exit.

    A separate process, like a real endpoint: the client under test gets no shared event loop or GIL.
    """

    def __init__(self, latency_ms: float = 0.0, capacity: int = 0, *, queue: int = 0, rpm: float = 0,
                 tpm: float = 0, models: tuple[str, ...] = ("fake-model",), judges: tuple[str, ...] = (),
                 odd_answers: bool = False, retry_after: float | None = None, stray_429: float = 0.0,
                 batch_seconds: float = 0.0, first_wins: float = 0.0) -> None:
        self.args = ["--latency-ms", str(latency_ms), "--capacity", str(capacity), "--queue", str(queue),
                     "--rpm", str(rpm), "--tpm", str(tpm), "--models", ",".join(models), "--judges", ",".join(judges),
                     *(["--odd-answers"] if odd_answers else []),
                     *(["--retry-after", str(retry_after)] if retry_after is not None else []),
                     "--stray-429", str(stray_429), "--batch-seconds", str(batch_seconds),
                     "--first-wins", str(first_wins)]
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self) -> LoopbackServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shaberi.testing.server", "--port", "0", *self.args],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"loopback server did not start: {line!r}")
        self.base_url = line.split(" ", 1)[1]
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def stats(self) -> dict[str, Any]:
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/_stats", timeout=10) as resp:
            return json.loads(resp.read())

    def requests(self) -> list[list[dict[str, Any]]]:
        """The message lists of the most recent chat requests, oldest first."""
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/_requests", timeout=10) as resp:
            return json.loads(resp.read())

    def bodies(self) -> list[dict[str, Any]]:
        """The other fields (model, temperature, max_tokens …) of the most recent chat requests, oldest first."""
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/_bodies", timeout=10) as resp:
            return json.loads(resp.read())

    def replies(self) -> list[dict[str, Any]]:
        """The model and content of the most recent answers, oldest first."""
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/_replies", timeout=10) as resp:
            return json.loads(resp.read())

    def arrivals(self) -> list[tuple[float, str | None, int | None]]:
        """(``time.monotonic()`` at arrival, request key, status) of each chat request, oldest first: the clock is
        the machine's, so the caller can order its own events against the server's."""
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/_arrivals", timeout=10) as resp:
            return [tuple(a) for a in json.loads(resp.read())]

    def expire_batches(self) -> list[str]:
        """Every batch in progress expires now (its unanswered requests: ``batch_expired``); their ids."""
        root = self.base_url.removesuffix("/v1")
        request = urllib.request.Request(f"{root}/_batches/expire", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as resp:
            return list(json.loads(resp.read())["expired"])

    def fail_next(self, *statuses: int) -> None:
        """Answer the next chat requests with these HTTP statuses."""
        root = self.base_url.removesuffix("/v1")
        data = json.dumps(list(statuses)).encode()
        urllib.request.urlopen(urllib.request.Request(f"{root}/_fail", data=data, method="POST"), timeout=10).close()

    def reset(self) -> None:
        root = self.base_url.removesuffix("/v1")
        urllib.request.urlopen(urllib.request.Request(f"{root}/_reset", method="POST"), timeout=10).close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
