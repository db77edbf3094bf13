"""Typed events: what the engine and the handlers did, in the order they did it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """Something that happened in a session; `handler` is empty for the engine itself."""

    time: float
    handler: str = ""
    slot: int = -1

    @property
    def kind(self) -> str:
        """The event's type name, e.g. ``EntriesMemorized``."""
        return type(self).__name__

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON-safe dict: ``kind`` and every field (tuples as lists)."""
        return {"kind": self.kind, **json_safe(asdict(self))}


def json_safe(value: Any) -> Any:
    """``value`` with tuples as lists and non-JSON leaves as strings."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class HandlerFailed(Event):
    """A handler raised; the call went on as the other handlers left it."""

    phase: str
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestViolation(Event):
    """The outgoing request breaks a rule of the Messages API (see ``check_request``)."""

    problems: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Custom(Event):
    """An event of a third-party handler that has no type of its own."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class StateReset(Event):
    """Saved state could not be used as it was: ``part`` of it was reset (the handler's
    state, the request window, the notes record, or all of ``state.json``), and why; the
    file as it was is kept at ``copy``."""

    path: str
    part: str
    reason: str
    copy: str


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryEdited(Event):
    """The host's list changed earlier messages: the history now holds the host's content."""

    uuids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryTruncated(Event):
    """The history was cut after ``after_uuid`` ('' when all was removed)."""

    after_uuid: str
    removed: int


@dataclass(frozen=True, kw_only=True, slots=True)
class NotesClientUnavailable(Event):
    """A framework adapter could not build the notes writer's Anthropic client from the
    framework's model (not an Anthropic model, or no settings to copy), and what happens
    instead."""

    model: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryNotFollowed(Event):
    """A framework adapter could not make the session hold the framework's message list
    (a message the session refuses); this call went out as the framework built it."""

    messages: int
    entries: int
    reason: str
