"""The commands that need no endpoint of the user's: the embedded local model (demo, serve-local), the
benchmark files (data pull) and what is installed (list)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import UsageError
from .common import DEFAULT_DATA, DEFAULT_RESULTS, DataDir, Format, ResultsDir, app, data_app, prepare_arrow
from .results import view
from .run import run_request

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["data_pull", "demo", "list_command", "serve_local"]


@data_app.command("pull")
def data_pull(
    benchmark: Annotated[str, typer.Option("--benchmark", help="all, or a comma list of the benchmarks to "
                                                              "download.")] = "all",
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Download the upstream benchmark files from the Hugging Face hub into --data-dir."""
    from ..benchmarks import pull, resolve

    for name in resolve(benchmark):
        path = pull(name, data_dir)
        typer.echo(f"{name}: {path}")



@app.command("list")
def list_command() -> None:
    """What this installation can run: the benchmarks, ensemble datasets, graders, strategies, passes and prompt
    folders, built-in ones first, then the plugins' (docs/reference/plugins.md), and the plugins loaded."""
    from ..benchmarks import BENCHMARKS
    from ..ensemble.datasets import DATASETS
    from ..ensemble.graders import GRADERS
    from ..ensemble.strategies import STRATEGIES
    from ..passes import PASSES
    from ..prompts import PROMPTS
    from ..registry import PLUGINS

    registries: list[tuple[str, Registry[Any]]] = [
        ("benchmarks", BENCHMARKS), ("datasets", DATASETS), ("graders", GRADERS), ("strategies", STRATEGIES),
        ("passes", PASSES), ("prompt folders", PROMPTS)]
    for title, registry in registries:
        typer.echo(f"{title}: {', '.join(registry) or '-'}")
    for plugin in PLUGINS.loaded:
        typer.echo(f"plugin {plugin}: {', '.join(f'{kind} {name}' for kind, name in plugin.brought) or 'nothing'}")


@app.command()
def demo(
    limit: Annotated[int, typer.Option("--limit", help="Questions per benchmark.")] = 2,
    loopback: Annotated[bool, typer.Option("--loopback", help="Use the project's canned test server instead of "
                                           "the local model: seconds instead of minutes, no model needed.")] = False,
    threads: Annotated[int | None, typer.Option(
        "--threads", help="CPU threads of the local model [default: 2 when two cores are idle, else 1].")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", envvar="SHABERI_DATA_DIR", help="Default: the "
                                                  "hand-written samples shipped in data/samples.")] = None,
) -> None:
    """Every stage end to end on a real local model (candidate and judge), offline and without a key: answers,
    judgements, the three passes, scores and the export. The scores of a 0.5B model mean nothing."""
    prepare_arrow()
    from contextlib import AbstractContextManager

    from ..generate import GenerationConfig
    from ..judging import JudgeConfig
    from ..llm.client import ClientConfig
    from ..llm.control import ControlConfig
    from ..llm.endpoints import ModelAt
    from ..passes import build
    from ..pipeline import RunRequest
    from ..resources import resource_dir

    server: AbstractContextManager
    client = ClientConfig()
    if loopback:
        from ..testing import LoopbackServer

        server, model, judge_model, note = LoopbackServer(
            latency_ms=20, models=("shaberi-loopback", "shaberi-loopback-judge")), "shaberi-loopback", \
            "shaberi-loopback-judge", "the project's loopback test server (answers are canned, scores meaningless)"
        served_as = "loopback:shaberi.testing.server"  # a free port each time: the requests are what it serves
    else:
        from ..llm.local import LocalServer, spare_threads

        threads = spare_threads() if threads is None else threads
        server = LocalServer(threads=threads)
        model = judge_model = server.name
        served_as = server.identity  # its port is a free one each time: the requests are what it serves
        client = ClientConfig(control=ControlConfig(start=2, min=1, max=2))  # llama.cpp answers one request at a time
        note = f"{model} on llama.cpp, {threads} thread(s) (a 0.5B model: the scores are not meaningful)"
    with server as endpoint:
        typer.echo(f"serving {note} at {endpoint.base_url}", err=True)
        outcome = run_request(RunRequest(model=model, base_url=endpoint.base_url, results_dir=results_dir,
                        data_dir=data_dir or resource_dir("data") / "samples", tag="demo", limit=limit,
                        judges=[ModelAt(judge_model, endpoint.base_url)],
                        passes=build("lang_mixing,repetition,format_validation"), client=client,
                        generation=GenerationConfig(max_tokens=384), judging=JudgeConfig(max_tokens=384),
                        served_as=served_as))
    if outcome.failed:  # run_request said why
        raise typer.Exit(1)
    view(tag="demo", runs=None, model=model, judge=None, format=Format.table, pricing=None, clustered_se=False,
         results_dir=results_dir)
    from ..reports.export import run_folder

    typer.echo(f"tables: {results_dir / 'tables'}; export and manifest: {run_folder(results_dir, model, 'demo')}")


@app.command("serve-local")
def serve_local(
    gguf: Annotated[Path | None, typer.Option("--gguf", help="A GGUF model file [default: the embedded "
                                              "Qwen2.5-Coder-0.5B-Instruct Q4_K_M].")] = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 to serve the model on.", min=1,
                                      max=65535)] = 8000,
    threads: Annotated[int, typer.Option("--threads", help="CPU threads; 1 when shaberi runs on the same "
                                         "machine (2 threads collapse when the other core is busy).")] = 1,
    model: Annotated[str, typer.Option("--model", help="The embedded model: qwen2.5-coder-0.5b or "
                                       "qwen2.5-coder-1.5b (install shaberi[local-1.5b]).")] = "qwen2.5-coder-0.5b",
) -> None:
    """Serve a local model on 127.0.0.1 with llama-cpp-python's OpenAI-compatible server, until Ctrl-C."""
    import signal

    from ..llm.local import MODELS, LocalServer

    if model not in MODELS:
        raise UsageError(f"--model {model!r} is not one of {', '.join(MODELS)}")
    server = LocalServer(gguf, port, threads, model=model)

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # a plain kill stops the model server too
    server.start()
    try:
        typer.echo(f"serving {server.name} at {server.base_url} with {threads} thread(s); Ctrl-C stops it")
        assert server.proc is not None
        code = server.proc.wait()
        raise UsageError(f"the local model server exited by itself with code {code}; see {server.log}")
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    typer.echo("stopped")

