"""Which runs a command reads: ``find_runs`` lists runs by tag (exact, family ``{tag}-run1 … N``, either, or
prefix) and model, reading six columns of the runs table only; ``select_runs`` is the one rule every reader
(view, compare, report, the Python API) applies to a ``--tag``; ``left_out`` names the family members that
family statistics leave out.

The selector grammar every command that reads stored runs accepts (``parse_selectors``, ``select``): a tag (a run,
or the base tag of a family ``{tag}-run1 … N``), ``MODEL@TAG`` (one model of a tag that holds several), and comma
lists of them. Parsed here only, so that ``view``, ``compare``, ``report``, ``pairwise``, ``inspect``, ``export``,
``leaderboard`` and ``run`` on stored answers read a name the same way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import duckdb

from ..errors import UsageError
from .ids import run_id_prefix
from .layout import live_parts_under
from .location import Root, as_root, attach, glob_literal
from .sql import define_status, latest_row, relisting, run_rows
from .writers import probe_writers

__all__ = ["Match", "RunRef", "Selection", "Selector", "find_runs", "left_out", "parse_selector", "parse_selectors",
           "require_root", "runs_named", "select", "select_one_model", "select_runs", "tags_there"]


class RunRef(NamedTuple):
    """A run as ``find_runs`` lists it; ``status`` as readers show it (``sql/005_status.sql``)."""

    run_id: str
    model: str
    tag: str
    base_tag: str
    run_index: int
    status: str | None


Match = Literal["tag", "tag_or_family", "family", "prefix"]


def find_runs(root: Root, tag: str | None = None, *, match: Match = "tag_or_family", model: str | None = None,
              con: duckdb.DuckDBPyConnection | None = None) -> list[RunRef]:
    """The runs a reader names, reading six columns of the runs table only, so that a command can then ``connect``
    to just those runs' partitions (pass the same ``con`` to both to save a database). ``tag`` None: every run;
    else by ``match``: ``tag`` the run tagged so, ``family`` the runs ``{tag}-run1 … N``, ``tag_or_family``
    either, ``prefix`` every tag starting so. Only the folders of runs whose tag can match are read."""
    folders = "*" if tag is None else f"run_id={run_id_prefix(tag)}*"
    root = as_root(root)
    where = {"tag": "tag = $tag", "family": "base_tag = $tag AND tag <> $tag",
             "tag_or_family": "(tag = $tag OR base_tag = $tag)", "prefix": "starts_with(tag, $tag)"}[match]
    con = attach(con or duckdb.connect(), root)
    define_status(con)

    def read() -> list[RunRef]:
        # Listed afresh on each attempt (``relisting``): every stage of a run rewrites its row.
        parts, _ = live_parts_under(root / "tables" / "runs", folders)
        if not parts:
            return []
        con.execute(
            "CREATE OR REPLACE TEMP TABLE listed_runs AS SELECT run_id, model, tag, base_tag, run_index, status "
            f"FROM {run_rows(con, root, parts)} WHERE ($tag IS NULL OR {where}) AND ($model IS NULL OR model = $model)",
            {"tag": tag, "model": model})
        probe_writers(con, root, "SELECT run_id, status FROM listed_runs")
        batches, _ = live_parts_under(root / "tables" / "batches", folders)  # none unless a run used a Batch API
        waiting = "SELECT NULL::VARCHAR AS run_id, NULL::BOOLEAN AS waiting WHERE false"
        if batches:
            waiting = (f"SELECT run_id, bool_or(status = 'submitted') AS waiting FROM (SELECT run_id, status FROM "
                       f"{_parquet(batches)} QUALIFY {latest_row('batches', None)}) GROUP BY run_id")
        rows = con.execute("SELECT run_id, model, tag, base_tag, run_index, shown_status(status, w.alive, b.waiting) "
                           f"FROM listed_runs LEFT JOIN run_writers w USING (run_id) LEFT JOIN ({waiting}) b "
                           "USING (run_id) ORDER BY model, run_index, tag").fetchall()
        return [RunRef(*r) for r in rows]

    return relisting(read)


def _parquet(parts: list[Root]) -> str:
    """A read of these parts' rows, as SQL."""
    files = ", ".join("'{}'".format(glob_literal(p).replace("'", "''")) for p in parts)
    return f"read_parquet([{files}], union_by_name = true)"


@dataclass
class Selection:
    """The runs a ``--tag`` names: per model, its run tagged so, or its family ``{tag}-run1 … N`` (``families``:
    the models read as a family)."""

    tag: str
    runs: list[RunRef]
    families: set[str] = field(default_factory=set)

    @property
    def family(self) -> bool:
        """Whether any model's runs are a family (a one-model selection: whether it is one)."""
        return bool(self.families)

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(r.model for r in self.runs))

    def of(self, model: str) -> Selection:
        """One model's part of the selection."""
        return Selection(self.tag, [r for r in self.runs if r.model == model], self.families & {model})


def left_out(con: duckdb.DuckDBPyConnection, judge: str = "*", model: str | None = None
             ) -> list[tuple[str, str, list[str]]]:
    """(run_id, tag, reasons) of the family members not complete for ``judge`` ('*': every judge): the runs
    family statistics leave out (``run_completeness``), in run order, each with why (``elyza: no score by j``)."""
    return [(r, t, b or []) for r, t, b in con.execute(
        "SELECT r.run_id, r.tag, c.reasons FROM run_completeness c JOIN runs r USING (run_id) "
        "WHERE NOT c.complete AND c.judge = $judge AND ($model IS NULL OR r.model = $model) AND r.tag <> r.base_tag "
        "ORDER BY r.run_index", {"judge": judge, "model": model}).fetchall()]


def select_runs(root: str | Path, tag: str, model: str | None = None, runs: int | None = None,
                prefer_family: bool = False, con: duckdb.DuckDBPyConnection | None = None) -> Selection:
    """Per model: its run tagged ``tag``, or its family ``{tag}-run1 … N`` when it has no such run, when ``runs``
    asks for the first N members, or when ``prefer_family`` (one model's plain run tagged ``f`` never hides another
    model's family ``f-run1 … N``). One rule for every reader (view, compare, report, leaderboard, the API)."""
    if runs is not None and runs < 1:
        raise UsageError(f"--runs {runs} must be at least 1")
    found = find_runs(root, tag, model=model, con=con)
    chosen: list[RunRef] = []
    families: set[str] = set()
    for m in dict.fromkeys(r.model for r in found):
        exact = [r for r in found if r.model == m and r.tag == tag]
        family = [r for r in found if r.model == m and r.tag != tag and r.base_tag == tag
                  and (runs is None or r.run_index <= runs)]
        if family and (runs is not None or prefer_family or not exact):
            if runs is not None and len({r.run_index for r in family}) < runs:
                have = len({r.run_index for r in family})
                whose = f"{tag!r}{f' ({m})' if len(found) > len(family) else ''}"
                raise UsageError(f"--runs {runs} asked for, but only {have} run{'s' if have > 1 else ''} of {whose} "
                                 f"exist{'' if have > 1 else 's'}")
            chosen += family
            families.add(m)
        else:
            chosen += exact
    if not chosen:
        require_root(root)
        raise UsageError(f"no run tagged {tag!r}{f' for model {model!r}' if model else ''} under {root}"
                         f"; {tags_there(root, con)}")
    return Selection(tag, chosen, families)


def require_root(root: str | Path | Root) -> None:
    """Say that a results root is missing, not that it holds no such run: a command run from another directory
    reads ``results`` there."""
    if not (where := as_root(root)).joinpath("tables").exists():
        shown = where.resolve() if isinstance(where, Path) else where
        raise UsageError(f"no results root at {shown} (no tables/ there): give --results-dir DIR (or set "
                         "SHABERI_RESULTS_DIR) where shaberi run wrote its results")


def tags_there(root: Root, con: duckdb.DuckDBPyConnection | None = None) -> str:
    """The tags of a results root, for a message saying that the one asked for is not there: a family as the
    base tag that names it (``v1 (3 runs)``), other runs by their tag."""
    runs: dict[str, set[str]] = {}
    for r in find_runs(root, con=con):
        runs.setdefault(r.base_tag if r.tag != r.base_tag else r.tag, set()).add(r.tag)
    tags = [t if members == {t} else f"{t} ({len(members)} run{'s' if len(members) > 1 else ''})"
            for t, members in sorted(runs.items())]
    return f"tags there: {', '.join(tags[:20]) or 'none'}{' …' if len(tags) > 20 else ''}"


@dataclass(frozen=True)
class Selector:
    """Stored runs as a user named them: a tag (a run, or a family's base tag), and the model when named."""

    tag: str
    model: str | None = None

    @property
    def label(self) -> str:
        return f"{self.model}@{self.tag}" if self.model else self.tag


def parse_selectors(root: str | Path | Root, text: str, model: str | None = None, option: str = "--tag"
                    ) -> list[Selector]:
    """``TAG``, ``MODEL@TAG`` or a comma list of them (a tag holding a comma itself is read whole when it has runs);
    ``model`` (``--model``) is the model of each, whose texts are then tags."""
    if "," in text and not find_runs(root, text):
        items = [t.strip() for t in text.split(",")]
        if not all(items):
            raise UsageError(f"{option} {text!r} has an empty item: give TAG, MODEL@TAG, or a comma list of them")
        return list(dict.fromkeys(parse_selector(root, t, model, option) for t in items))
    return [parse_selector(root, text.strip(), model, option)]


def parse_selector(root: str | Path | Root, text: str, model: str | None = None, option: str = "--tag",
                   model_option: str = "--model") -> Selector:
    """One selector from ``TAG`` or ``MODEL@TAG``; with ``model`` the text is a tag. A tag may hold '@' itself: the
    text is whichever reading has runs (the tag as written, or a MODEL@TAG split at one of its '@'); more than one is
    refused as ambiguous, none is left to ``select`` to say what is there."""
    if not text.strip():
        raise UsageError(f"{option} is empty: name a tag, or MODEL@TAG")
    splits = [(text[:i], text[i + 1:]) for i, c in enumerate(text) if c == "@" and 0 < i < len(text) - 1]
    if model is not None:
        if not find_runs(root, text) and any(find_runs(root, t, model=m) for m, t in splits):
            raise UsageError(f"{option} {text!r} is MODEL@TAG, and {model_option} names the model too: give the "
                             "model once")
        return Selector(text, model)
    readings = [Selector(text)] if find_runs(root, text) or not splits else []
    readings += [Selector(t, m) for m, t in splits if find_runs(root, t, model=m)]
    if len(readings) > 1:
        raise UsageError(f"{option} {text!r} can be read {len(readings)} ways: "
                         + "; ".join(f"model {r.model!r}, tag {r.tag!r}" if r.model else f"tag {r.tag!r}"
                                     for r in readings)
                         + f": name the tag and give the model with {model_option}")
    return readings[0] if readings else Selector(text)  # not there: select says what is


def select(root: str | Path, selector: Selector, runs: int | None = None, prefer_family: bool = False,
           con: duckdb.DuckDBPyConnection | None = None) -> Selection:
    """The runs one selector names (``select_runs``'s rule); nothing there is one line saying what is."""
    try:
        return select_runs(root, selector.tag, selector.model, runs, prefer_family, con)
    except UsageError as exc:  # MODEL@TAG whose tag is there, without that model: say which models it holds
        text = selector.tag
        if find_runs(root, text, model=selector.model, con=con):  # there, and refused for another reason (--runs)
            raise
        for i in (i for i, c in enumerate(text) if c == "@" and selector.model is None):
            if there := find_runs(root, text[i + 1:], con=con):
                models = _few(r.model for r in there)
                raise UsageError(f"no run tagged {text!r}, nor model {text[:i]!r} in tag {text[i + 1:]!r} (it holds "
                                 f"{models})") from None
        if selector.model is not None and (there := find_runs(root, text, con=con)):
            models = _few(r.model for r in there)
            raise UsageError(f"no run of model {selector.model!r} tagged {text!r} (nor {text}-run1 … N); tag {text!r} "
                             f"holds {models}") from None
        if selector.model is None and (neither := _neither(root, text, con)):
            raise neither from None
        raise exc


def _neither(root: str | Path | Root, text: str, con: duckdb.DuckDBPyConnection | None = None) -> UsageError | None:
    """A MODEL@TAG read neither as a tag nor as a model's tag, said so with the tags there; None: no '@' to split."""
    if not 0 < (i := text.rfind("@")) < len(text) - 1:
        return None
    return UsageError(f"no run tagged {text!r}, nor model {text[:i]!r} tagged {text[i + 1:]!r}, under {root}; "
                      f"{tags_there(as_root(root), con)}")


def _few(names: Iterable[str], most: int = 10) -> str:
    """Names for a one-line message: the first ``most``, and how many there are in all."""
    unique = list(dict.fromkeys(names))
    return ", ".join(unique[:most]) + (f" … ({len(unique)} in all)" if len(unique) > most else "")


def select_one_model(root: str | Path, selector: Selector, option: str = "--tag", model_option: str = "--model",
                     con: duckdb.DuckDBPyConnection | None = None) -> Selection:
    """The runs of a selector that must name one model: a tag holding several needs one named (``MODEL@TAG``)."""
    chosen = select(root, selector, con=con)
    if len(chosen.models) > 1:
        raise UsageError(f"{option} {selector.tag!r} holds several models ({', '.join(chosen.models)}): name one, as "
                         f"{chosen.models[0] + '@' + selector.tag!r} or with {model_option}")
    return chosen


def runs_named(root: str | Path, text: str | None, model: str | None = None, option: str = "--tag"
               ) -> list[RunRef]:
    """Every run the selectors ``text`` name, each tag's run and its family's members (None: every run), for the
    commands that read runs one by one (export, inspect); nothing there is one line saying what is."""
    if text is None:
        found = find_runs(root, model=model)
    else:
        found = list({r.run_id: r for s in parse_selectors(root, text, model, option)
                      for r in find_runs(root, s.tag, model=s.model)}.values())
    if not found:
        require_root(root)
        if text is not None and model is None and "," not in text and (neither := _neither(root, text)):
            raise neither
        named = f" named {option} {text!r}" if text is not None else ""
        raise UsageError(f"no runs{named}{f' of model {model!r}' if model else ''} under {root}; "
                         f"{tags_there(as_root(root))}")
    return found
