"""Templates render in Jinja's immutable sandbox, each render bounded in time, in what it produces, and — for a
template Shaberi did not write — by a process of its own.

A team's judging templates (``--judge-prompts FOLDER``) and a plugin's are code Shaberi did not write. The sandbox
keeps them from Python's internals (no ``__class__``, no mutating a list, no ``str.format`` reaching attributes);
the bounds keep one render from hanging a run or exhausting memory: every loop iteration, call, filter and
operator checks the render's clock (``TIME_LIMIT``), and every value a render makes — each operator's, call's and
filter's result, each join and the output itself — is charged against ``SIZE_LIMIT`` characters (items for a list,
bytes for a number), with the operations that could make a huge value in one step (``*``, ``**``, ``%``, a width, a
``replace``, a ``join``) estimated before they run. Past either bound the render raises ``RenderLimit``, a
``jinja2.TemplateError``: the caller names the template, as bad input before any call, or as one judgement's
``prompt_error`` later.

Those checks run between steps, so one step that is long on its own (comparing two deeply shared nested lists,
``sum`` of lists in C, ``wordwrap`` of a long word in Python) would pass them. So a template that is not ours
renders in ``Renderer``'s process (``python -m shaberi.prompts``), whose address space is capped
(``MEMORY_LIMIT``) and which is killed once a render takes ``GRACE`` past ``TIME_LIMIT``: the same ``RenderLimit``,
and the next render starts a new one. Ours (``prompts/``) render here, as fast as before.
"""

from __future__ import annotations

import base64
import contextlib
import os
import pickle
import re
import resource
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.environment import TemplateModule
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from .child import Child, ChildFailed, environment, serve

__all__ = ["GRACE", "MEMORY_LIMIT", "SIZE_LIMIT", "TIME_LIMIT", "BoundedEnvironment", "Made", "RenderLimit", "Renderer",
           "module", "render", "serve_renders"]

TIME_LIMIT = 2.0  # seconds one render may take
GRACE = 1.0  # seconds past TIME_LIMIT before the render process is killed (its own clock ends a render first)
START_LIMIT = 30.0  # seconds the render process may take to start (importing Jinja), on a busy machine too
MEMORY_LIMIT = 1 << 30  # bytes of address space the render process may hold
# All the render process needs of the environment: it renders, and reads nothing else.
_ENVIRONMENT = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "PYTHONPATH", "SYSTEMROOT"})
SIZE_LIMIT = 4 << 20  # characters (list items, number bytes) one render may produce in all
_INT_BITS = 4096  # no template needs a larger number; 10**10**6 would take the clock's bound in one step


class RenderLimit(SecurityError):
    """A render passed its time or size bound (or recursed without end)."""


@dataclass
class _Budget:
    deadline: float
    left: int


_BUDGET: ContextVar[_Budget | None] = ContextVar("shaberi_render_budget", default=None)


def _size(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value.bit_length() // 8
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


def _tick() -> _Budget | None:
    budget = _BUDGET.get()
    if budget is not None and time.monotonic() > budget.deadline:
        raise RenderLimit(f"the render took longer than {TIME_LIMIT:g} s")
    return budget


def _charge(size: int, spent: bool = True) -> None:
    """Take ``size`` from the render's budget; ``spent=False``: only check that it would fit (an estimate)."""
    budget = _tick()
    if budget is None:
        return
    if size > budget.left:
        raise RenderLimit(f"the render would make more than {SIZE_LIMIT >> 20} MB of text")
    if spent:
        budget.left -= size


_WIDTHS = re.compile(r"\d+")


def _formatted(fmt: str, args: Iterable[object]) -> int:
    """What formatting ``fmt`` with ``args`` may make at most: every field the largest argument (a mapping's
    values), every width written in it, and, where a width can be an argument (``%*s``, ``{:{}}``), every number."""
    values = [v for a in args for v in (a.values() if isinstance(a, dict) else [a])]
    widths = "*" in fmt or "{" in fmt
    largest = max((len(v) if isinstance(v, str) else abs(v) if widths and isinstance(v, int) and
                   not isinstance(v, bool) else 64 for v in values), default=0)
    written = _WIDTHS.findall(fmt)
    fields = fmt.count("%") + fmt.count("{")
    return len(fmt) + fields * largest + sum(int(w) for w in written if len(w) < 12) + (
        SIZE_LIMIT if any(len(w) >= 12 for w in written) else 0)


def _joined(sep: object, items: object) -> int:
    """What ``sep.join(items)`` may make: a string or a range is joined item by item too."""
    if isinstance(items, (str, range)):
        items = list(items) if isinstance(items, range) else items
    if not isinstance(sep, str) or not isinstance(items, (str, list, tuple)):
        return 0
    return len(sep) * len(items) + (len(items) if isinstance(items, str) else
                                    sum(len(x) if isinstance(x, str) else 20 for x in items))


def _estimate(name: str, subject: object, args: tuple, kwargs: dict[str, Any]) -> int:
    """What a filter or a method may make before it runs, where one step could make a huge value."""
    given = [*args, *kwargs.values()]
    big = max((abs(a) for a in given if isinstance(a, int) and not isinstance(a, bool)), default=0)
    if isinstance(subject, str):
        if name == "replace" and len(given) >= 2 and isinstance(given[0], str) and isinstance(given[1], str):
            return len(subject) + (subject.count(given[0]) + 1) * len(given[1])
        if name == "indent":  # a width of spaces, or a string, before every line
            width = given[0] if given else 4
            return len(subject) + (subject.count("\n") + 1) * (len(width) if isinstance(width, str) else big)
        if name == "expandtabs":
            return len(subject) + subject.count("\t") * (big or 8)
        if name == "format":
            return _formatted(subject, given)
    if name == "join":  # the method (separator, items), or the filter (items, separator)
        return _joined(subject, given[0]) if isinstance(subject, str) and given else _joined(
            given[0] if given else "", subject)
    if name == "generate_lorem_ipsum":  # lipsum(n, html, min, max): n paragraphs of up to max words
        n = args[0] if args else kwargs.get("n", 5)
        most = args[3] if len(args) > 3 else kwargs.get("max", 100)
        return abs(n) * abs(most) * 12 if isinstance(n, int) and isinstance(most, int) else big
    return big


def _binop(operator: str, left: object, right: object) -> int:
    sized = (str, bytes, list, tuple)
    if operator == "*":
        if isinstance(left, sized) and isinstance(right, int):
            return len(left) * max(right, 0)
        if isinstance(right, sized) and isinstance(left, int):
            return len(right) * max(left, 0)
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > _INT_BITS:
            return SIZE_LIMIT + 1
    if (operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1
            and left.bit_length() * min(right, _INT_BITS + 1) > _INT_BITS):
        return SIZE_LIMIT + 1
    if operator == "%" and isinstance(left, str):
        return _formatted(left, right if isinstance(right, tuple) else (right,))
    if operator == "+" and isinstance(left, sized) and isinstance(right, sized):
        return _size(left) + _size(right)
    return 0


class _Generator(CodeGenerator):
    """Jinja's code generator with every ``for`` loop over ``environment.each`` (the clock, per item) and every
    ``~`` through ``environment.joined`` (charged), so a loop cannot spin or a concatenation grow unseen."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        for loop in node.find_all(nodes.For):
            loop.iter = nodes.Call(nodes.EnvironmentAttribute("each"), [loop.iter], [], None, None,
                                   lineno=loop.iter.lineno)
        super().visit_Template(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.joined((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)  # keeps jinja's pass_context/pass_eval_context mark
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if _BUDGET.get() is None:  # jinja folding a constant while it compiles: left to the render, bounded
            raise nodes.Impossible()
        values = [a for a in args if not isinstance(a, (jinja2.runtime.Context, jinja2.nodes.EvalContext,
                                                        jinja2.Environment))]
        subject, rest = (values[0], tuple(values[1:])) if values else (None, ())
        _charge(_estimate(name, subject, rest, kwargs), spent=False)
        result = fn(*args, **kwargs)
        _charge(_size(result))
        return result
    return bounded


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with the bounds of one render (checked while ``render`` or ``module`` runs)."""

    code_generator_class = _Generator
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters = _Filters(self.filters)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        bound = getattr(__obj, "__self__", getattr(getattr(__obj, "__wrapped__", None), "__self__", None))
        _charge(_estimate(getattr(__obj, "__name__", ""), bound, args, kwargs), spent=False)
        result = super().call(__context, __obj, *args, **kwargs)
        _charge(_size(result))
        return result

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        _charge(_binop(operator, left, right), spent=False)
        result = super().call_binop(context, operator, left, right)
        _charge(_size(result))
        return result

    def concat(self, chunks: Iterable[str]) -> str:  # every buffer, and render()'s output
        return "".join(_charged(chunks))

    @staticmethod
    def each(items: Iterable[Any]) -> Iterator[Any]:
        for item in items:
            _tick()
            yield item

    @staticmethod
    def joined(parts: Iterable[object]) -> str:
        text = "".join(map(str, parts))
        _charge(len(text))
        return text


class _Filters(dict[str, Callable[..., Any]]):
    """Every filter, the ones added later too, bounded."""

    def __init__(self, filters: dict[str, Callable[..., Any]]) -> None:
        super().__init__()
        for name, fn in filters.items():
            self[name] = fn

    def __setitem__(self, name: str, fn: Callable[..., Any]) -> None:
        super().__setitem__(name, _bounded_filter(name, fn))


def _charged(chunks: Iterable[str]) -> Iterator[str]:
    for chunk in chunks:
        _charge(len(chunk))
        yield chunk


def _bounded(run: Callable[[], Any]) -> Any:
    """``run`` under a fresh budget. Past it, or on a recursion without end, ``RenderLimit``; any other error of
    the template's own code (``1/0``, a wrong type) a ``TemplateRuntimeError``: the template is wrong, bad input
    to name, never a traceback."""
    token = _BUDGET.set(_Budget(time.monotonic() + TIME_LIMIT, SIZE_LIMIT))
    try:
        return run()
    except RecursionError:
        raise RenderLimit("the render recursed without end") from None
    except MemoryError:
        raise RenderLimit("the render ran out of memory") from None
    except jinja2.TemplateError:
        raise
    except Exception as exc:
        raise jinja2.TemplateRuntimeError(f"{type(exc).__name__}: {exc}") from None
    finally:
        _BUDGET.reset(token)


def render(template: jinja2.Template, context: dict[str, Any]) -> str:
    """``template.render(**context)``, bounded."""
    return str(_bounded(lambda: template.render(**context)))


def module(template: jinja2.Template, context: dict[str, Any]) -> TemplateModule:
    """``template.make_module(context)`` (its text and its exported variables: ``system``), bounded."""
    def run() -> TemplateModule:
        ctx = template.new_context(context)
        made = TemplateModule(template, ctx, body_stream=list(_charged(template.root_render_func(ctx))))
        _charge(0)
        return made
    return _bounded(run)  # type: ignore[no-any-return]


# -- a process of its own ----------------------------------------------------------------------------------------

# What the render process's errors are here, by name (anything else: a TemplateRuntimeError saying what it was).
_ERRORS: dict[str, type[jinja2.TemplateError]] = {cls.__name__: cls for cls in (
    RenderLimit, SecurityError, jinja2.UndefinedError, jinja2.TemplateNotFound, jinja2.TemplateRuntimeError,
    jinja2.TemplateAssertionError, jinja2.TemplateSyntaxError)}

Made = tuple[str, str]  # a render's text and its ``system`` variable


class Renderer:
    """Renders in a process of its own (``python -m MODULE``, which runs ``serve_renders``), started on first use and
    again after one is killed. One render at a time (a lock); a process forked from ours starts its own."""

    def __init__(self, module: str) -> None:
        self.module = module
        self._child: Child | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def made(self, roots: tuple[str, ...], judging: str | None, template: str, context: dict[str, Any]) -> Made:
        """``template`` (looked up in ``judging``, then ``roots``) made with ``context``, in the render process."""
        try:
            sent = pickle.dumps((roots, judging, template, context))
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:  # a lambda in a question
            raise jinja2.TemplateRuntimeError(f"its context cannot be sent to the render process ({exc})") from None
        request = {"render": base64.b64encode(sent).decode()}
        with self._lock:
            child = self._started()
            try:
                answer = child.ask(request, TIME_LIMIT + GRACE)
            except ChildFailed as exc:
                self._child = None
                if exc.late:
                    raise RenderLimit(f"the render took longer than {TIME_LIMIT:g} s") from None
                raise RenderLimit(f"the render process {exc.reason} (its bounds: {MEMORY_LIMIT >> 20} MB, "
                                  f"{TIME_LIMIT:g} s)") from None
        match answer:
            case {"text": str(text), "system": str(system)}:
                return text, system
            case {"error": [str(kind), str(message), int() | None as lineno]}:
                cls = _ERRORS.get(kind)
                if cls is not None and issubclass(cls, jinja2.TemplateSyntaxError):  # an unknown filter's too
                    error = cls(message, lineno or 1)
                    error.translated = True  # its str() is the message alone, as the render process said it
                    raise error
                raise cls(message) if cls is not None else jinja2.TemplateRuntimeError(f"{kind}: {message}")
        raise RenderLimit(f"the render process answered {str(answer)[:80]}, not a render")

    def _started(self) -> Child:
        if self._child is None or self._pid != os.getpid() or not self._child.alive:
            child, self._pid = Child(self.module, env=environment(_ENVIRONMENT)), os.getpid()
            try:
                child.ask(None, START_LIMIT)  # its "ready"
            except ChildFailed as exc:
                raise RenderLimit(f"the render process {exc.reason} while starting") from None
            self._child = child
        return self._child


def serve_renders(made: Callable[[str, dict[str, Any], str | None, tuple[str, ...]], Made]) -> None:
    """The render process: capped memory, then each request made by ``made(template, context, judging, roots)``
    with its own CPU-time cap as well (the parent kills us first; the cap ends a render whose parent was killed
    meanwhile, even in a step of C that no thread of ours can interrupt)."""
    with contextlib.suppress(ValueError, OSError):  # macOS refuses it: the parent's deadline is the wall there
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    requests, send = serve()
    send({"ready": True})
    for message in requests:
        try:
            roots, judging, template, context = pickle.loads(base64.b64decode(message["render"]))
        except Exception as exc:  # a class only the parent can import
            send({"error": ["TemplateRuntimeError", f"its context cannot be read in the render process ({exc})",
                            None]})
            continue
        spent = resource.getrusage(resource.RUSAGE_SELF)
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CPU, (int(spent.ru_utime + spent.ru_stime + TIME_LIMIT + GRACE) + 2,
                                                     hard))
        try:
            text, system = made(template, context, judging, roots)
        except jinja2.TemplateSyntaxError as exc:
            send({"error": [type(exc).__name__, exc.message or str(exc), exc.lineno]})
            continue
        except Exception as exc:  # a template error, or one while compiling (a RecursionError of deep nesting)
            send({"error": [type(exc).__name__, str(exc)[:500], None]})
            continue
        try:
            send({"text": text, "system": system})
        except TypeError:  # orjson takes no lone surrogate ("\ud800"): no request could carry it either
            send({"error": ["TemplateRuntimeError", "the render made text that is not valid Unicode", None]})
