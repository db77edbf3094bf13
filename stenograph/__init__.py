"""stenograph: manage what an LLM agent sends to its model.

A pipeline of handlers runs around every model call: a pre-call phase before each request
and a post-sampling phase after each response, chosen and configured in preset files.
"""

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
    HistoryTruncated,
    MemorizeSkipped,
    RequestViolation,
    StateReset,
    ThresholdDecision,
    ToolCallRefused,
)
from .engine.extraction import ExtractionRequest
from .engine.guard import check_pairing, check_request
from .engine.handler import Handler, HandlerState
from .engine.hookspecs import hookimpl
from .engine.session import Session
from .engine.settings import HandlerSettings
from .engine.sync import ConversationMismatch, Synced

__version__ = "0.1.0"
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
    "HistoryTruncated",
    "HandlerSettings",
    "HandlerState",
    "ManualClock",
    "MemorizeSkipped",
    "PluginError",
    "PostSamplingCall",
    "PreCallCall",
    "PresetError",
    "RequestError",
    "RequestViolation",
    "Session",
    "Slot",
    "StateReset",
    "StenographError",
    "Synced",
    "ThresholdDecision",
    "ToolCallRefused",
    "check_pairing",
    "check_request",
    "hookimpl",
]
