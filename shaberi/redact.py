"""Keep credentials off disk: an API key a server echoes in an error body, and the ``user:password@`` of a base
URL, are replaced before any text is stored, exported or printed.

The client redacts every error it raises (its own key and URL credentials, plus anything shaped like a bearer
token or an OpenAI-style key); the ``runs`` row strips credentials from every URL it records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "redact", "strip_credentials"]

REDACTED = "[redacted]"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s\"']+@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;}]+")
_KEYLIKE = re.compile(r"\b(sk-|sk_|AIza)[A-Za-z0-9_\-]{8,}")


def strip_credentials(text: str) -> str:
    """Every URL in ``text`` without its ``user:password@``."""
    return _USERINFO.sub(r"\1", text)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with ``secrets`` (a key, a URL's password), bearer tokens, key-shaped strings and URL
    credentials replaced."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = _BEARER.sub(rf"\1{REDACTED}", text)
    text = _KEYLIKE.sub(REDACTED, text)
    return strip_credentials(text)
