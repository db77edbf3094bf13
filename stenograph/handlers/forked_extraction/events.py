"""forked-extraction's events: the notes writer started, finished, failed, refused a
tool call."""

from __future__ import annotations

from dataclasses import dataclass

from ...engine.events import Event


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
