"""One registry for every extension point: benchmarks, ensemble datasets, graders, strategies, passes, prompts.

Why one: each extension point used to keep its own dict, decorator and ``resolve()``, each spelling "unknown
…; choose from: …" its own way, and none could be extended without editing this package. A ``Registry`` is
an ordered name → item mapping with one way to register (``register``, as a decorator or a call), one
grammar for the command line's ``--x a,b`` / ``all`` (``resolve``), one error listing the choices, and
plugins: the first time a registry is read (looked up, listed, resolved) it imports every entry point of
its group (``importlib.metadata.entry_points(group=...)``), once. Built-ins register when their package is
imported, so they come first, in the order they always had; plugins are appended after them.

A plugin's entry point names a module (or an object in one): loading it is importing it, and the import
registers its items with the same decorators the built-ins use (the loaded object itself is not
registered). One module may register into several registries and be listed in several groups. A plugin
that cannot be loaded stops the command that reads its registry with one line naming it
(``PluginError``); commands that never read that registry do not load it at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar, overload

from .errors import PluginError, UsageError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["Registry", "UnknownName"]

T = TypeVar("T")


class UnknownName(UsageError, KeyError):
    """A name looked up that nothing registered (stored results that name a plugin no longer installed): a
    ``KeyError`` for the mapping protocol, one ``error:`` line for the command line."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T]):
    """Named items of one kind, in registration order; plugins from entry point group ``group``.

    ``kind`` names one item in messages ("benchmark"); ``takes_all``: whether ``resolve`` accepts ``all``;
    ``check(name, item)``: raises ``ValueError`` for an item that would fail later, where it is used (a plugin
    benchmark's data entry without ``file``): registering it fails, so a plugin bringing one is a plugin that
    cannot be loaded, one line naming it, before any command has done anything.
    """

    def __init__(self, kind: str, group: str, *, takes_all: bool = False,
                 check: Callable[[str, T], None] | None = None) -> None:
        self.kind, self.group, self.takes_all, self.check = kind, group, takes_all, check
        self.plugins: list[EntryPoint] = []  # the entry points loaded, in order
        self._items: dict[str, T] = {}
        self._loaded = False

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...

    @overload
    def register(self, name: str, item: T) -> T: ...

    def register(self, name: str, item: T | None = None) -> T | Callable[[T], T]:
        """Add ``item`` under ``name``; without ``item``, a decorator that adds what it decorates. A name is
        registered once: a second item under it is refused (a plugin cannot replace a built-in)."""
        def add(thing: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered already")
            if self.check is not None:
                self.check(name, thing)
            self._items[name] = thing
            return thing

        return add if item is None else add(item)

    def pop(self, name: str, default: T | None = None) -> T | None:
        """Take ``name`` out again (tests register throwaway items)."""
        return self._items.pop(name, default)

    def names(self) -> list[str]:
        return list(self)

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
        return f"Registry({self.kind!r}, {self.group!r}: {', '.join(self._items)})"

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
        """Import this group's plugins, the first time the registry is read."""
        if self._loaded:
            return
        self._loaded = True  # a plugin reading this registry while it loads sees the built-ins
        self.plugins = []
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group):
            before = dict(self._items)
            try:
                ep.load()
            except (Exception, SystemExit) as exc:  # a plugin that exits at import must not end the command
                self._items = before  # nothing of a plugin that failed half-way stays registered
                self._loaded = False  # read again, it fails again: never silently without the plugin
                lines = str(exc).strip().splitlines() or [""]
                dist = f", from {ep.dist.name} {ep.dist.version}" if ep.dist else ""
                raise PluginError(f"plugin {ep.name!r} ({self.group} = {ep.value}{dist}) cannot be loaded: "
                                  f"{type(exc).__name__}: {lines[0]}; fix or uninstall it") from exc
            self.plugins.append(ep)
