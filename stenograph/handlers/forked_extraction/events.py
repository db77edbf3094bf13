"""forked-extraction's events: the notes writer started, finished, failed, refused a
tool call."""

from __future__ import annotations

from ...engine.events import Event, event


@event
class ExtractionStarted(Event):
    """forked-extraction began writing the notes."""

    backend: str
    path: str
    upto_uuid: str


@event
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


@event
class ExtractionFailed(Event):
    """The notes were not written; the next positive decision retries."""

    backend: str
    path: str
    error: str


@event
class ToolCallRefused(Event):
    """The fork called a tool the gate does not allow."""

    tool: str
    detail: str
