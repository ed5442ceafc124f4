"""Keep credentials off disk: an API key a server echoes in an error body, and the ``user:password@`` of a base
URL, are replaced before any text is stored, exported or printed.

The client redacts every error it raises (its own key and URL credentials, in plain and in base64 as an
``Authorization: Basic`` header carries them, plus the credentials of any ``Authorization`` header, bearer and
basic tokens and anything shaped like an OpenAI-style key); the ``runs`` row strips credentials from every URL
it records.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

__all__ = ["REDACTED", "environment_secrets", "holds_secret", "is_credential_name", "redact", "strip_credentials",
           "url_secrets"]

REDACTED = "[redacted]"
# To the last "@" before the path: a password may hold "@" (``urlsplit`` reads it so, and so do clients).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s\"']*@")
# An Authorization header as a server may echo it, whatever its scheme: the credentials after the scheme word.
_AUTHORIZATION = re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?\s*(?:[a-z][\w-]*\s+)?)[^\s\"',;}]+")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;}]+")
_BASIC = re.compile(r"(?i)\b(basic\s+)[A-Za-z0-9+/_-]{6,}={0,2}")
# OpenAI, Anthropic and Google keys; GitHub, Hugging Face and Slack tokens; an AWS access key id.
_KEYLIKE = re.compile(r"\b(?:(?:sk-|sk_|AIza)[A-Za-z0-9_\-]{8,}|(?:gh[pousr]_|github_pat_|hf_)[A-Za-z0-9_]{20,}"
                      r"|xox[abprs]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[A-Z0-9]{16})")
# A word of the name (between underscores) that says it holds a credential: OPENAI_API_KEY, API_KEYS,
# OPENAI_API_KEY_PROD, SECRET_KEY_BASE, DB_PASS, MYSQL_PWD, GH_PAT, SLACK_WEBHOOK_URL; or its end (OPENAI_APIKEY).
_CREDENTIAL_NAME = re.compile(r"(?i)(?:^|_)(?:KEYS?|TOKENS?|SECRETS?|PASSWORDS?|PASSWD|PASS|PWD|PAT|CREDS?|"
                              r"CREDENTIALS?|AUTH|WEBHOOK|PRIVATE)(?:_|$|\d)"
                              r"|(?:KEYS?|TOKENS?|SECRETS?|PASSWORDS?|PASSWD|CREDENTIALS?)(?:_?\d+)?$")


def is_credential_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential: a word of it is ``KEY``, ``TOKEN``,
    ``SECRET``, ``PASSWORD``, ``PAT`` … (``OPENAI_API_KEY_2``, ``SECRET_KEY_BASE``, ``MYSQL_PWD``); not the shell's
    ``PWD`` or ``OLDPWD``, the working folder."""
    return name not in ("PWD", "OLDPWD") and bool(_CREDENTIAL_NAME.search(name))


def environment_secrets() -> list[str]:
    """The values of the environment's variables named like credentials (``OPENAI_API_KEY``, ``HF_TOKEN``,
    ``AWS_SECRET_ACCESS_KEY`` …), 8 characters or more: what code this process runs for someone else (a prompt
    set's) may read and try to send or store."""
    return [v for k, v in os.environ.items() if is_credential_name(k) and len(v) >= 8]


def holds_secret(value: object, secrets: Iterable[str] = ()) -> bool:
    """Whether ``value`` (a string, or one inside lists and dicts, keys too) holds one of ``secrets`` or anything
    ``redact`` would replace."""
    if isinstance(value, dict):
        return any(holds_secret(k, secrets) or holds_secret(v, secrets) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(holds_secret(v, secrets) for v in value)
    return isinstance(value, str) and redact(value, secrets) != value


def strip_credentials(text: str) -> str:
    """Every URL in ``text`` without its ``user:password@``."""
    return _USERINFO.sub(r"\1", text)


def url_secrets(url: str) -> list[str]:
    """What of ``url`` is secret: its password and ``user:password`` (as given and percent-decoded)."""
    parts = urlsplit(url)
    if parts.password is None:
        return []
    user = parts.username or ""
    password = parts.password
    return [password, unquote(password), f"{user}:{password}", f"{unquote(user)}:{unquote(password)}"]


def _forms(secret: str) -> list[str]:
    """A secret as a server may echo it: plain, and base64 (standard and URL-safe, with or without padding)."""
    encoded = [base64.b64encode(secret.encode()).decode(), base64.urlsafe_b64encode(secret.encode()).decode()]
    return [secret, *encoded, *(e.rstrip("=") for e in encoded)]


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with ``secrets`` (a key, a URL's password; plain or base64), Authorization credentials, bearer and
    basic tokens, key-shaped strings and URL credentials replaced."""
    forms = {form for secret in secrets if secret and len(secret) >= 4 for form in _forms(secret)}
    for form in sorted(forms, key=len, reverse=True):  # user:password's base64 before the password's
        text = text.replace(form, REDACTED)
    text = _AUTHORIZATION.sub(rf"\1{REDACTED}", text)
    text = _BEARER.sub(rf"\1{REDACTED}", text)
    text = _BASIC.sub(rf"\1{REDACTED}", text)
    text = _KEYLIKE.sub(REDACTED, text)
    return strip_credentials(text)
