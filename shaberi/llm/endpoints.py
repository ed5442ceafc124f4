"""Endpoints as the user names them: ``MODEL`` or ``MODEL@BASE_URL``, the API key for a URL, the URL's
shape, and one shared client per endpoint and key. Every stage and command that talks to a model (``run``,
the passes' detectors, the ensemble) parses and checks its endpoints here, before any row is written."""

from __future__ import annotations

import ipaddress
import os
import re
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlparse

from ..errors import UsageError
from ..run_info import validate_name

if TYPE_CHECKING:  # aiohttp, under the client, costs ~80 ms to import: only a command that calls a model needs it
    from .client import LLM, ChatClient, ClientConfig
    from .transport import Transport

__all__ = ["DEFAULT_KEY_ENV", "ModelAt", "check_base_url", "is_loopback", "parse_judge", "resolve_api_key",
           "shared_llm"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


def is_loopback(base_url: str) -> bool:
    host = urlparse(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(base_url: str, env_var: str | None, option: str = "--api-key-env") -> str | None:
    """The key from the named variable; a loopback endpoint may do without one unless a variable is named."""
    name = env_var or DEFAULT_KEY_ENV
    key = os.environ.get(name)
    if key and any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise UsageError(f"the key in {name} holds a control character (a newline?): an HTTP header cannot carry "
                         "it; set the key alone")
    if key:
        return key
    if env_var is None and is_loopback(base_url):
        return None
    raise UsageError(
        f"environment variable {name} is not set; export your API key in it or name another variable "
        f"with {option}"
    )


class ModelAt(NamedTuple):
    """A model and the OpenAI-compatible endpoint serving it."""

    name: str
    base_url: str


def parse_judge(spec: str, default_url: str) -> ModelAt:
    """``MODEL`` or ``MODEL@BASE_URL`` -> the model at its base URL (``default_url`` when none is given)."""
    name, sep, url = spec.partition("@")
    if not name.strip() or (sep and not url.strip()):
        raise UsageError(f"--judge {spec!r} should be MODEL or MODEL@BASE_URL, e.g. gpt-4.1@https://api.openai.com/v1")
    validate_name("judge", name)
    if name.strip().startswith("*"):  # the views' name for judges pooled: a judge of that name would be mixed in
        raise UsageError(f"--judge {name!r}: '*' names the judges pooled in the views: give the judge's model name")
    if re.search(r" \[[^\]]+\]$", name):  # how a judge under another prompt set is named: --judge-prompts says it
        raise UsageError(f"--judge {name!r}: a name ending in ' [LABEL]' is how judgements under a prompt set are "
                         "labelled; give the model's name and the prompt set with --judge-prompts")
    if not sep and not default_url:
        raise UsageError(f"--judge {spec!r} needs MODEL@BASE_URL or --judge-base-url (no --base-url given)")
    return ModelAt(name, (url if sep else default_url).rstrip("/"))


def check_base_url(base_url: str, option: str = "--base-url") -> None:
    """An http(s) URL that paths can be appended to (``/chat/completions``): no query or fragment, no space.
    The message shows the URL without its ``user:password@``, however malformed the URL is."""
    shown = repr(re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)?[^/]*@", r"\1", base_url))
    try:
        parsed = urlparse(base_url)
        parsed.port  # noqa: B018  # a port that is no number raises here
    except ValueError as exc:
        raise UsageError(f"{option} {shown} is not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"{option} {shown} is not an http(s) URL such as http://127.0.0.1:8000/v1")
    if any(c.isspace() for c in base_url):
        raise UsageError(f"{option} {shown} holds a space or a line break: percent-encode it (%20)")
    if parsed.query or parsed.fragment:
        raise UsageError(f"{option} {parsed.scheme}://{parsed.hostname}…: a base URL takes no query or fragment "
                         "(the paths of the API are appended to it); give a key with --api-key-env")


def shared_llm(spec: str, default_url: str | None, key_env: str | None, config: ClientConfig,
               clients: dict[tuple[str, str | None], ChatClient], what: str,
               key_option: str = "--judge-api-key-env", transport: Transport | None = None) -> LLM:
    """``MODEL`` or ``MODEL@BASE_URL`` as an LLM on a client shared by everything on that endpoint and key
    (``clients`` maps (URL, key) to the client). ``what`` names the option in error messages."""
    from .client import LLM, ChatClient
    if "@" not in spec and not default_url:
        raise UsageError(f"{what}={spec!r} needs MODEL@BASE_URL (no --base-url given)")
    name, url = parse_judge(spec, (default_url or "").rstrip("/"))
    check_base_url(url, f"{what}: its URL")
    key = resolve_api_key(url, key_env, key_option)
    if (url, key) not in clients:
        clients[(url, key)] = ChatClient(url, key, config, transport=transport, option=f"{what}={spec}",
                                         key_option=key_option)
    clients[(url, key)].models.add(name)
    return LLM(name, clients[(url, key)])
