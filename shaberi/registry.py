"""One registry for every extension point: benchmarks, ensemble datasets, graders, strategies, passes, prompts.

Why one: each extension point used to keep its own dict, decorator and ``resolve()``, each spelling "unknown
…; choose from: …" its own way, and none could be extended without editing this package. A ``Registry`` is
an ordered name → item mapping with one way to register, ``REGISTRY.register(name, **options)`` (a decorator,
or a call given the item), one grammar for the command line's ``--x a,b`` / ``all`` (``resolve``), and one
error listing the choices. A kind whose items are built from what is decorated (a benchmark from its
``Convert`` and its ``scale=``, ``data=``, ``prompts=``) says how with ``make``; the built-ins register
exactly as a plugin does.

Plugins: one entry point group, ``shaberi``. A plugin lists its module there once; importing the module
registers whatever it brings into whichever registries (the loaded object itself is not registered). The
first time any registry is read (looked up, listed, resolved), ``PLUGINS`` scans the installed entry points
once (``importlib.metadata.entry_points()``, the ~20 ms that used to be paid once per registry) and imports
every plugin of the group. Built-ins register when their package is imported, so they come first; plugins
are appended after them. A plugin that cannot be loaded stops the command that reads a registry with one
line naming it (``PluginError``), and so does a plugin still listed in one of the groups shaberi read before
0.x had one (``shaberi.benchmarks`` …): it would otherwise be silently left out. Commands that read no
registry load no plugin.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from .errors import PluginError, UsageError

__all__ = ["GROUP", "PLUGINS", "Plugin", "Plugins", "Registry", "UnknownName", "named"]

T = TypeVar("T")
X = TypeVar("X")

GROUP = "shaberi"  # the one entry point group a plugin lists its module in
RETIRED_GROUPS = ("shaberi.benchmarks", "shaberi.datasets", "shaberi.graders", "shaberi.strategies",
                  "shaberi.passes", "shaberi.prompts")  # one per registry, before the one group


class UnknownName(UsageError, KeyError):
    """A name looked up that nothing registered (stored results that name a plugin no longer installed): a
    ``KeyError`` for the mapping protocol, one ``error:`` line for the command line."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass
class Plugin:
    """One loaded entry point, and what importing it registered: ``(kind, name)`` pairs, in order."""

    entry_point: importlib.metadata.EntryPoint
    brought: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        ep = self.entry_point
        dist = f" ({ep.dist.name} {ep.dist.version})" if ep.dist else ""
        return f"{ep.name} = {ep.value}{dist}"


class Plugins:
    """The plugins of one entry point group, loaded once for every registry that uses them."""

    def __init__(self, group: str = GROUP, retired: Sequence[str] = RETIRED_GROUPS) -> None:
        self.group, self.retired = group, tuple(retired)
        self.registries: list[Registry[Any]] = []
        self.loaded: list[Plugin] = []
        self.journal: list[tuple[str, str]] = []  # (kind, name) of every registration, in order
        self._done = False

    def load(self) -> None:
        """Import the group's plugins, the first time any of its registries is read: one scan of the entry
        points for all of them."""
        if self._done:
            return
        self._done = True  # a plugin reading a registry while it loads sees what is registered so far
        try:
            everything = importlib.metadata.entry_points()
            current = {_origin(ep) for ep in everything.select(group=self.group)}
            retired = [ep for group in self.retired for ep in everything.select(group=group)
                       if _origin(ep) not in current]  # listed in the group too: fine (for older shaberis)
            if retired:
                ep = retired[0]
                groups = sorted({e.group for e in retired if _origin(e) == _origin(ep)})
                raise PluginError(f"plugin {ep.name!r} ({ep.group} = {ep.value}{_dist(ep)}) is listed in entry point "
                                  f"group{'s' * (len(groups) > 1)} {', '.join(groups)}, which shaberi no longer "
                                  f"reads: list its module once in group {self.group!r} instead "
                                  "(docs/reference/plugins.md), or uninstall it")
            done = {(p.entry_point.name, p.entry_point.value) for p in self.loaded}
            for ep in everything.select(group=self.group):
                if (ep.name, ep.value) not in done:
                    self._import(ep)
        except BaseException:
            self._done = False  # read again, it fails again: never silently without the plugin
            raise

    def _import(self, ep: importlib.metadata.EntryPoint) -> None:
        before, start = [(r, dict(r._items)) for r in self.registries], len(self.journal)
        try:
            ep.load()
        except (Exception, SystemExit) as exc:  # a plugin that exits at import must not end the command
            for registry, items in before:  # nothing of a plugin that failed half-way stays registered
                registry._items = items
            del self.journal[start:]
            lines = str(exc).strip().splitlines() or [""]
            raise PluginError(f"plugin {ep.name!r} ({ep.group} = {ep.value}{_dist(ep)}) cannot be loaded: "
                              f"{type(exc).__name__}: {lines[0]}; fix or uninstall it") from exc
        self.loaded.append(Plugin(ep, self.journal[start:]))


def _origin(ep: importlib.metadata.EntryPoint) -> tuple[str | None, str]:
    """The distribution and module of an entry point: the same plugin, whichever group lists it."""
    return (ep.dist.name if ep.dist else None), ep.value


def _dist(ep: importlib.metadata.EntryPoint) -> str:
    return f", from {ep.dist.name} {ep.dist.version}" if ep.dist else ""


PLUGINS = Plugins()

C = TypeVar("C", bound=type)


def named(name: str, cls: C) -> C:
    """A ``make`` for registries of classes (strategies, passes): the class is registered as it is, its
    ``name`` set to the name it is registered under (a class naming itself otherwise is refused)."""
    own = cls.__dict__.get("name")
    if own is not None and own != name:
        raise ValueError(f"class {cls.__name__} is named {own!r} but registered as {name!r}; drop its name")
    cls.name = name  # type: ignore[attr-defined]
    return cls


class Registry(Mapping[str, T], Generic[T]):
    """Named items of one kind, in registration order, the built-ins' then the plugins'.

    ``kind`` names one item in messages ("benchmark"); ``takes_all``: whether ``resolve`` accepts ``all``;
    ``make(name, thing, **options)``: the item stored for what ``register`` is given (a benchmark from its
    ``Convert``), by default the thing itself; ``check(name, item)``: raises ``ValueError`` for an item that
    would fail later, where it is used (a plugin benchmark's data entry without ``file``): registering it
    fails, so a plugin bringing one is a plugin that cannot be loaded, one line naming it, before any command
    has done anything. ``plugins``: where plugins come from (tests give their own).
    """

    def __init__(self, kind: str, *, takes_all: bool = False, make: Callable[..., T] | None = None,
                 check: Callable[[str, T], None] | None = None, plugins: Plugins | None = None) -> None:
        self.kind, self.takes_all, self.make, self.check = kind, takes_all, make, check
        self.source = PLUGINS if plugins is None else plugins
        self.source.registries.append(self)
        self._items: dict[str, T] = {}

    @overload
    def register(self, name: str, /, **options: Any) -> Callable[[X], X]: ...

    @overload
    def register(self, name: str, item: X, /, **options: Any) -> X: ...

    def register(self, name: str, item: Any = None, /, **options: Any) -> Any:
        """Add ``item`` under ``name``; without ``item``, a decorator that adds what it decorates (and returns
        it unchanged). ``options`` go to this kind's ``make``. A name is registered once: a second item under
        it is refused (a plugin cannot replace a built-in)."""
        if options and self.make is None:
            raise TypeError(f"a {self.kind} takes no options: {', '.join(options)}")

        def add(thing: X) -> X:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered already")
            made: T = thing if self.make is None else self.make(name, thing, **options)  # type: ignore[assignment]
            if self.check is not None:
                self.check(name, made)
            self._items[name] = made
            self.source.journal.append((self.kind, name))
            return thing

        return add if item is None else add(item)

    def pop(self, name: str, default: T | None = None) -> T | None:
        """Take ``name`` out again (tests register throwaway items)."""
        return self._items.pop(name, default)

    def names(self) -> list[str]:
        return list(self)

    def holds(self, item: object) -> bool:
        """Whether ``item`` is registered under any name, without loading the plugins (a plugin being loaded asks:
        two benchmarks sharing a template folder register it once)."""
        return item in self._items.values()

    def plugin_items(self) -> list[tuple[Plugin, str]]:
        """The items plugins brought into this registry, each with its plugin."""
        self._load()
        return [(p, name) for p in self.source.loaded for kind, name in p.brought if kind == self.kind]

    def __getitem__(self, name: str) -> T:
        self._load()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownName(f"unknown {self.kind} {name!r}; registered: {', '.join(self._items)}") from None

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(list(self._items))

    def __len__(self) -> int:
        self._load()
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def get(self, name: str, default: T | None = None) -> T | None:  # type: ignore[override]
        self._load()
        return self._items.get(name, default)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._items)})"

    def resolve(self, spec: str, everything: Sequence[str] | None = None, opt_in: Sequence[str] = ()) -> list[str]:
        """The names ``spec`` asks for: a comma list (blanks dropped, each name once, in the order given), or
        ``all`` when this registry takes it: ``everything`` (default: every name, in registration order).
        An unknown name, or none at all, is a ``UsageError`` listing the choices; ``opt_in`` are names
        that are valid but not part of ``all``, listed apart."""
        if everything is None:
            everything = self.names()
        if self.takes_all and spec.strip() == "all":
            names = list(everything)
        else:
            names = [s.strip() for s in spec.split(",") if s.strip()]
        unknown = [n for n in names if n not in self]
        if unknown or not names:
            choices = ", ".join(["all"] * self.takes_all + list(everything))
            more = f" (opt-in: {', '.join(opt_in)})" if opt_in else ""
            raise UsageError(f"unknown {self.kind} {', '.join(unknown) or repr(spec)}; choose from: {choices}{more}")
        return list(dict.fromkeys(names))

    def _load(self) -> None:
        self.source.load()
