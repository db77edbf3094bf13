"""inactivity-memorize: after a pause, earlier tool calls and results are sent reduced.

Anthropic's prompt cache lives 5 minutes by default: after a longer pause the cached
prefix is gone anyway, so rewriting old entries then costs no extra cache miss.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import Field

from ..engine.context import PreCallCall
from ..engine.entries import Entry
from ..engine.events import EntriesMemorized, MemorizeSkipped
from ..engine.handler import Handler
from ..engine.hookspecs import hookimpl
from ..engine.session import Session
from ..engine.settings import HandlerSettings

log = logging.getLogger("stenograph.handlers.inactivity_memorize")


class InactivityMemorizeSettings(HandlerSettings):
    """Settings of inactivity-memorize."""

    inactivity_threshold_seconds: float = Field(
        300.0,
        ge=0,
        le=30 * 86400,
        description="Pause (seconds, >= 0) after which earlier tool entries are memorized;"
        " 300 matches the 5-minute prompt cache, 3600 the 1-hour cache.",
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


class InactivityMemorize(Handler):
    """Marks earlier tool_use / tool_result entries memorized after a pause."""

    name = "inactivity-memorize"
    phase = "pre-call"
    summary = "After a pause, earlier tool calls and results are sent in reduced form."
    Settings = InactivityMemorizeSettings
    settings: InactivityMemorizeSettings

    @hookimpl
    def pre_call(self, session: Session, call: PreCallCall) -> None:
        """Mark tool entries before the new input when the pause reached the threshold."""
        previous = call.previous_response
        if previous is None or previous.timestamp is None:
            log.debug("skipped: no earlier response with a valid timestamp")
            return
        gap = call.now - previous.timestamp
        threshold = self.settings.inactivity_threshold_seconds
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
        for entry in marked:
            log.debug("memorized entry %d (%s, %s)", entry.index, entry.role, entry.uuid)
        log.info("memorized %d entries, ~%d tokens left out", len(marked), saved)
        event = call.emit(
            EntriesMemorized,
            gap_seconds=gap,
            threshold_seconds=threshold,
            uuids=tuple(e.uuid for e in marked),
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

    def _candidates(self, session: Session, input_start: int) -> list[Entry]:
        excluded = set(self.settings.exclude_tools)
        pending = session.history.unmemorized_tool_entries
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


def _only_excluded_tools(session: Session, entry: Entry, excluded: set[str]) -> bool:
    ids = entry.tool_use_ids + entry.tool_result_ids
    return all(session.history.tool_name(i) in excluded for i in ids)


@hookimpl
def register_handlers(register: Any) -> None:
    """Register inactivity-memorize."""
    register(InactivityMemorize)
