"""The base class of every handler, built-in or third-party."""

from __future__ import annotations

from typing import ClassVar, Generic

from typing_extensions import TypeVar

from .settings import HandlerSettings
from .state import HandlerState

S = TypeVar("S", bound=HandlerSettings, default=HandlerSettings)  # bare Handler: any settings


class NoSettings(HandlerSettings):
    """For handlers that take no settings."""


class Handler(Generic[S]):
    """A pipeline step, generic in its settings model: ``class Trim(Handler[TrimSettings])``.
    Subclasses set ``name``, ``summary`` and ``Settings``, and implement any of the hooks in
    :mod:`stenograph.engine.hookspecs` as methods marked with ``@stenograph.hookimpl``. One
    instance is made per preset slot. A handler that keeps per-session data declares a
    ``State`` model (:class:`stenograph.HandlerState`): its hooks then get it as ``state``,
    validated when the session loads. A handler whose hooks may wait (on a lock, a thread,
    the network) sets ``blocking``: async hosts then run those phases in a worker thread
    instead of on the event loop."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    phase: ClassVar[str] = ""
    blocking: ClassVar[bool] = False
    Settings: ClassVar[type[HandlerSettings]] = NoSettings
    State: ClassVar[type[HandlerState] | None] = None

    def __init__(self, settings: S, slot: int = 0) -> None:
        self.settings: S = settings
        self.slot = slot

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} slot {self.slot}>"
