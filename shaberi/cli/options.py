"""Option groups shared by the commands that call a model, each declared once: the client's (``client_options``:
timeouts, retries, rate limits, the adaptive limit, with ``ClientConfig``'s defaults) and a role's sampling
(``sampling_options``: the candidate's ``--temperature`` … and the judges' ``--judge-temperature`` …, one function
for both). A group is added to a command's options and handed to it as one checked value, so a command's signature
lists only what is its own."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from ..errors import UsageError
from ..llm.config import MAX_COUNT
from .common import LIMITS, check_concurrency

if TYPE_CHECKING:
    from ..llm.config import ClientConfig

__all__ = ["MAX_COUNT", "Sampled", "client_options", "sampling_options", "shown"]

R = TypeVar("R")


def shown(value: float | None) -> str:
    """An option's value as given: an integer whole, a float as ``:g`` (NaN as nan)."""
    return str(value) if isinstance(value, int) else f"{value:g}"

Concurrency = Annotated[int, typer.Option(help="Most requests in flight per endpoint: the upper bound of the adaptive "
                                          "limit.", rich_help_panel=LIMITS)]
Rpm = Annotated[float | None, typer.Option(help="Requests a minute, per endpoint: sends are spaced to keep under it "
                                           "(an endpoint's x-ratelimit headers are followed too).",
                                           rich_help_panel=LIMITS)]
Tpm = Annotated[float | None, typer.Option(help="Tokens a minute, per endpoint (prompt + completion), paced like "
                                           "--rpm.", rich_help_panel=LIMITS)]
Timeout = Annotated[float, typer.Option(help="Seconds per request.", rich_help_panel=LIMITS)]
MaxRetries = Annotated[int, typer.Option(help="Retries per request for 5xx, timeouts, connection errors and bad "
                                         "bodies (a 429 is retried until --rate-limit-timeout).",
                                         rich_help_panel=LIMITS)]
RateLimitTimeout = Annotated[float, typer.Option(help="Seconds one request may keep being refused (HTTP 429) before "
                                                 "it fails as rate_limit.", rich_help_panel=LIMITS)]
RetryAfterMax = Annotated[float, typer.Option(help="Longest Retry-After honoured, in seconds; a longer one is cut "
                                              "to this and reported.", rich_help_panel=LIMITS)]
ConcurrencyStart = Annotated[int | None, typer.Option(help="Requests in flight at the start, before the limit has "
                                                      "seen the endpoint [default: 2/3 of --concurrency].",
                                                      rich_help_panel=LIMITS)]
ConcurrencyMin = Annotated[int, typer.Option(help="The adaptive limit never goes below this.",
                                             rich_help_panel=LIMITS)]


def _group(options: dict[str, tuple[Any, Any]], into: str, build: Callable[..., object], after: tuple[str, ...] = ()
           ) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """A decorator adding ``options`` (name -> (annotation, default)) to a command's options, after the first of
    ``after`` it has, else before its files options (``--results-dir`` …), and passing the command ``into``: what
    ``build`` makes of their values."""
    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        from ..llm.config import ClientConfig

        own = inspect.signature(command, eval_str=True, locals={"ClientConfig": ClientConfig, "Sampled": Sampled})
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own.parameters.values() if p.name != into]
        names = [p.name for p in params]
        at = next((names.index(a) + 1 for a in after if a in names), None)
        if at is None:
            at = next((i for i, n in enumerate(names) if n in ("results_dir", "cache_dir", "data_dir", "client")),
                      len(names))
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=value, annotation=kind)
                 for name, (kind, value) in options.items()]

        @functools.wraps(command)
        def wrapper(**values: Any) -> R:
            made = build(**{name: values.pop(name) for name in options})
            return command(**values, **{into: made})

        signature = own.replace(parameters=[*params[:at], *added, *params[at:]])
        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        return wrapper

    return decorate


def client_options(command: Callable[..., R]) -> Callable[..., R]:
    """``--concurrency`` … ``--concurrency-min`` with ``ClientConfig``'s defaults, given to the command as
    ``client: ClientConfig`` (checked: ``client_config``)."""
    from ..llm.config import ClientConfig

    default = ClientConfig()
    return _group({"concurrency": (Concurrency, default.control.max), "rpm": (Rpm, default.rpm),
                   "tpm": (Tpm, default.tpm), "timeout": (Timeout, default.timeout),
                   "max_retries": (MaxRetries, default.max_retries),
                   "rate_limit_timeout": (RateLimitTimeout, default.rate_limit_timeout),
                   "retry_after_max": (RetryAfterMax, default.retry_after_max),
                   "concurrency_start": (ConcurrencyStart, None),
                   "concurrency_min": (ConcurrencyMin, default.control.min)}, "client", client_config)(command)


def client_config(concurrency: int, timeout: float, max_retries: int, rpm: float | None, tpm: float | None,
                  rate_limit_timeout: float, retry_after_max: float, concurrency_start: int | None,
                  concurrency_min: int) -> ClientConfig:
    """The client options checked (a value the endpoint would refuse, or that would turn a safeguard off, is
    bad input) and built."""
    from ..llm.config import ClientConfig, ControlConfig

    check_concurrency("--concurrency", concurrency)
    for option, value, ok, want in [
        ("--timeout", timeout, 0 < timeout < math.inf, "more than 0 seconds, and finite"),
        ("--rpm", rpm, rpm is None or 0 < rpm < math.inf, "more than 0, and finite"),
        ("--tpm", tpm, tpm is None or 0 < tpm < math.inf, "more than 0, and finite"),
        ("--max-retries", max_retries, 0 <= max_retries <= MAX_COUNT, f"between 0 and {MAX_COUNT:,}"),
        ("--rate-limit-timeout", rate_limit_timeout, 0 < rate_limit_timeout < math.inf,
         "more than 0 seconds, and finite"),
        ("--retry-after-max", retry_after_max, 0 <= retry_after_max < math.inf, "0 or more seconds, and finite"),
        ("--concurrency-start", concurrency_start, concurrency_start is None or concurrency_start >= 1, "at least 1"),
        ("--concurrency-min", concurrency_min, concurrency_min >= 1, "at least 1"),
    ]:
        if not ok:
            raise UsageError(f"{option} {shown(value)} is out of range: it must be {want}")
    for option, limit in (("--concurrency-start", concurrency_start), ("--concurrency-min", concurrency_min)):
        if limit is not None and limit > concurrency:
            raise UsageError(f"{option} {limit} is above --concurrency {concurrency}: raise --concurrency too")
    if concurrency_start is not None and concurrency_start < concurrency_min:
        raise UsageError(f"--concurrency-start {concurrency_start} is below --concurrency-min {concurrency_min}")
    start = max(concurrency_start or max(1, concurrency * 2 // 3), concurrency_min)
    return ClientConfig(timeout=timeout, max_retries=max_retries, rpm=rpm, tpm=tpm,
                        control=ControlConfig(start, concurrency_min, concurrency), retry_after_max=retry_after_max,
                        rate_limit_timeout=rate_limit_timeout)


@dataclass(frozen=True)
class Sampled:
    """One role's sampling options, checked: ``params``, the fields of ``Sampling`` they set (``families`` aside: the
    command's ``--model-families``); ``given``, the options given off their defaults (as typed: ``--judge-top-p``)."""

    params: dict[str, Any]
    given: tuple[str, ...]


def sampling_options(role: str, panel: str, temperature: str, max_tokens: int
                     ) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """A role's sampling options, the candidate's (``role`` ``""``: ``--temperature`` …, given as ``candidate``) or
    the judges' (``"judge"``: ``--judge-temperature`` …, given as ``judging``): ``temperature`` and ``max_tokens`` are
    the role's defaults."""
    prefix, name = (f"--{role}-", f"{role}_") if role else ("--", "")
    who, whose = ("Judge ", "every judge") if role else ("", "every candidate")
    options = {
        f"{name}temperature": (Annotated[str | None, typer.Option(  # None: not given (the role's default)
            metavar="FLOAT|omit", rich_help_panel=panel, show_default=False,
            help=_cap(f"{who}sampling temperature, or omit (send none: the endpoint's default) [default: "
                      f"{temperature}]."))],
            None),
        f"{name}max_tokens": (Annotated[int | None, typer.Option(
            rich_help_panel=panel, help=_cap(f"{who}completion token limit [default: {max_tokens}]."))], None),
        f"{name}max_completion_tokens": (Annotated[int | None, typer.Option(
            rich_help_panel=panel, help=_cap(f"{who}completion limit sent as max_completion_tokens (OpenAI's newer "
                                             f"name), instead of {prefix}max-tokens."))], None),
        f"{name}top_p": (Annotated[float | None, typer.Option(
            rich_help_panel=panel, help=_cap(f"{who}nucleus sampling; sent only when given."))], None),
        f"{name}reasoning_effort": (Annotated[str | None, typer.Option(
            rich_help_panel=panel, help=f"{who}reasoning_effort: none, minimal, low, medium, high or xhigh; sent only "
            "when given.")], None),
        f"{name}extra_body": (Annotated[str | None, typer.Option(
            rich_help_panel=panel, help=f"JSON object merged into {whose} request, e.g. '{{\"chat_template_kwargs\": "
            "{\"enable_thinking\": false}}'.")], None),
    }
    def build(**values: Any) -> Sampled:
        given = tuple(prefix + key.removeprefix(name).replace("_", "-") for key, value in values.items()
                      if value is not None)  # every option of the group defaults to None: not given
        params = sampling(prefix, values[f"{name}temperature"] or temperature, values[f"{name}max_tokens"],
                          values[f"{name}max_completion_tokens"], max_tokens, values[f"{name}top_p"],
                          values[f"{name}reasoning_effort"], values[f"{name}extra_body"])
        return Sampled(params, given)

    return _group(options, "judging" if role else "candidate", build,
                  ("batch_size", "judge_prompts") if role else ("api_key_env",))


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def sampling(prefix: str, temperature: str, max_tokens: int | None, max_completion_tokens: int | None,
             default_max: int, top_p: float | None, effort: str | None, extra_body: str | None) -> dict[str, Any]:
    """One role's request parameters (candidate ``--``, judges ``--judge-``), checked at the edge: the fields of
    ``Sampling`` but ``families``, for ``GenerationConfig`` or ``JudgeConfig``."""
    from ..llm.params import EFFORTS, parse_extra_body

    if max_tokens is not None and max_completion_tokens is not None:
        raise UsageError(f"{prefix}max-tokens and {prefix}max-completion-tokens are the same limit under two names: "
                         "give one")
    for name, value in (("max-tokens", max_tokens), ("max-completion-tokens", max_completion_tokens)):
        if value is not None and not 1 <= value <= MAX_COUNT:
            raise UsageError(f"{prefix}{name} {value} is out of range: it must be between 1 and {MAX_COUNT:,}")
    if top_p is not None and not 0 < top_p <= 1:  # NaN fails this too
        raise UsageError(f"{prefix}top-p {top_p:g} is out of range: it must be more than 0 and at most 1")
    if effort is not None and effort not in EFFORTS:
        raise UsageError(f"{prefix}reasoning-effort {effort!r} is not one of {', '.join(EFFORTS)}")
    return {"temperature": _temperature(f"{prefix}temperature", temperature),
            "max_tokens": max_completion_tokens or max_tokens or default_max,
            "tokens_field": "max_completion_tokens" if max_completion_tokens else "max_tokens", "top_p": top_p,
            "reasoning_effort": effort, "extra_body": parse_extra_body(f"{prefix}extra-body", extra_body)}


def _temperature(option: str, text: str) -> float | None:
    """A temperature between 0 and 2, or None for ``omit``."""
    if text.strip().lower() == "omit":
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a number: give one between 0 and 2, or omit") from None
    if not 0 <= value <= 2:  # NaN fails this too
        raise UsageError(f"{option} {text} is out of range: it must be between 0 and 2")
    return value
