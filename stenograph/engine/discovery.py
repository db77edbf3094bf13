"""Finding plugins by name: one lazy catalog per entry-point group.

Built-ins are described exactly like installed plugins, as entry points (``name =
module:attribute``), so both load on first use, through the same path, with the same
duplicate-name and load-error handling (pytest's ``default_plugins``, loaded like ``-p``).
``importlib.metadata`` (a costly import) loads when a catalog is first built.
"""

from __future__ import annotations

import difflib
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast

from .errors import PluginError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from .handler import Handler

ENTRY_POINT_GROUP = "stenograph.handlers"
BUILTIN = "built-in"
log = logging.getLogger("stenograph.engine.discovery")
T = TypeVar("T")


BUILTIN_HANDLERS = {
    "inactivity-memorize": "stenograph.handlers.inactivity_memorize:InactivityMemorize",
    "update-threshold": "stenograph.handlers.update_threshold:UpdateThreshold",
    "forked-extraction": "stenograph.handlers.forked_extraction:ForkedExtraction",
    "memory-compact": "stenograph.handlers.memory_compact:MemoryCompact",
}


@dataclass(frozen=True)
class Source(Generic[T]):
    """Where a name comes from: an entry point (loaded lazily) or an object given in code."""

    name: str
    origin: str
    entry_point: EntryPoint | None = None
    obj: T | None = None


class Catalog(ABC, Generic[T]):
    """Every name of one entry-point group, built-ins first; objects load on first use.
    Subclasses set ``kind``, ``group`` and ``builtins`` (``{name: "module:attribute"}``)
    and check what a name loads."""

    kind: ClassVar[str]
    group: ClassVar[str]
    builtins: ClassVar[Mapping[str, str]]

    def __init__(self) -> None:
        from importlib.metadata import EntryPoint, entry_points

        self._sources: dict[str, Source[T]] = {}
        self._loaded: dict[str, T] = {}
        for name, value in self.builtins.items():
            self._claim(Source(name, BUILTIN, entry_point=EntryPoint(name, value, self.group)))
        for ep in entry_points(group=self.group):
            self._claim(Source(ep.name, _distribution_name(ep), entry_point=ep))

    def _claim(self, source: Source[T]) -> None:
        known = self._sources.get(source.name)
        if known is not None:
            assert source.entry_point is not None
            raise PluginError(
                f"{self.kind.capitalize()} name '{source.name}' is claimed twice: by"
                f" {known.origin} and by {source.origin} ({source.entry_point.value})."
                " Uninstall one of them."
            )
        self._sources[source.name] = source

    def add(self, obj: T, name: str, origin: str = "the host application") -> None:
        """Make ``obj`` available under ``name`` (names must be unique)."""
        self.check(obj, name, origin)
        known = self._sources.get(name)
        if known is not None and self._same(known, obj):
            return
        if known is not None:
            raise PluginError(
                f"{self.kind.capitalize()} name '{name}' is claimed twice:"
                f" by {known.origin} and by {origin}."
            )
        self._sources[name] = Source(name, origin, obj=obj)

    def _same(self, known: Source[T], obj: T) -> bool:
        """Whether ``known`` already provides exactly this object (installed and passed)."""
        if known.obj is not None:
            return known.obj is obj
        try:
            return self.get(known.name) is obj
        except PluginError:
            return False

    def names(self) -> list[str]:
        """Every known name, sorted."""
        return sorted(self._sources)

    def origin(self, name: str) -> str:
        """``built-in`` or the distribution that provides ``name``."""
        return self._sources[name].origin

    def get(self, name: str, where: str = "") -> T:
        """The object for ``name``; unknown names get the closest suggestion."""
        if name in self._loaded:
            return self._loaded[name]
        source = self._sources.get(name)
        if source is None:
            raise PluginError(self._unknown(name, where))
        obj = source.obj if source.obj is not None else self._load(source)
        self._loaded[name] = obj
        return obj

    def _load(self, source: Source[T]) -> T:
        assert source.entry_point is not None
        try:
            obj = source.entry_point.load()
        except Exception as exc:  # any import-time failure of a plugin
            raise PluginError(
                f"{self.kind.capitalize()} '{source.name}' from {source.origin} failed to load"
                f" ({source.entry_point.value}): {exc!r}"
            ) from exc
        self.check(obj, source.name, source.origin)
        log.debug("loaded %s %s from %s", self.kind, source.name, source.origin)
        return cast(T, obj)

    @abstractmethod
    def check(self, obj: object, name: str, origin: str) -> None:
        """Raise ``PluginError`` unless ``obj`` may be used under ``name``."""

    def _unknown(self, name: str, where: str) -> str:
        place = f" in {where}" if where else ""
        close = difflib.get_close_matches(name, self.names(), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"Unknown {self.kind} '{name}'{place}. Available: {', '.join(self.names())}.{hint}"


class HandlerCatalog(Catalog["type[Handler]"]):
    """Every handler name: the built-ins and the ``stenograph.handlers`` entry points."""

    kind = "handler"
    group = ENTRY_POINT_GROUP
    builtins = BUILTIN_HANDLERS

    def add_handler(self, handler: type[Handler], origin: str = "the host application") -> None:
        """Make ``handler`` available under ``handler.name``."""
        self.add(handler, getattr(handler, "name", ""), origin)

    def check(self, obj: object, name: str, origin: str) -> None:
        from .handler import Handler

        if not (isinstance(obj, type) and issubclass(obj, Handler)):
            raise PluginError(
                f"Handler '{name}' from {origin} is {obj!r}, not a subclass of stenograph.Handler."
            )
        if not name:
            raise PluginError(f"A handler class from {origin} ({obj.__qualname__}) has no name.")


def _distribution_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"package '{dist.name}'" if dist is not None else f"entry point {ep.value}"
