"""The base class of every handler, built-in or third-party."""

from __future__ import annotations

from typing import Any, ClassVar

from .settings import HandlerSettings


class NoSettings(HandlerSettings):
    """For handlers that take no settings."""


class Handler:
    """A pipeline step. Subclasses set ``name``, ``summary`` and ``Settings``, and implement
    any of the hooks in :mod:`stenograph.engine.hookspecs` as methods marked with
    ``@stenograph.hookimpl``. One instance is made per preset slot. An extractor sets
    ``takes_extraction_requests`` so that filed requests wait for it. A handler whose hooks
    may wait (on a lock, a thread, the network) sets ``blocking``: async hosts then run those
    phases in a worker thread instead of on the event loop."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    phase: ClassVar[str] = ""
    takes_extraction_requests: ClassVar[bool] = False
    blocking: ClassVar[bool] = False
    Settings: ClassVar[type[HandlerSettings]] = NoSettings

    def __init__(self, settings: HandlerSettings, slot: int = 0) -> None:
        self.settings: Any = settings
        self.slot = slot

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} slot {self.slot}>"
