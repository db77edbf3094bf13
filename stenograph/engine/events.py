"""Typed events: what the engine and the handlers did, in the order they did it."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from itertools import islice
from typing import Any, SupportsIndex, TypeVar, overload

from typing_extensions import dataclass_transform

from .speedups import C

E = TypeVar("E")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def event(cls: type[E]) -> type[E]:
    """``@dataclass(frozen=True, kw_only=True, slots=True)`` for an event type, with an
    ``__init__`` that sets the slots through their descriptors in one call (``set_slots``):
    a fifth of the cost of the frozen dataclass's own, which goes through
    ``object.__setattr__`` field by field (an event is recorded on every response)."""
    made = dataclass(frozen=True, kw_only=True, slots=True)(cls)
    made.__init__ = _slot_init(made)  # type: ignore[method-assign]
    return made


def _set_slots(obj: object, descriptors: tuple[Any, ...], values: tuple[Any, ...]) -> None:
    """Set each value through its descriptor (the Python twin of ``C.set_slots``)."""
    if len(descriptors) != len(values):
        raise TypeError("set_slots(obj, descriptors, values): two tuples of one length")
    for descriptor, value in zip(descriptors, values, strict=False):  # lengths checked
        descriptor.__set__(obj, value)


set_slots = _set_slots if C is None else C.set_slots


def _slot_init(cls: type) -> Callable[..., None]:
    """An ``__init__`` taking every field by keyword, as the dataclass's does."""
    namespace: dict[str, Any] = {"_MISSING": MISSING, "_set_slots": set_slots}
    params, body, names = [], [], []
    for f in fields(cls):
        if not f.init:
            raise TypeError(f"event {cls.__name__}: field {f.name!r} has init=False")
        names.append(f.name)
        if f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"    if {f.name} is _MISSING: {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
    namespace["_slots"] = tuple(getattr(cls, name) for name in names)
    body.append(f"    _set_slots(self, _slots, ({''.join(name + ', ' for name in names)}))")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    exec(f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body), namespace)
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


@event
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


class EventLog(deque[Event]):
    """A session's newest events, oldest first: a ``deque`` bounded at ``maxlen`` (the
    oldest goes in one step, where a list would move every event left on each one), read as
    a list is: a slice is a list, and it equals a list holding the same events."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Event | list[Event]:
        if not isinstance(index, slice):
            return super().__getitem__(index)
        size = len(self)
        start, stop, step = index.indices(size)
        if step == 1 and start >= size // 2:  # the newest few: read from the newest end
            return list(islice(reversed(self), size - stop, size - start))[::-1]
        return list(self)[index]

    def __eq__(self, other: object) -> bool:
        return list(self) == other if isinstance(other, list) else super().__eq__(other)


def json_safe(value: Any) -> Any:
    """``value`` with tuples as lists and non-JSON leaves as strings."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


@event
class HandlerFailed(Event):
    """A handler raised; the call went on as the other handlers left it."""

    phase: str
    error: str


@event
class RequestViolation(Event):
    """The outgoing request breaks a rule of the Messages API (see ``check_request``)."""

    problems: tuple[str, ...]


@event
class Custom(Event):
    """An event of a third-party handler that has no type of its own."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)


@event
class StateReset(Event):
    """Saved state could not be used as it was: ``part`` of it was reset (the handler's
    state, the request window, the notes record, or all of ``state.json``), and why; the
    file as it was is kept at ``copy``."""

    path: str
    part: str
    reason: str
    copy: str


@event
class HistoryEdited(Event):
    """The host's list changed earlier messages: the history now holds the host's content."""

    uuids: tuple[str, ...]


@event
class HistoryTruncated(Event):
    """The history was cut after ``after_uuid`` ('' when all was removed)."""

    after_uuid: str
    removed: int


@event
class NotesClientUnavailable(Event):
    """A framework adapter could not build the notes writer's Anthropic client from the
    framework's model (not an Anthropic model, or no settings to copy), and what happens
    instead."""

    model: str
    reason: str


@event
class HistoryNotFollowed(Event):
    """A framework adapter could not make the session hold the framework's message list
    (a message the session refuses); this call went out as the framework built it."""

    messages: int
    entries: int
    reason: str
