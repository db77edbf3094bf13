"""stenograph: manage what an LLM agent sends to its model.

A pipeline of handlers runs around every model call: a pre-call phase before each request
and a post-sampling phase after each response, chosen and configured in preset files.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine.clock import ManualClock
    from .engine.context import PostSamplingCall, PreCallCall
    from .engine.engine import Engine, Slot
    from .engine.entries import Entry, EntryError
    from .engine.errors import HandlerError, PluginError, PresetError, RequestError, StenographError
    from .engine.events import (
        CacheTtlDetected,
        Compacted,
        CompactionSkipped,
        Custom,
        EntriesMemorized,
        Event,
        ExtractionFailed,
        ExtractionFinished,
        ExtractionStarted,
        HandlerFailed,
        HistoryEdited,
        HistoryNotFollowed,
        HistoryTruncated,
        MemorizeSkipped,
        NotesClientUnavailable,
        RequestViolation,
        StateReset,
        ThresholdDecision,
        ToolCallRefused,
    )
    from .engine.extraction import ExtractionRequest
    from .engine.guard import check_pairing, check_request
    from .engine.handler import Handler
    from .engine.hookspecs import hookimpl
    from .engine.request import Request
    from .engine.session import Session
    from .engine.settings import HandlerSettings
    from .engine.state import HandlerState, StateKey
    from .engine.sync import ConversationMismatch, Synced

__version__ = "0.1.0"
# name -> module: imported on first use, so `import stenograph` loads none of pydantic, the
# tokenizer, the SDK or rich
_EXPORTS = {
    "CacheTtlDetected": ".engine.events",
    "Compacted": ".engine.events",
    "CompactionSkipped": ".engine.events",
    "ConversationMismatch": ".engine.sync",
    "Custom": ".engine.events",
    "Engine": ".engine.engine",
    "EntriesMemorized": ".engine.events",
    "Entry": ".engine.entries",
    "EntryError": ".engine.entries",
    "Event": ".engine.events",
    "ExtractionFailed": ".engine.events",
    "ExtractionFinished": ".engine.events",
    "ExtractionRequest": ".engine.extraction",
    "ExtractionStarted": ".engine.events",
    "Handler": ".engine.handler",
    "HandlerError": ".engine.errors",
    "HandlerFailed": ".engine.events",
    "HandlerSettings": ".engine.settings",
    "HandlerState": ".engine.state",
    "HistoryEdited": ".engine.events",
    "HistoryNotFollowed": ".engine.events",
    "HistoryTruncated": ".engine.events",
    "ManualClock": ".engine.clock",
    "MemorizeSkipped": ".engine.events",
    "NotesClientUnavailable": ".engine.events",
    "PluginError": ".engine.errors",
    "PostSamplingCall": ".engine.context",
    "PreCallCall": ".engine.context",
    "PresetError": ".engine.errors",
    "Request": ".engine.request",
    "RequestError": ".engine.errors",
    "RequestViolation": ".engine.events",
    "Session": ".engine.session",
    "Slot": ".engine.engine",
    "StateKey": ".engine.state",
    "StateReset": ".engine.events",
    "StenographError": ".engine.errors",
    "Synced": ".engine.sync",
    "ThresholdDecision": ".engine.events",
    "ToolCallRefused": ".engine.events",
    "check_pairing": ".engine.guard",
    "check_request": ".engine.guard",
    "hookimpl": ".engine.hookspecs",
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
    "PluginError",
    "PostSamplingCall",
    "PreCallCall",
    "PresetError",
    "Request",
    "RequestError",
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
