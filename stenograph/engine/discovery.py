"""Finding handlers by name: built-ins through the plugin path, third-party by entry point."""

from __future__ import annotations

import difflib
import importlib
import logging
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import cast

import pluggy

from .errors import PluginError
from .handler import Handler

ENTRY_POINT_GROUP = "stenograph.handlers"
DEFAULT_HANDLERS = (
    "stenograph.handlers.inactivity_memorize",
    "stenograph.handlers.update_threshold",
    "stenograph.handlers.forked_extraction",
    "stenograph.handlers.memory_compact",
)
log = logging.getLogger("stenograph.engine.discovery")


@dataclass(frozen=True)
class HandlerSource:
    """Where a handler name comes from: a built-in class or an entry point (loaded lazily)."""

    name: str
    origin: str
    handler: type[Handler] | None = None
    entry_point: EntryPoint | None = None


class HandlerCatalog:
    """All handler names known to one plugin manager; classes are loaded on first use."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self._sources: dict[str, HandlerSource] = {}
        self._loaded: dict[str, type[Handler]] = {}
        for module_name in DEFAULT_HANDLERS:
            pm.register(importlib.import_module(module_name), name=f"builtin:{module_name}")
        pm.hook.register_handlers(register=self._register_builtin)
        self._add_entry_points()

    def _register_builtin(self, handler: type[Handler]) -> None:
        self.add(handler, "built-in")

    def add(self, handler: type[Handler], origin: str = "the host application") -> None:
        """Make ``handler`` available under ``handler.name`` (names must be unique)."""
        _check_handler_class(handler, getattr(handler, "name", ""), origin)
        known = self._sources.get(handler.name)
        if known is not None and self._same(known, handler):
            return
        if known is not None:
            raise PluginError(
                f"Handler name '{handler.name}' is claimed twice:"
                f" by {known.origin} and by {origin}."
            )
        self._sources[handler.name] = HandlerSource(handler.name, origin, handler=handler)

    def _add_entry_points(self) -> None:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            origin = _distribution_name(ep)
            known = self._sources.get(ep.name)
            if known is not None:
                raise PluginError(
                    f"Handler name '{ep.name}' is claimed twice: by {known.origin} and by"
                    f" {origin} ({ep.value}). Uninstall one of them."
                )
            self._sources[ep.name] = HandlerSource(ep.name, origin, entry_point=ep)

    def _same(self, known: HandlerSource, handler: type[Handler]) -> bool:
        """Whether ``known`` already provides exactly this class (installed and passed)."""
        if known.handler is not None:
            return known.handler is handler
        try:
            return self.get(known.name) is handler
        except PluginError:
            return False

    def names(self) -> list[str]:
        """Every known handler name, sorted."""
        return sorted(self._sources)

    def origin(self, name: str) -> str:
        """``built-in`` or the distribution that provides ``name``."""
        return self._sources[name].origin

    def get(self, name: str, where: str = "") -> type[Handler]:
        """The handler class for ``name``; unknown names get the closest suggestion."""
        if name in self._loaded:
            return self._loaded[name]
        source = self._sources.get(name)
        if source is None:
            raise PluginError(self._unknown(name, where))
        handler = source.handler or self._load(source)
        self._loaded[name] = handler
        return handler

    def _load(self, source: HandlerSource) -> type[Handler]:
        assert source.entry_point is not None
        try:
            obj = source.entry_point.load()
        except Exception as exc:  # any import-time failure of a plugin
            raise PluginError(
                f"Handler '{source.name}' from {source.origin} failed to load"
                f" ({source.entry_point.value}): {exc!r}"
            ) from exc
        _check_handler_class(obj, source.name, source.origin)
        log.debug("loaded handler %s from %s", source.name, source.origin)
        return cast(type[Handler], obj)

    def _unknown(self, name: str, where: str) -> str:
        place = f" in {where}" if where else ""
        close = difflib.get_close_matches(name, self.names(), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"Unknown handler '{name}'{place}. Available: {', '.join(self.names())}.{hint}"


def _check_handler_class(obj: object, name: str, origin: str) -> None:
    if not (isinstance(obj, type) and issubclass(obj, Handler)):
        raise PluginError(
            f"Handler '{name}' from {origin} is {obj!r}, not a subclass of stenograph.Handler."
        )
    if not name:
        raise PluginError(f"A handler class from {origin} ({obj.__qualname__}) has no name.")


def _distribution_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"package '{dist.name}'" if dist is not None else f"entry point {ep.value}"
