"""stenograph: manage what an LLM agent sends to its model.

A pipeline of handlers runs around every model call: a pre-call phase before each request
and a post-sampling phase after each response, chosen and configured in preset files.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING``: importing typing costs start-up time
if TYPE_CHECKING:
    from typing import Any

    from .engine.clock import ManualClock
    from .engine.context import PostSamplingCall, PreCallCall
    from .engine.engine import Engine, Slot
    from .engine.entries import Entry, EntryError
    from .engine.errors import HandlerError, PluginError, PresetError, RequestError, StenographError
    from .engine.events import (
        Custom,
        Event,
        HandlerFailed,
        HistoryEdited,
        HistoryNotFollowed,
        HistoryTruncated,
        NotesClientUnavailable,
        RequestViolation,
        StateReset,
    )
    from .engine.extraction import ExtractionRequest, NotesRecord, request_extraction
    from .engine.guard import check_pairing, check_request
    from .engine.handler import Handler
    from .engine.hookspecs import hookimpl
    from .engine.request import Request, RequestMessages
    from .engine.session import Session
    from .engine.settings import HandlerSettings
    from .engine.state import HandlerState, StateKey
    from .engine.sync import ConversationMismatch, Synced
    from .handlers.forked_extraction.events import (
        ExtractionFailed,
        ExtractionFinished,
        ExtractionStarted,
        ToolCallRefused,
    )
    from .handlers.inactivity_memorize import CacheTtlDetected, EntriesMemorized, MemorizeSkipped
    from .handlers.memory_compact import Compacted, CompactionSkipped
    from .handlers.update_threshold import ThresholdDecision

__version__ = "0.1.0"
# name -> module: imported on first use, so `import stenograph` loads none of pydantic, the
# tokenizer, the SDK or rich
_EXPORTS = {
    "CacheTtlDetected": ".handlers.inactivity_memorize",
    "Compacted": ".handlers.memory_compact",
    "CompactionSkipped": ".handlers.memory_compact",
    "ConversationMismatch": ".engine.sync",
    "Custom": ".engine.events",
    "Engine": ".engine.engine",
    "EntriesMemorized": ".handlers.inactivity_memorize",
    "Entry": ".engine.entries",
    "EntryError": ".engine.entries",
    "Event": ".engine.events",
    "ExtractionFailed": ".handlers.forked_extraction.events",
    "ExtractionFinished": ".handlers.forked_extraction.events",
    "ExtractionRequest": ".engine.extraction",
    "ExtractionStarted": ".handlers.forked_extraction.events",
    "Handler": ".engine.handler",
    "HandlerError": ".engine.errors",
    "HandlerFailed": ".engine.events",
    "HandlerSettings": ".engine.settings",
    "HandlerState": ".engine.state",
    "HistoryEdited": ".engine.events",
    "HistoryNotFollowed": ".engine.events",
    "HistoryTruncated": ".engine.events",
    "ManualClock": ".engine.clock",
    "MemorizeSkipped": ".handlers.inactivity_memorize",
    "NotesClientUnavailable": ".engine.events",
    "NotesRecord": ".engine.extraction",
    "PluginError": ".engine.errors",
    "PostSamplingCall": ".engine.context",
    "PreCallCall": ".engine.context",
    "PresetError": ".engine.errors",
    "Request": ".engine.request",
    "RequestMessages": ".engine.request",
    "RequestError": ".engine.errors",
    "RequestViolation": ".engine.events",
    "Session": ".engine.session",
    "Slot": ".engine.engine",
    "StateKey": ".engine.state",
    "StateReset": ".engine.events",
    "StenographError": ".engine.errors",
    "Synced": ".engine.sync",
    "ThresholdDecision": ".handlers.update_threshold",
    "ToolCallRefused": ".handlers.forked_extraction.events",
    "check_pairing": ".engine.guard",
    "check_request": ".engine.guard",
    "hookimpl": ".engine.hookspecs",
    "request_extraction": ".engine.extraction",
}
__all__ = [
    "CacheTtlDetected",
    "Compacted",
    "CompactionSkipped",
    "ConversationMismatch",
    "Custom",
    "Engine",
    "EntriesMemorized",
    "Entry",
    "EntryError",
    "Event",
    "ExtractionFailed",
    "ExtractionFinished",
    "ExtractionRequest",
    "ExtractionStarted",
    "Handler",
    "HandlerError",
    "HandlerFailed",
    "HistoryEdited",
    "HistoryNotFollowed",
    "HistoryTruncated",
    "HandlerSettings",
    "HandlerState",
    "ManualClock",
    "MemorizeSkipped",
    "NotesClientUnavailable",
    "NotesRecord",
    "PluginError",
    "PostSamplingCall",
    "PreCallCall",
    "PresetError",
    "Request",
    "RequestError",
    "RequestMessages",
    "RequestViolation",
    "Session",
    "Slot",
    "StateKey",
    "StateReset",
    "StenographError",
    "Synced",
    "ThresholdDecision",
    "ToolCallRefused",
    "check_pairing",
    "check_request",
    "hookimpl",
    "request_extraction",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stenograph' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
