"""Run ids: what names a run's partition in every table. A run is (model, tag); its id is a readable, path-safe
slug of both plus a short hash of the exact pair, so two names that slug alike never share a partition."""

from __future__ import annotations

import hashlib
import re

import orjson

__all__ = ["run_id_for", "run_id_prefix"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _slug(name: str) -> str:
    return _UNSAFE.sub("-", name.replace("/", "__")).strip("-.")[:80]


def run_id_for(model: str, tag: str) -> str:
    digest = hashlib.sha256(orjson.dumps([model, tag])).hexdigest()[:8]
    return f"{_slug(tag)}__{_slug(model)}__{digest}"


def run_id_prefix(tag: str) -> str:
    """What the run id of the run tagged ``tag``, and of every run ``{tag}-runN``, starts with: a reader can
    skip every other run's folder (necessary, not sufficient: the tags themselves are compared after)."""
    return _slug(tag)
