"""The original Shaberi's judging, run from the user's own clone: its prompts, requests and score reading, never
copied into this project.

A clone is recognised by its ``evaluation_datasets_config.py``. That file is imported under a private name with
its model-calling module (``llm_functions``) replaced by a stand-in, so that the original's own evaluators
(``tengu_bench_evaluator`` …, found through its ``EVAL_MODEL_CONFIGS`` by dataset name) build every judging
conversation and read every reply. They are synchronous and call ``get_model_response(messages, model)``; the
stand-in makes them replayable. Given the replies so far it returns them in order, and at the first call it has no
reply for it stops the evaluator (``_Ask``: a ``BaseException``, which the original's ``except Exception`` guards
do not catch) with the messages it wanted to send. The judge stage sends them, adds the reply and replays, until
the evaluator returns: the primary call, the original's own fallback call where its parsing found no score
(2025-11 on), its patterns and its ``round()``, exactly. ``reprocess`` replays the stored replies.

What the original sends besides the messages is read the same way: its ``llm_functions.py`` is imported with
``openai`` (and ``backoff``, ``datasets``, ``litellm``) replaced by recorders, and its ``get_response_from_openai``
asked once per judge model; the body fields it gives ``chat.completions.create`` or ``responses.create`` are the
request (temperature 0 and max_tokens 1024; GPT-5.1 on the Responses API with reasoning effort none, from 2025-11).
Only what the original's judge call sets is taken (temperature, max tokens, the Responses API's reasoning): its client
options (key, URL, timeout, headers), ``extra_body``'s fields, any other field and any value holding a key are
dropped with a note, never sent or stored; what the run records of the clone passes the redaction of stored texts.
The clone's code runs in a process of its own (``python -m shaberi.judging.original CLONE``, started once per run),
fed the replies and answering with the requests and readings, one JSON line each, with the environment's credentials
replaced by a placeholder, within a time limit on its start and on each answer (``SHABERI_CLONE_TIMEOUT``: 30 s to
start, 10 s an answer). A clone that exits, crashes, hangs or answers with anything else is one line naming it: bad
input (exit 2) before any paid call; mid-run the judge stage fails (exit 1), what was paid for is kept, and the same
command resumes it. What its code prints goes nowhere.

The answer a judge sees is the candidate's reply as the endpoint returned it (``answers.raw_content``, or
``content`` where nothing was split off), after the clone's own think-block removal (``judge_answers.py``'s
``reasoning_pattern``, where it has one): trailing spaces, braces and markers stay as they are.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import hashlib
import importlib.util
import inspect
import math
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NoReturn

import orjson

from ..child import Child, ChildFailed, serve
from ..errors import PromptSetFailed, UsageError
from ..llm.params import Verbatim
from ..redact import environment_secrets, holds_secret, redact

__all__ = ["CONFIG", "MAX_CALLS", "Ask", "Clone", "Verdict", "is_clone", "load"]

CONFIG = "evaluation_datasets_config.py"
MAX_CALLS = 2  # the original asks at most twice per judgement (a reply and its fallback: both stored)
START_LIMIT, ANSWER_LIMIT = 30.0, 10.0  # seconds for the clone's process to start, and to give one answer

# How the original's answer files name a question's fields: its datasets' own columns (``Question`` for the text).
_COLUMNS: dict[str, dict[str, str]] = {
    "tengu": {"reference": "Answer", "criteria": "Criteria", "category": "Category"},
    "elyza": {"reference": "output", "criteria": "eval_aspect"},
}
_DEFAULT_COLUMNS = {"reference": "Answer", "criteria": "Criteria", "category": "category"}


@dataclass(frozen=True)
class Ask:
    """The evaluator wants a call: these messages, to the judge."""

    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class Verdict:
    """The evaluator returned: its score (None: it read none), or ``error`` when it raised on a reply."""

    score: float | None
    error: str | None = None


class _Ask(BaseException):  # not an Exception: the original's ``except Exception`` must let it through
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages


class _Replay:
    """The stand-in's state for one evaluation: the replies to give, in order; the next call beyond them stops it."""

    def __init__(self, replies: Sequence[str | None]) -> None:
        self.replies = list(replies)
        self.calls = 0

    def __call__(self, messages: list[dict[str, Any]]) -> str | None:
        if self.calls >= len(self.replies):
            raise _Ask(messages)
        self.calls += 1
        return self.replies[self.calls - 1]


_REPLAY: contextvars.ContextVar[_Replay] = contextvars.ContextVar("shaberi_original_replay")


def _get_model_response(messages: list, model_name: str = "", *_: object, **__: object) -> str | None:
    """``llm_functions.get_model_response`` as the clone's evaluators see it."""
    return _REPLAY.get()(messages)


def _missing(name: str) -> object:
    raise AttributeError(name)


def _quiet(*_: object, **__: object) -> None:
    """The clone's ``print``: its logging of every unparseable reply is not ours to show."""


class _Probed(BaseException):
    def __init__(self, api: str, kwargs: dict[str, Any]) -> None:
        self.api, self.kwargs = api, kwargs


def _recorder(api: str) -> Callable[..., object]:
    def create(**kwargs: object) -> object:
        raise _Probed(api, kwargs)

    return create


class _FakeOpenAI:
    """``openai.OpenAI`` for the probe: every create call is recorded and stops the caller."""

    def __init__(self, **_: object) -> None:
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=_recorder("chat")))
        self.responses = types.SimpleNamespace(create=_recorder("responses"))


def _module(name: str, **attrs: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def _probe_stubs() -> dict[str, types.ModuleType]:
    """What the clone's ``llm_functions.py`` imports, replaced: nothing it does can reach the network."""
    decorator = lambda *_a, **_k: (lambda fn: fn)  # noqa: E731
    return {
        "openai": _module("openai", OpenAI=_FakeOpenAI),
        "backoff": _module("backoff", on_exception=decorator, on_predicate=decorator, fibo=None, expo=None,
                           constant=None),
        "datasets": _module("datasets", Dataset=object, load_dataset=None),
        "litellm": _module("litellm", completion=_recorder("chat"), set_verbose=False),
    }


@contextlib.contextmanager
def _modules(replaced: dict[str, types.ModuleType]) -> Iterator[None]:
    saved = {name: sys.modules.get(name) for name in replaced}
    sys.modules.update(replaced)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _import(path: Path, name: str, replaced: dict[str, types.ModuleType]) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__dict__["print"] = _quiet
    try:
        with _modules(replaced):
            spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # the user's file: any failure, an exit too, is bad input, named
        raise UsageError(f"--judge-prompts {path}: importing it raised {type(exc).__name__}: {exc} (is {path.parent} "
                         "a clone of the original Shaberi, github.com/shisa-ai/shaberi?)") from None
    return module


def _commit(path: Path) -> tuple[str | None, bool]:
    """The clone's commit, and whether its judging files differ from it (no git: None)."""
    if not (path / ".git").exists():
        return None, False
    try:
        head = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--", CONFIG, "llm_functions.py",
                                "judge_answers.py"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, False
    return head or None, bool(dirty.strip())


def _think_pattern(path: Path) -> re.Pattern[str] | None:
    """``reasoning_pattern`` of the clone's ``judge_answers.py`` (its think-block removal before judging; older
    clones have none), read from the source: the file imports ``datasets`` and runs nothing we need."""
    file = path / "judge_answers.py"
    if not file.is_file():
        return None
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:  # the original could not have run it either
        raise UsageError(f"--judge-prompts {file}: it cannot be read as Python ({type(exc).__name__}: {exc})"
                         ) from None
    constants: dict[str, object] = {}  # module-level literals before it (a pattern's text given a name)
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if name != "reasoning_pattern":
            with contextlib.suppress(ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                constants[name] = ast.literal_eval(node.value)
            continue
        try:
            value = eval(compile(ast.Expression(node.value), str(file), "eval"),
                         {"re": re, "__builtins__": {}, **constants})
        except Exception as exc:
            raise UsageError(f"--judge-prompts {file}: its reasoning_pattern cannot be read ({exc})") from None
        if isinstance(value, re.Pattern):
            return value
    return None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_clone(path: Path) -> bool:
    return (path / CONFIG).is_file()


@dataclass
class Clone:
    """An original Shaberi clone, loaded: its evaluators by Shaberi benchmark name, its think-block removal, and
    what identifies it (``label``, ``provenance``)."""

    path: Path
    given: str  # the path as the user gave it
    child: _Child  # where its code runs
    evaluators: dict[str, str]  # Shaberi benchmark -> the name of the clone's evaluator function
    functions: dict[str, str]  # sha256 of the source of each function its config defines
    think: re.Pattern[str] | None
    commit: str | None
    dirty: bool
    _requests: dict[str, Verbatim] = field(default_factory=dict)
    _dropped: dict[str, list[str]] = field(default_factory=dict)

    @cached_property
    def files(self) -> dict[str, str]:
        """sha256 of each file the judging reads."""
        names = (CONFIG, "llm_functions.py", "judge_answers.py")
        return {n: _sha((self.path / n).read_bytes()) for n in names if (self.path / n).is_file()}

    @cached_property
    def label(self) -> str:
        """What judgements under this prompt set are labelled with: ``original:`` and 7 digits of the hash over its
        judging files (``prompt_hash``), whatever the clone's commit (recorded in ``provenance``): the same prompts
        are one prompt set, from any checkout or copy, and a commit that changes none of them changes nothing."""
        return f"original:{self.prompt_hash()[:7]}"

    def prompt_hash(self) -> str:
        """One hash over what shapes a judgement: the three files (prompts, requests, think-block removal)."""
        return _sha("\0".join(f"{k}={v}" for k, v in sorted(self.files.items())).encode())[:16]

    def provenance(self) -> dict[str, Any]:
        """What the run's row and manifest record of the prompt set, through the redaction every stored text
        passes."""
        found = _redacted({"kind": "original", "label": self.label, "path": self.given, "commit": self.commit,
                          "dirty": self.dirty, "files": self.files, "functions": self.functions,
                          "think_pattern": self.think.pattern if self.think else None,
                          "requests": {m: {"api": r.api, **r.fields} for m, r in sorted(self._requests.items())},
                          "dropped": {m: d for m, d in sorted(self._dropped.items()) if d}})
        assert isinstance(found, dict)
        return found

    def request(self, judge: str) -> Verbatim:
        """What the clone's ``llm_functions.py`` sends ``judge`` besides the messages (probed once per model, in the
        clone's process)."""
        if judge not in self._requests:
            fields, api, dropped = self.child.ask({"request": judge}, f"saying what it sends {judge!r}", "request")
            self._requests[judge], self._dropped[judge] = Verbatim(fields, api), dropped
        return self._requests[judge]

    def dropped(self, judge: str) -> list[str]:
        """The fields the clone's request for ``judge`` passes that are not sent (its client options, fields the
        original's judge call does not set, a value holding a key): names only."""
        self.request(judge)
        return self._dropped[judge]

    def row(self, benchmark: str, question: Mapping, answer: str) -> dict[str, Any]:
        """The row of the original's answer file for this question and answer: the dataset's columns, ``id``, and
        ``ModelAnswer`` after the clone's think-block removal."""
        names = _COLUMNS.get(benchmark, _DEFAULT_COLUMNS)
        qid = str(question["question_id"])
        row: dict[str, Any] = {"id": int(qid) if qid.isdigit() else qid, "Question": question["turns"][-1]}
        for field_name, column in names.items():
            row[column] = question.get(field_name)
        row["ModelAnswer"] = self.think.sub("", answer) if self.think else answer
        return row

    def read(self, benchmark: str, row: dict[str, Any], judge: str, replies: Sequence[str | None]) -> Ask | Verdict:
        """Run the clone's evaluator on ``row`` with ``replies`` as the judge's answers so far (in its process): the
        call it asks next (``Ask``), or its score (``Verdict``). ``PromptSetFailed`` when the process fails."""
        answer = self.child.ask({"read": [benchmark, row, judge, list(replies)]},
                                f"reading a {benchmark} judgement", "ask", "verdict")
        if "ask" in answer:
            return Ask(answer["ask"])
        score, error = answer["verdict"]
        return Verdict(score, error)

    def check(self, benchmarks: Sequence[str], questions: Mapping[str, Sequence[Mapping]],
              judges: Sequence[str] = ()) -> None:
        """Before any call: every benchmark has an evaluator, each renders its first call for every question (a
        prompt function that raises is bad input, named), and the clone says what it sends each judge. Its
        process failing meanwhile is bad input too."""
        try:
            self._check(benchmarks, questions)
            for judge in judges:
                self.request(judge)
        except PromptSetFailed as exc:
            raise UsageError(str(exc)) from None

    def _check(self, benchmarks: Sequence[str], questions: Mapping[str, Sequence[Mapping]]) -> None:
        if missing := [b for b in benchmarks if b not in self.evaluators]:
            raise UsageError(f"--judge-prompts {self.given}: the original judges no {', '.join(missing)} (it judges "
                             f"{', '.join(sorted(self.evaluators)) or 'nothing Shaberi knows'}); leave "
                             f"{'it' if len(missing) == 1 else 'them'} out with --benchmark")
        for name in benchmarks:
            for question in questions.get(name, ()):
                step = self.read(name, self.row(name, question, "（回答）"), "judge", [])
                if isinstance(step, Verdict):
                    why = (step.error or "").replace("the original's ", "its ", 1) or (
                        f"its {self.evaluators[name]} returned without asking the judge")
                    raise UsageError(f"--judge-prompts {self.given}: {why} judging "
                                     f"{name} question {question['question_id']}; fix the clone or check out a "
                                     "commit that works (docs: prompt sets)")


def _redacted(value: object) -> object:
    secrets = environment_secrets()
    if isinstance(value, dict):
        return {redact(str(k), secrets): _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return redact(value, secrets) if isinstance(value, str) else value


def _asked(messages: object, evaluator: str) -> Ask | Verdict:
    """The messages an evaluator asked a call with, if they are what a chat request holds (a list of role and text
    content, encodable as JSON); else no judgement, and the reason."""
    listed = messages if isinstance(messages, list) else []
    ok = bool(listed) and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                              and isinstance(m.get("content"), str) for m in listed)
    if ok:
        try:
            orjson.dumps(listed)
        except TypeError:
            ok = False
    if not ok:
        return Verdict(None, f"the original's {evaluator} asked the judge with {str(messages)[:80]!r}, not a list of "
                             "{role, content} messages")
    return Ask([dict(m) for m in listed])


def _innermost(exc: BaseException, file: str | None) -> str | None:
    """The clone's function that raised: the innermost frame in its file."""
    name, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == file:
            name = tb.tb_frame.f_code.co_name
        tb = tb.tb_next
    return name


def _probe(path: Path, judge: str) -> tuple[Verbatim, list[str]]:
    """Ask the clone's ``llm_functions.py`` for ``judge`` once, with ``openai`` recorded: its judge request, and the
    names of the fields it passes that are not sent (``_fields``)."""
    file = path / "llm_functions.py"
    if not file.is_file():
        raise UsageError(f"--judge-prompts {path}: no llm_functions.py, which says what the original sends a "
                         "judge; give the whole clone")
    module = _import(file, f"_shaberi_original_llm_{_sha(file.read_bytes())[:12]}", _probe_stubs())
    # Its OpenAI-compatible judge request (every version's gpt-*/gemini judges; its router is not asked: its other
    # branches call hosts of their own). The clone's code runs here: it is trusted as the user's own.
    fn = getattr(module, "get_response_from_openai", None) or getattr(module, "get_model_response", None)
    if not callable(fn):
        raise UsageError(f"--judge-prompts {path}: its llm_functions.py has no get_response_from_openai, which says "
                         "what the original sends a judge")
    try:
        fn([{"role": "user", "content": "probe"}], judge)
    except _Probed as done:
        fields, dropped = _fields(done.api, done.kwargs)
        return Verbatim(fields, done.api), dropped
    except (Exception, SystemExit) as exc:
        raise UsageError(f"--judge-prompts {path}: its {fn.__name__} raised {type(exc).__name__}: {exc} when asked "
                         f"what it sends {judge!r}") from None
    raise UsageError(f"--judge-prompts {path}: its {fn.__name__} makes no OpenAI client request for judge {judge!r} "
                     "(chat.completions.create or responses.create), so what it sends cannot be read")


# What the original's judge call sets besides the model and the messages, per API: the only fields a clone's request
# is taken with. Anything else it passes (its client options: the key, the URL, headers; extra_body's fields; a
# field Shaberi does not know), or a value that holds a key, is dropped with a note: never sent, never stored.
_SENT = {"chat": {"temperature", "max_tokens", "max_completion_tokens"},
         "responses": {"temperature", "max_output_tokens", "reasoning"}}
_CALL = {"model", "messages", "input"}  # Shaberi's own: the judge's name and the conversation


def _fields(api: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The body fields of a recorded create call that Shaberi sends (``extra_body``'s among them, as the client
    merges it), and the names of the ones it drops (see ``_SENT``)."""
    extra = kwargs.get("extra_body")
    offered = {k: v for k, v in kwargs.items() if k not in _CALL and k != "extra_body"}
    offered |= extra if isinstance(extra, dict) else {}
    dropped = ["extra_body"] if extra is not None and not isinstance(extra, dict) else []
    secrets = environment_secrets()
    fields = {}
    for name, value in offered.items():
        try:
            orjson.dumps(value)
            usable = name in _SENT[api] and not holds_secret(value, secrets)
        except TypeError:
            usable = False
        if usable:
            fields[name] = value
        else:
            dropped.append(name)
    return fields, sorted(dropped)


def load(path: Path, given: str | None = None) -> Clone:
    """Start the clone's process, which imports its judging (bad input, one line, when it cannot)."""
    given = given or str(path)
    child = _Child(path, given)
    ready = child.ready
    commit, dirty = _commit(path)
    return Clone(path, given, child, ready["evaluators"], ready["functions"], _think_pattern(path), commit, dirty)


def _limits() -> tuple[float, float]:
    """(start, answer) in seconds; ``SHABERI_CLONE_TIMEOUT`` sets both."""
    given = os.environ.get("SHABERI_CLONE_TIMEOUT")
    try:
        seconds = float(given) if given else None
    except ValueError:
        raise UsageError(f"SHABERI_CLONE_TIMEOUT={given!r}: give seconds, e.g. 30") from None
    return (seconds, seconds) if seconds is not None and seconds > 0 else (START_LIMIT, ANSWER_LIMIT)


class _Child:
    """The clone's code in a process of its own (``python -m shaberi.judging.original CLONE``: ``_serve``), started
    once per run, each answer within a time limit (``child.Child``); the first failure (it exited, hung, or answered
    with anything else) is kept and said again to every later request."""

    def __init__(self, path: Path, given: str) -> None:
        self.given, self.failed = given, ""
        self.start, self.limit = _limits()
        self.child = Child("shaberi.judging.original", str(path))
        try:
            self.ready = self._answer(None, self.start, "while starting (importing its evaluation_datasets_config.py)",
                                      ("ready",))["ready"]
        except PromptSetFailed as exc:
            raise UsageError(str(exc)) from None

    def ask(self, message: dict[str, Any], doing: str, *keys: str) -> Any:
        """Send ``message``; the answer under one of ``keys`` (its value; the whole answer for several keys)."""
        with self.child.lock:
            if self.failed:
                raise PromptSetFailed(self.failed)
            answer = self._answer(message, self.limit, doing, keys)
            return answer[keys[0]] if len(keys) == 1 else answer

    def _answer(self, message: dict[str, Any] | None, limit: float, doing: str, keys: Sequence[str]) -> dict[str, Any]:
        try:
            answer = self.child.ask(message, limit)
        except ChildFailed as exc:
            self._fail(f"{exc.reason} {doing}")
        if isinstance(answer.get("error"), str):  # its own bad input, said by it
            raise UsageError(answer["error"])
        if not any(k in answer for k in keys):
            self._fail(f"answered {orjson.dumps(answer)[:80]!r} {doing}, not {' or '.join(keys)}")
        return answer

    def _fail(self, reason: str) -> NoReturn:
        self.child.stop()
        self.failed = (f"--judge-prompts {self.given}: the clone's code {reason}; it runs in a process of its own, "
                       f"with {self.start:g} s to start and {self.limit:g} s for each answer (SHABERI_CLONE_TIMEOUT)")
        raise PromptSetFailed(self.failed)


def _serve(path: Path) -> None:
    """The clone's process: import its judging, then answer each request line (``_Child``) until stdin closes."""
    from .. import benchmarks as bm

    requests, send = serve()
    try:
        module, evaluators = _load_here(path, bm.registry())
    except UsageError as exc:
        send({"error": str(exc)})
        return
    send({"ready": {"evaluators": {b: fn.__name__ for b, fn in evaluators.items()}, "functions": _functions(module)}})
    for message in requests:
        if "read" in message:
            benchmark, row, judge, replies = message["read"]
            step = _evaluate(evaluators[benchmark], module.__file__, row, judge, replies)
            send({"ask": step.messages} if isinstance(step, Ask) else {"verdict": [step.score, step.error]})
        elif "request" in message:
            try:
                verbatim, dropped = _probe(path, message["request"])
            except UsageError as exc:
                send({"error": str(exc)})
                continue
            send({"request": [dict(verbatim.fields), verbatim.api, dropped]})


def _load_here(path: Path, registry: Mapping[str, Mapping]) -> tuple[types.ModuleType, dict[str, Callable]]:
    """Import the clone's config, with its model-calling module replaced by the stand-in, and find its evaluators
    by Shaberi benchmark name."""
    file = path / CONFIG
    # every model-calling function it may import (the first versions imported get_response_from_openai)
    stub = _module("llm_functions", get_model_response=_get_model_response,
                   __getattr__=lambda name: _get_model_response if name.startswith("get_") else _missing(name))
    module = _import(file, f"_shaberi_original_{_sha(file.read_bytes())[:12]}", {"llm_functions": stub})
    module.__dict__["get_model_response"] = _get_model_response  # however it imported it
    configs = getattr(module, "EVAL_MODEL_CONFIGS", None)
    if not isinstance(configs, dict):
        raise UsageError(f"--judge-prompts {file}: no EVAL_MODEL_CONFIGS dict (is it the original Shaberi's?)")
    by_repo = {str(e["hf_repo"]): name for name, e in registry.items() if e.get("hf_repo")}
    evaluators = {}
    for dataset, entry in configs.items():
        fn = entry.get("evaluator_function") if isinstance(entry, dict) else None
        if dataset in by_repo and callable(fn):
            evaluators[by_repo[dataset]] = fn
    return module, evaluators


def _functions(module: types.ModuleType) -> dict[str, str]:
    """sha256 of the source of each function the clone's config defines (its prompt builders, evaluators and
    parsers)."""
    found = {}
    for name, fn in vars(module).items():
        if inspect.isfunction(fn) and fn.__module__ == module.__name__:
            with contextlib.suppress(OSError, TypeError):
                found[name] = _sha(inspect.getsource(fn).encode())
    return dict(sorted(found.items()))


def _evaluate(evaluator: Callable, file: str | None, row: dict[str, Any], judge: str, replies: Sequence[str | None]
              ) -> Ask | Verdict:
    """One evaluator run on ``row`` with ``replies`` as the judge's answers so far: the call it asks next, or its
    score (in the clone's process)."""
    token = _REPLAY.set(_Replay(replies))
    try:
        result = evaluator(dict(row), judge)
    except _Ask as ask:
        return _asked(ask.messages, evaluator.__name__)
    except (Exception, SystemExit) as exc:  # a reply the original's own code cannot take (a null reply)
        where = _innermost(exc, file) or evaluator.__name__
        return Verdict(None, f"the original's {where} raised {type(exc).__name__}: {exc}"[:500])
    finally:
        _REPLAY.reset(token)
    score = result.get("score") if isinstance(result, dict) else result
    if score is None:
        return Verdict(None)
    try:
        number = None if isinstance(score, bool) or not isinstance(score, int | float) else float(score)
    except OverflowError:  # an int beyond the doubles
        number = None
    if number is None or not math.isfinite(number):
        return Verdict(None, f"the original's {evaluator.__name__} returned {str(score)[:80]}, not a number")
    return Verdict(number)


if __name__ == "__main__":
    _serve(Path(sys.argv[1]))
