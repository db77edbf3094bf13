"""update-threshold: decides when the session notes need refreshing (Claude Code's
session-memory trigger), and files an extraction request when they do."""

from __future__ import annotations

import functools
import logging
from typing import Literal

from pydantic import Field

from ..engine.context import PostSamplingCall
from ..engine.entries import Entry
from ..engine.events import Event, event
from ..engine.extraction import ExtractionRequest, request_extraction
from ..engine.handler import Handler
from ..engine.hookspecs import hookimpl
from ..engine.session import Session
from ..engine.settings import HandlerSettings
from ..engine.state import HandlerState

log = logging.getLogger("stenograph.handlers.update_threshold")


@event
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


class UpdateThresholdSettings(HandlerSettings):
    """Settings of update-threshold (defaults: Claude Code's)."""

    minimum_message_tokens_to_init: int = Field(
        10_000, ge=1, description="Context size (tokens, >= 1) before the first notes are written."
    )
    minimum_tokens_between_update: int = Field(
        5_000, ge=1, description="Context growth (tokens, >= 1) required since the last update."
    )
    tool_calls_between_updates: int = Field(
        3, ge=1, description="Tool calls (>= 1) since the last update that allow one mid-task."
    )
    token_estimator: Literal["tiktoken", "chars4"] = Field(
        "tiktoken",
        description="Estimates for entries after the newest reported usage: 'tiktoken'"
        " (cl100k, bundled) or 'chars4' (Claude Code's characters / 4).",
    )


class UpdateThresholdState(HandlerState):
    """What update-threshold keeps per session (it survives restarts)."""

    initialized: bool = False
    tokens_at_last_extraction: int = Field(0, ge=0)
    last_extracted_uuid: str | None = None


class UpdateThreshold(Handler[UpdateThresholdSettings]):
    """After each response: extract = growth >= minimum and (enough tool calls or quiet)."""

    name = "update-threshold"
    phase = "post-sampling"
    summary = "Decides when the session notes need refreshing (Claude Code's trigger)."
    Settings = UpdateThresholdSettings
    State = UpdateThresholdState

    @hookimpl
    def post_sampling(
        self, session: Session, call: PostSamplingCall, state: UpdateThresholdState
    ) -> None:
        """Decide, record the decision, and request an extraction when it is positive."""
        response = call.response
        if response is None:
            return
        event = self.decision(call, response, state)
        session.record(event)
        if event.extract:
            request = ExtractionRequest(
                response.uuid,
                response.index,
                event.tokens,
                event.tool_calls,
                event.reason,
                call.now,
            )
            request.on_success = functools.partial(_advance, state)
            request_extraction(session, request)

    def decision(
        self, call: PostSamplingCall, response: Entry, state: UpdateThresholdState
    ) -> ThresholdDecision:
        """The decision after ``response``, as its event (not recorded yet)."""
        quiet = not response.tool_use_ids
        tokens, growth, tool_calls, extract, reason = self.decide(call.session, state, quiet)
        return ThresholdDecision(
            time=call.now,
            handler=call.handler,
            slot=call.slot,
            response_uuid=response.uuid,
            tokens=tokens,
            growth=growth,
            tool_calls=tool_calls,
            quiet=quiet,
            initialized=state.initialized,
            extract=extract,
            reason=reason,
        )

    def decide(
        self, session: Session, state: UpdateThresholdState, quiet: bool
    ) -> tuple[int, int, int, bool, str]:
        """(tokens, growth, tool calls, extract, reason) after a response; marks the session
        initialized when due."""
        s = self.settings
        history = session.history
        tokens = history.context_size(s.token_estimator)
        tool_calls = history.tool_calls_after(state.last_extracted_uuid)
        if not state.initialized:
            if tokens < s.minimum_message_tokens_to_init:
                why = f"not initialized: {tokens:,} < {s.minimum_message_tokens_to_init:,}"
                return tokens, tokens, tool_calls, False, why
            state.initialized = True
        base = state.tokens_at_last_extraction
        if tokens < base:
            state.tokens_at_last_extraction = base = tokens
        growth = tokens - base
        return tokens, growth, tool_calls, *self._outcome(growth, tool_calls, quiet)

    def _outcome(self, growth: int, tool_calls: int, quiet: bool) -> tuple[bool, str]:
        """(extract, reason) once initialized."""
        s = self.settings
        if growth < s.minimum_tokens_between_update:
            return False, f"growth {growth:,} < {s.minimum_tokens_between_update:,}"
        if tool_calls >= s.tool_calls_between_updates:
            why = f"{tool_calls:,} tool calls >= {s.tool_calls_between_updates:,}"
        elif quiet:
            why = "quiet (the response calls no tool)"
        else:
            why = (
                f"{tool_calls:,} tool calls < {s.tool_calls_between_updates:,}"
                " and the response calls a tool"
            )
            return False, f"growth {growth:,} ok, but {why}"
        return True, f"growth {growth:,} and {why}"


def _advance(state: UpdateThresholdState, request: ExtractionRequest) -> None:
    """Called when the extraction succeeded: the next window starts after it."""
    state.tokens_at_last_extraction = request.tokens
    state.last_extracted_uuid = request.upto_uuid
