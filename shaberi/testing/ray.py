"""A Ray cluster of its own on 127.0.0.1, for tests and benchmarks, which stops without touching any other.

``ray stop`` stops every Ray cluster of the user on the machine and cannot name one. Here ``ray start --head``
leads a session of its own (every process of the cluster, workers included, stays in it) with a temp dir and
free ports of its own, so it runs beside any other cluster; ``stop`` kills that session's processes only.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

__all__ = ["CLIENT_ENV", "REGISTER_S", "RayCluster", "session_processes"]

REGISTER_S = 240.0  # how long a head's raylet may take to come up (_ray_head); a start beside four busy processes: 35 s


# Every port the head listens on, chosen here below the kernel's ephemeral range (32768 up): a port picked there and
# released is the next connection's source port as likely as not on a busy machine (a test suite opens thousands),
# and a GCS whose port was taken so never answers. Ray's workers use 10002-19999.
_PORTS = range(20000, 32000)
_given: set[int] = set()


def _free_port() -> int:
    """A port of ``_PORTS`` nothing listens on, not handed out before by this process."""
    rng = random.Random()
    while True:
        port = rng.choice(_PORTS)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port


def session_processes(sid: int) -> list[int]:
    """The live processes of session ``sid`` (the fourth field after the name in /proc/PID/stat), zombies left
    out."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


# What a driver of a test cluster needs besides RAY_ADDRESS: the same authentication mode as the head. Ray turns
# token authentication on by itself when ~/.ray/auth_token exists (any local ray.init() writes one), and a head and
# a driver that decide it apart do not connect; a test cluster is hermetic, on loopback, without it.
CLIENT_ENV = {"RAY_AUTH_MODE": "disabled"}


def _ahead() -> None:
    """The cluster's processes ahead of the machine's other work where the user may (root): its start is a dozen
    Python processes importing Ray, which a busy machine otherwise stretches to minutes (``_ray_head``)."""
    with contextlib.suppress(OSError):
        os.nice(-10)


class RayCluster:
    """``with RayCluster(cpus, env) as c``: ``c.address`` to connect to, ``c.session`` its processes' session."""

    def __init__(self, cpus: int = 2, env: dict[str, str] | None = None) -> None:
        # No workers started ahead for the first driver: each sweep is a job of its own, whose tasks start the
        # workers they need, and the ones started ahead for the first were never used (~3 CPU-seconds each).
        self.cpus, self.env = cpus, {**(env or os.environ), "RAY_USAGE_STATS_ENABLED": "0",
                                     "RAY_prestart_worker_first_driver": "0", **CLIENT_ENV,
                                     # the raylet's wait for its runtime-env agent (Ray's default 30 s): the agent
                                     # imports Ray first, minutes on a busy machine
                                     "RAY_agent_register_timeout_ms": str(int(REGISTER_S * 1000))}
        self.address, self.session, self.temp = "", 0, ""

    def start(self) -> RayCluster:
        """Start the head through ``_ray_head`` (``ray start`` without its fixed 30 s for the raylet to register)."""
        port, self.temp = _free_port(), tempfile.mkdtemp(prefix="ray-")  # short: socket paths must fit 107 bytes
        head = subprocess.Popen(
            [sys.executable, "-m", "shaberi.testing._ray_head", "start", "--head", "--num-cpus", str(self.cpus),
             "--port", str(port), "--node-ip-address", "127.0.0.1", "--include-dashboard=false",
             "--disable-usage-stats", "--temp-dir", self.temp,
             *(f"--{name}-port={_free_port()}" for name in (
                 "ray-client-server", "dashboard", "dashboard-agent-listen", "dashboard-agent-grpc", "metrics-export",
                 "runtime-env-agent", "node-manager", "object-manager"))],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            preexec_fn=_ahead)
        out, _ = head.communicate(timeout=300)
        self.address, self.session = f"127.0.0.1:{port}", head.pid
        if head.returncode != 0:
            logs = self._logs()
            self.stop()
            raise RuntimeError(f"ray start failed: {out[-2000:]}\n{logs}")
        return self

    def _logs(self) -> str:
        """The ends of the head's own logs: why its raylet did not register (read before ``stop`` removes them)."""
        found = []
        for name in ("gcs_server.out", "gcs_server.err", "raylet.out", "raylet.err", "dashboard_agent.log",
                     "runtime_env_agent.log"):
            for path in Path(self.temp).glob(f"session_latest/logs/{name}"):
                with contextlib.suppress(OSError):
                    lines = path.read_text(errors="replace").splitlines()
                    found.append(f"--- {name} (last of {len(lines)} lines)\n" + "\n".join(
                        line[:300] for line in lines[-25:]))
        return "\n".join(found)

    def stop(self) -> None:
        """SIGKILL every process of the cluster's session until none is left, then remove its temp dir."""
        deadline = time.monotonic() + 30
        while self.session and (pids := session_processes(self.session)) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
