"""inactivity-memorize: after a pause, earlier tool calls and results are sent reduced.

Anthropic's prompt cache lives 5 minutes by default: after a longer pause the cached
prefix is gone anyway, so rewriting old entries then costs no extra cache miss. At "auto"
the threshold follows the TTL the session uses (5 minutes or 1 hour).
"""

from __future__ import annotations

import logging
from operator import attrgetter
from typing import Annotated, Any, Literal, cast

from pydantic import Field, field_validator

from ..engine.caching import TTL_SECONDS, cache_ttl
from ..engine.context import PreCallCall
from ..engine.entries import Entry
from ..engine.events import Event, event
from ..engine.handler import Handler
from ..engine.hookspecs import hookimpl
from ..engine.session import Session
from ..engine.settings import HandlerSettings
from ..engine.state import HandlerState

log = logging.getLogger("stenograph.handlers.inactivity_memorize")
MAX_THRESHOLD = 30 * 86400


@event
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


@event
class CacheTtlDetected(Event):
    """inactivity-memorize at "auto" learned the prompt-cache TTL the session uses."""

    ttl: str
    source: str
    threshold_seconds: float


@event
class MemorizeSkipped(Event):
    """A pause was long enough but nothing was marked, and why."""

    gap_seconds: float
    reason: str


class InactivityMemorizeSettings(HandlerSettings):
    """Settings of inactivity-memorize."""

    inactivity_threshold_seconds: (
        Annotated[float, Field(ge=0, le=MAX_THRESHOLD)] | Literal["auto"]
    ) = Field(
        300.0,
        description="Pause (seconds, 0 - 2,592,000) after which earlier tool entries are"
        ' memorized; 300 matches the 5-minute prompt cache, 3600 the 1-hour cache; "auto"'
        " follows the TTL the session uses (requests' cache_control, responses' usage).",
    )
    keep_recent: int = Field(
        0, ge=0, le=100_000, description="The newest N tool results (and their calls) stay whole."
    )
    exclude_tools: list[str] = Field(
        default_factory=list, description="Tool names whose calls and results are never reduced."
    )
    min_tokens_saved: int = Field(
        0,
        ge=0,
        description="Do nothing unless at least this many tokens would be saved (a reduced"
        " history is a new prompt-cache prefix).",
    )
    reduce_tool_inputs: bool = Field(
        False, description="Also shorten long string inputs of memorized tool calls."
    )

    @field_validator("inactivity_threshold_seconds", mode="before")
    @classmethod
    def _seconds_or_auto(cls, value: Any) -> float | str:
        if value == "auto":
            return "auto"
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            raise ValueError('must be a number of seconds or "auto"') from None
        if isinstance(value, bool) or not 0 <= seconds <= MAX_THRESHOLD:
            raise ValueError(f'must be from 0 to {MAX_THRESHOLD:,} seconds, or "auto"')
        return seconds


class InactivityMemorizeState(HandlerState):
    """The prompt-cache TTL an "auto" threshold follows, once detected."""

    cache_ttl: Literal["5m", "1h"] | None = None
    cache_ttl_source: Literal["request", "usage"] | None = None

    def detected(self, ttl: str, source: str) -> None:
        """Keep a detected TTL (validated: "5m" or "1h", from the "request" or "usage")."""
        self.cache_ttl, self.cache_ttl_source = cast(Any, ttl), cast(Any, source)


class InactivityMemorize(Handler[InactivityMemorizeSettings]):
    """Marks earlier tool_use / tool_result entries memorized after a pause."""

    name = "inactivity-memorize"
    phase = "pre-call"
    summary = "After a pause, earlier tool calls and results are sent in reduced form."
    Settings = InactivityMemorizeSettings
    State = InactivityMemorizeState

    @hookimpl
    def pre_call(self, session: Session, call: PreCallCall, state: InactivityMemorizeState) -> None:
        """Mark tool entries before the new input when the pause reached the threshold."""
        threshold = self._threshold(call, state)
        previous = call.previous_response
        if previous is None or previous.timestamp is None:
            log.debug("skipped: no earlier response with a valid timestamp")
            return
        gap = call.now - previous.timestamp
        if gap < threshold:
            return
        candidates = self._candidates(session, call.input_start)
        if not candidates:
            return
        log.info("acting: gap %.0fs >= threshold %.0fs", gap, threshold)
        keep = self._kept_tool_ids(session, call.input_start)
        saved, missing = self._saving(session, candidates, keep)
        if saved < self.settings.min_tokens_saved:
            reason = f"saving {saved:,} < minTokensSaved {self.settings.min_tokens_saved:,}"
            log.info("nothing marked: %s", reason)
            call.emit(MemorizeSkipped, gap_seconds=gap, reason=reason)
            return
        marked = call.memorize(
            candidates, keep=keep, reduce_inputs=self.settings.reduce_tool_inputs
        )
        if log.isEnabledFor(logging.DEBUG):
            for entry in marked:
                log.debug("memorized entry %d (%s, %s)", entry.index, entry.role, entry.uuid)
        log.info("memorized %d entries, ~%d tokens left out", len(marked), saved)
        event = call.emit(
            EntriesMemorized,
            gap_seconds=gap,
            threshold_seconds=threshold,
            uuids=tuple(map(attrgetter("uuid"), marked)),
            tokens_saved=saved,
            estimated=bool(missing),
        )
        if missing:
            session.amend_later(event, lambda: self._counted(session, marked, keep))

    def _saving(
        self, session: Session, candidates: list[Entry], keep: list[str]
    ) -> tuple[int, list[Entry]]:
        """(tokens saved, entries not counted yet). The counts the background made as the
        entries arrived are used; a missing one is made here when ``minTokensSaved`` needs
        the figure, else estimated at chars/4 (and counted later, in the background)."""
        history, kept = session.history, set(keep)
        reduce, exact = self.settings.reduce_tool_inputs, self.settings.min_tokens_saved > 0
        if not kept and not reduce:  # the usual memorize: every count was made in advance
            counted = history.usual_savings(candidates)
            if counted is not None:
                return counted, []
        saved, missing = 0, []
        for entry in candidates:
            tokens = history.saving(entry, kept, reduce, count=exact)
            if tokens is None:
                missing.append(entry)
                tokens = history.estimated_saving(entry, kept, reduce)
            saved += tokens
        return saved, missing

    def _counted(self, session: Session, marked: list[Entry], keep: list[str]) -> dict[str, Any]:
        """The event's figures once every marked entry is counted."""
        history, kept, reduce = session.history, set(keep), self.settings.reduce_tool_inputs
        saved = sum(history.saving(e, kept, reduce) or 0 for e in marked)
        log.info("memorize counted: ~%d tokens left out", saved)
        return {"tokens_saved": saved, "estimated": False}

    def _threshold(self, call: PreCallCall, state: InactivityMemorizeState) -> float:
        """The threshold setting, or at "auto" the TTL of the session's cache (learned
        from this request and the responses since the last one; 5 minutes until then)."""
        setting = self.settings.inactivity_threshold_seconds
        if setting != "auto":
            return setting
        found = observed_ttl(call)
        if found is not None and found[0] != state.cache_ttl:
            state.detected(*found)
            seconds = TTL_SECONDS[found[0]]
            log.info("prompt-cache TTL %s (from the %s): threshold %.0fs", *found, seconds)
            call.emit(CacheTtlDetected, ttl=found[0], source=found[1], threshold_seconds=seconds)
        return TTL_SECONDS[state.cache_ttl or "5m"]

    def _candidates(self, session: Session, input_start: int) -> list[Entry]:
        excluded = set(self.settings.exclude_tools)
        pending = session.history.unmemorized_tool_entries
        if not excluded:  # all of them but the new input's (at the end: index order)
            out = list(pending.values())
            while out and out[-1].index >= input_start:
                out.pop()
            return out
        out = []
        for entry in pending.values():  # in index order
            if entry.index >= input_start:
                break
            if excluded and _only_excluded_tools(session, entry, excluded):
                continue
            out.append(entry)
        return out

    def _kept_tool_ids(self, session: Session, input_start: int) -> list[str]:
        """Tool ids left whole: the newest ``keepRecent`` results and the excluded tools."""
        history = session.history
        keep: list[str] = []
        excluded = set(self.settings.exclude_tools)
        if excluded:
            for entry in history.unmemorized_tool_entries.values():
                if entry.index >= input_start:
                    break
                ids = entry.tool_use_ids + entry.tool_result_ids
                keep.extend(i for i in ids if history.tool_name(i) in excluded)
        wanted = self.settings.keep_recent
        index = input_start - 1
        recent: list[str] = []
        while wanted and index >= 0 and len(recent) < wanted:
            recent.extend(reversed(history.entries[index].tool_result_ids))
            index -= 1
        keep.extend(recent[:wanted])
        return sorted(set(keep))


def observed_ttl(call: PreCallCall) -> tuple[str, str] | None:
    """("5m" | "1h", "request" | "usage"): the TTL of this request's last breakpoint, else
    of the newest response's cache writes (1h only when it wrote nothing at 5 minutes).
    Only what is new to this pre-call is read: the unseen entries, the system and tools."""
    last = cache_ttl(call.extra.get("cache_control"))
    entries, start = call.session.history.entries, call.first_unseen
    unseen = range(call.end - 1, start - 1, -1)  # newest first
    for index in unseen:
        if last:
            break
        last = _breakpoint_ttl(entries[index].content)
    last = last or _breakpoint_ttl(call.system) or _breakpoint_ttl(call.tools)
    if last:
        return last, "request"
    for index in unseen:
        usage = entries[index].usage
        if usage:
            if usage.get("ephemeral_5m_input_tokens"):
                return "5m", "usage"
            if usage.get("ephemeral_1h_input_tokens"):
                return "1h", "usage"
    return None


def _breakpoint_ttl(blocks: Any) -> str | None:
    """The TTL of the last block with a ``cache_control`` in ``blocks`` (a list of blocks;
    anything else has none)."""
    if not isinstance(blocks, list):
        return None
    for block in reversed(blocks):
        if isinstance(block, dict):
            control = block.get("cache_control")
            if control is not None and (ttl := cache_ttl(control)):
                return ttl
    return None


def _only_excluded_tools(session: Session, entry: Entry, excluded: set[str]) -> bool:
    ids = entry.tool_use_ids + entry.tool_result_ids
    return all(session.history.tool_name(i) in excluded for i in ids)
