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
class EntriesMemorized(Event):
    """Earlier tool entries were marked memorized after a pause. ``estimated``: some
    entries were not counted yet, so ``tokens_saved`` is a chars/4 estimate; the counts are
    made in the background and the event in ``Session.events`` is then replaced by one with
    the counted figure (``estimated`` False)."""

    gap_seconds: float
    threshold_seconds: float
    uuids: tuple[str, ...]
    tokens_saved: int
    estimated: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheTtlDetected(Event):
    """inactivity-memorize at "auto" learned the prompt-cache TTL the session uses."""

    ttl: str
    source: str
    threshold_seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class MemorizeSkipped(Event):
    """A pause was long enough but nothing was marked, and why."""

    gap_seconds: float
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Custom(Event):
    """An event of a third-party handler that has no type of its own."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class ThresholdDecision(Event):
    """update-threshold's decision after a response: the figures and the outcome."""

    response_uuid: str
    tokens: int
    growth: int
    tool_calls: int
    quiet: bool
    initialized: bool
    extract: bool
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ExtractionStarted(Event):
    """forked-extraction began writing the notes."""

    backend: str
    path: str
    upto_uuid: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ExtractionFinished(Event):
    """The notes were written."""

    backend: str
    path: str
    upto_uuid: str
    turns: int
    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    output_tokens: int
    seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class ExtractionFailed(Event):
    """The notes were not written; the next positive decision retries."""

    backend: str
    path: str
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallRefused(Event):
    """The fork called a tool the gate does not allow."""

    tool: str
    detail: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Compacted(Event):
    """memory-compact replaced the history its notes cover with the notes."""

    tokens_before: int
    tokens_after: int
    kept_messages: int
    start_uuid: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionSkipped(Event):
    """The context was over the threshold but the request was sent as it was, and why."""

    tokens: int
    reason: str


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
