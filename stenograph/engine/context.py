"""What a phase hook receives about the call in progress."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .entries import Entry
from .events import Event

if TYPE_CHECKING:
    from .session import Session


@dataclass(slots=True)
class _Call:
    session: Session
    now: float
    handler: str = field(default="", init=False)
    slot: int = field(default=-1, init=False)

    def emit(self, event_type: type[Event], **fields: Any) -> Event:
        """Record an event of ``event_type`` as coming from the running handler."""
        event = event_type(time=self.now, handler=self.handler, slot=self.slot, **fields)
        self.session.record(event)
        return event


@dataclass(slots=True)
class PreCallCall(_Call):  # the session builds it with every field given by position
    """The request about to be sent. ``new_entries`` came in since the last response;
    ``previous_response`` is the newest assistant entry before them (or None);
    ``unseen_entries`` were appended since the previous pre-call of this session (responses
    and bulk appends included: what a handler rewriting sent content has not seen yet);
    ``end`` is the history's length when the phase began."""

    model: str = ""
    system: Any = None
    tools: list[Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    previous_response: Entry | None = None
    first_unseen: int = 0
    end: int = 0

    @property
    def new_entries(self) -> tuple[Entry, ...]:
        """The entries appended after ``previous_response`` (the new input)."""
        return tuple(self.session.history.entries[self.input_start : self.end])

    @property
    def unseen_entries(self) -> tuple[Entry, ...]:
        """The entries appended since the previous pre-call."""
        return tuple(self.session.history.entries[self.first_unseen : self.end])

    @property
    def input_start(self) -> int:
        """Index of the first new entry (== ``end`` when there is none)."""
        return self.previous_response.index + 1 if self.previous_response else 0

    def memorize(
        self, entries: Iterable[Entry], *, keep: Iterable[str] = (), reduce_inputs: bool = False
    ) -> list[Entry]:
        """Mark entries memorized (sent reduced); returns the ones newly marked."""
        return self.session.memorize(entries, keep=keep, reduce_inputs=reduce_inputs)

    def sent_content(self, entry: Entry) -> str | list[dict[str, Any]]:
        """Exactly what will be sent for ``entry`` as things stand."""
        return self.session.history.rendered(entry)

    def replace_sent_content(self, entry: Entry, content: str | list[dict[str, Any]]) -> None:
        """Send ``content`` instead of the entry's own from now on (history unchanged). When
        the entry is memorized, ``content`` is what gets reduced."""
        self.session.replace_sent_content(entry, content)


@dataclass(slots=True)
class PostSamplingCall(_Call):
    """The response just appended, and the request that produced it (None if unknown)."""

    response: Entry | None = None
    request: dict[str, Any] | None = None
