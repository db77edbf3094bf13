"""The seam a telemetry integration plugs into (``stenograph.integrations.otel`` is one):
a span around each phase and each piece of a handler's background work, every event as it
is recorded, and background work carried into the context it was started from. Off by
default: the engine then pays one attribute lookup per phase."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .events import Event
    from .session import Session

NO_SPAN: AbstractContextManager[object] = nullcontext()


class Telemetry(Protocol):
    """What a session tells a telemetry integration (set as ``Engine.telemetry``)."""

    def span(self, session: Session, name: str, call: Any) -> AbstractContextManager[object]:
        """A span around ``name`` (``pre_call``, ``post_sampling``, ``extraction``, …);
        ``call`` is the phase's call object, or what the work is about."""
        ...

    def event(self, session: Session, event: Event) -> None:
        """``event`` was recorded (on the thread that recorded it)."""
        ...

    def carry(self, work: Callable[[], object]) -> Callable[[], object]:
        """``work`` bound to the caller's context, to run on a background thread."""
        ...
