"""The base class of every handler, built-in or third-party."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from .settings import HandlerSettings


class HandlerState(BaseModel):
    """Base of a handler's persisted-state model: checked when a session loads its
    ``state.json`` (fields camelCase in the file; unknown keys kept)."""

    model_config = ConfigDict(
        extra="allow", alias_generator=to_camel, populate_by_name=True, allow_inf_nan=False
    )


class NoSettings(HandlerSettings):
    """For handlers that take no settings."""


class Handler:
    """A pipeline step. Subclasses set ``name``, ``summary`` and ``Settings``, and implement
    any of the hooks in :mod:`stenograph.engine.hookspecs` as methods marked with
    ``@stenograph.hookimpl``. One instance is made per preset slot. An extractor sets
    ``takes_extraction_requests`` so that filed requests wait for it. A handler whose hooks
    may wait (on a lock, a thread, the network) sets ``blocking``: async hosts then run those
    phases in a worker thread instead of on the event loop. ``State`` (a
    ``HandlerState`` model) describes the slot's persisted state: a saved state that does
    not fit it is reset when the session opens, with a ``StateReset`` event."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    phase: ClassVar[str] = ""
    takes_extraction_requests: ClassVar[bool] = False
    blocking: ClassVar[bool] = False
    Settings: ClassVar[type[HandlerSettings]] = NoSettings
    State: ClassVar[type[HandlerState] | None] = None

    def __init__(self, settings: HandlerSettings, slot: int = 0) -> None:
        self.settings: Any = settings
        self.slot = slot

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} slot {self.slot}>"
