"""Run ``python -m shaberi ARGS`` as a real process, without paying for Python's imports each time.

A server process imports the command line and its heavy dependencies once, single-threaded, then forks one
child per call: the child is a fresh process (its own environment, working directory, file descriptors, signal
dispositions and exit code, ``atexit`` handlers run), as ``subprocess.run`` would give, in a few milliseconds
instead of half a second. The server reaps each child and sends its wait status back on the call's connection.

Used by ``conftest.shaberi``; a test that signals or kills the process it starts uses ``subprocess`` itself.
What the interpreter reads only when it starts is the server's in every child: the hash seed, ``PYTHONIOENCODING``,
``PYTHONWARNINGS``, ``PYTHONUTF8`` (``PYTHONPATH`` is applied, by prepending it to ``sys.path``); stdin is
/dev/null. No test depends on them.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import NoReturn

__all__ = ["ForkServer"]

# What most children import anyway, imported once in the server. Forking needs a server with one thread: OpenBLAS
# (numpy) and Arrow's jemalloc start threads when loaded unless told not to; polars starts its pool, so each child
# imports it itself.
PRELOAD = ["shaberi.cli", "shaberi.pipeline", "shaberi.tables.sql", "shaberi.tables.store", "shaberi.reports.view",
           "shaberi.reports.compare", "duckdb", "pyarrow", "pyarrow.parquet", "rich.console", "aiohttp",
           "scipy.stats", "orjson", "jinja2"]
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
# Per-process tables worth computing once: (module, function) called in the server, their caches inherited.
WARM = [("shaberi.unicode_scripts", "_tables"), ("shaberi.cli", "_command"), ("shaberi.run_info", "git_state"),
        ("shaberi.run_info", "package_versions")]

def serve(path: str) -> None:
    """The server: import PRELOAD, listen on the UNIX socket ``path``, fork a child per connection and send each
    child's wait status back on its connection. Run as ``python tests/forkserver.py PATH``."""
    for name in PRELOAD:
        importlib.import_module(name)
    for module, function in WARM:
        getattr(importlib.import_module(module), function)()
    # Everything imported so far out of the collector's sight: a child's collections (statsmodels' Holm calls
    # gc.collect) then walk its own objects only, instead of every object of the server, which copied each page.
    gc.freeze()
    threads = len(os.listdir("/proc/self/task"))
    assert threads == 1, f"forking needs a single-threaded server; the imports started {threads - 1} threads"
    listener = socket.socket(socket.AF_UNIX)
    with contextlib.suppress(FileNotFoundError):  # a server before this one (killed) left its socket
        os.unlink(path)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    calls: dict[int, socket.socket] = {}  # child pid -> the connection its status goes back on
    while True:
        ready, _, _ = select.select([listener], [], [], 0.005)
        while calls and (ended := os.waitpid(-1, os.WNOHANG))[0]:
            conn = calls.pop(ended[0])
            with contextlib.suppress(OSError):  # the caller gave up (its timeout killed the child)
                conn.sendall(struct.pack("!i", ended[1]))
            conn.close()
        if not ready:
            if os.getppid() == 1:  # the test process is gone
                return
            continue
        conn, _ = listener.accept()
        request = json.loads(conn.makefile("rb").readline())
        if pid := os.fork():
            conn.sendall(struct.pack("!i", pid))
            calls[pid] = conn
            continue
        listener.close()
        conn.close()
        _child(request)


def _child(request: dict) -> NoReturn:
    """Become ``python -m shaberi ARGS`` in the request's directory, environment and files, and end as the
    interpreter would, less tearing down every module the server imported."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.setsid()  # its own process group: a timeout kills whatever it started too
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    given = [path for path in request["env"].get("PYTHONPATH", "").split(os.pathsep) if path]
    sys.path[:0] = [path for path in given if path not in sys.path]  # as the interpreter reads it when it starts
    for fd, name, mode in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                           (2, request["stderr"], os.O_WRONLY)):
        target = os.open(name, mode)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = ["python -m shaberi", *request["args"]]  # the name click shows in usage lines, as under -m
    from shaberi.cli import main

    code = 0
    try:
        main(request["args"])
    except SystemExit as exc:  # sys.exit(None | code | message)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what interpreter exit does: wait for threads,
    atexit._run_exitfuncs()  # run atexit handlers, flush the buffers
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class ForkServer:
    """One per test process, started on first use."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="shaberi-fork-")
        self._path = os.path.join(self._dir, "s")
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None

    def _started(self) -> str:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = subprocess.Popen([sys.executable, __file__, self._path],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                                              env={**os.environ, **SINGLE_THREADED})
                assert self._proc.stdout is not None and self._proc.stdout.readline() == "ready\n", \
                    "the fork server did not start"
        return self._path

    def run(self, args: list[str], env: dict[str, str], cwd: Path | None,
            timeout: float) -> subprocess.CompletedProcess[str]:
        """``subprocess.run([python, -m, shaberi, *args], capture_output=True, text=True)``, forked."""
        where = Path(cwd or os.getcwd()).resolve()  # relative to this process, as subprocess reads it
        if not where.is_dir():
            raise FileNotFoundError(f"no such directory: {where}")
        with tempfile.TemporaryDirectory(dir=self._dir) as tmp:
            out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
            Path(out).touch()
            Path(err).touch()
            request = {"args": args, "env": env, "cwd": str(where), "stdout": out, "stderr": err}
            with socket.socket(socket.AF_UNIX) as conn:
                conn.connect(self._started())
                conn.sendall(json.dumps(request).encode() + b"\n")
                (pid,) = struct.unpack("!i", _read(conn, 4))
                conn.settimeout(timeout)
                try:
                    (status,) = struct.unpack("!i", _read(conn, 4))
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(["shaberi", *args], timeout) from None
            code = os.waitstatus_to_exitcode(status)
            return subprocess.CompletedProcess(["shaberi", *args], code, Path(out).read_text(encoding="utf-8"),
                                               Path(err).read_text(encoding="utf-8"))

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)


def _read(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        if not (chunk := conn.recv(n - len(data))):
            raise ConnectionError("the fork server closed the connection")
        data += chunk
    return data


if __name__ == "__main__":
    serve(sys.argv[1])
