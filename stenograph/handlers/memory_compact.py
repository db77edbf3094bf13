"""memory-compact: when the context fills up, the session notes replace the history they
cover, and the most recent messages are kept verbatim (Claude Code's session-memory
compaction). The boundary is stored, so later requests keep the same prefix. It learns of
the notes through the notes hooks (``notes_written``, ``extraction_idle``,
``notes_current``), whichever handler writes them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..engine.context import PreCallCall
from ..engine.entries import Entry
from ..engine.events import Event, event
from ..engine.extraction import NotesRecord
from ..engine.files import home_path
from ..engine.handler import Handler
from ..engine.hookspecs import hookimpl
from ..engine.notes import headings, read_notes, sections
from ..engine.session import Session
from ..engine.settings import HandlerSettings
from ..engine.state import HandlerState, StateKey
from ..engine.tokens import count_tiktoken, encoding

log = logging.getLogger("stenograph.handlers.memory_compact")
INTRO = (
    "This session continues an earlier conversation that was shortened to save context."
    " The notes below were kept during that conversation and cover it up to here; the"
    " messages after them are the most recent part, word for word. The full notes are in"
    " {path}."
)


@event
class Compacted(Event):
    """memory-compact replaced the history its notes cover with the notes."""

    tokens_before: int
    tokens_after: int
    kept_messages: int
    start_uuid: str


@event
class CompactionSkipped(Event):
    """The context was over the threshold but the request was sent as it was, and why."""

    tokens: int
    reason: str


class MemoryCompactSettings(HandlerSettings):
    """Settings of memory-compact."""

    max_context_tokens: int | None = Field(
        None, ge=1000, description="Compact when the context reaches this many tokens."
    )
    context_window: int = Field(
        200_000, ge=1000, description="The model's context window (used with contextFraction)."
    )
    context_fraction: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Compact at this fraction of contextWindow when maxContextTokens is not set.",
    )
    min_keep_tokens: int = Field(10_000, ge=0, description="Recent history kept, at least.")
    min_keep_text_messages: int = Field(
        5, ge=0, description="Recent messages with text kept, at least."
    )
    max_keep_tokens: int = Field(40_000, ge=1, description="Recent history kept, at most.")
    note_section_tokens: int = Field(
        2000, ge=100, description="Each notes section is cut to this size in the request."
    )
    wait_seconds: float = Field(
        15.0, ge=0, le=600, description="Wait this long for a running extraction first."
    )
    stale_seconds: float = Field(
        60.0, gt=0, description="An extraction running longer is not waited for."
    )
    token_estimator: Literal["tiktoken", "chars4"] = Field(
        "tiktoken", description="Estimates for entries after the newest usage."
    )
    resume_notes_path: str | None = Field(
        None,
        description="Notes of an earlier session to put before a fresh session's history"
        " (a host starting a new conversation on the same task).",
    )

    @field_validator("resume_notes_path")
    @classmethod
    def _home_known(cls, value: str | None) -> str | None:
        if value is not None:
            home_path(value)
        return value

    @model_validator(mode="after")
    def _keep_bounds(self) -> MemoryCompactSettings:
        if self.min_keep_tokens > self.max_keep_tokens:
            raise ValueError("minKeepTokens must not exceed maxKeepTokens")
        return self

    @property
    def threshold(self) -> int:
        """The context size that triggers a compaction."""
        return self.max_context_tokens or int(self.context_window * self.context_fraction)


class MemoryCompactState(HandlerState):
    """Whether the resume notes were put in, and what the window's preamble adds."""

    resumed: bool = False
    overhead: int = Field(0, ge=0)


class MemoryCompact(Handler[MemoryCompactSettings]):
    """Replaces covered history with the session notes when the context is full."""

    name = "memory-compact"
    phase = "pre-call"
    summary = "When the context fills up, the session notes replace the history they cover."
    Settings = MemoryCompactSettings
    State = MemoryCompactState
    blocking = True  # waits for a running extraction before compacting

    def __init__(self, settings: MemoryCompactSettings, slot: int = 0) -> None:
        super().__init__(settings, slot)
        self.notes_key = StateKey[NotesRecord](f"{slot}:{self.name}:notes")

    @hookimpl
    def notes_written(self, session: Session, notes: NotesRecord) -> None:
        """Remember the newest notes (announced again when the session reopens)."""
        session.stash[self.notes_key] = notes

    @hookimpl
    def pre_call(self, session: Session, call: PreCallCall, state: MemoryCompactState) -> None:
        """Compact when the context reached the threshold; inject resume notes once."""
        if self.settings.resume_notes_path and not state.resumed and session.history:
            state.resumed = True
            self._resume(session)
        if self._size(session, state, exact=False) < self.settings.threshold:
            return  # surely below: nothing is tokenized on the host's thread
        tokens = self._size(session, state)
        if tokens < self.settings.threshold:
            return
        reason = self._compact(session, call, state, tokens)
        if reason:
            log.info("not compacted (%s): %s", f"{tokens:,} tokens", reason)
            call.emit(CompactionSkipped, tokens=tokens, reason=reason)

    def _size(self, session: Session, state: MemoryCompactState, exact: bool = True) -> int:
        """The context size compared with the threshold (``exact`` False: at least it,
        from the counts made so far and bounds for the rest)."""
        history, estimator = session.history, self.settings.token_estimator
        if history.preamble:
            return history.request_tokens(estimator, exact) + state.overhead
        return history.context_size(estimator, exact)

    def _compact(
        self, session: Session, call: PreCallCall, state: MemoryCompactState, tokens: int
    ) -> str:
        """Compact, or return why not."""
        s = self.settings
        idle = session.hook.extraction_idle(timeout=s.wait_seconds, stale_after=s.stale_seconds)
        if idle is False:
            return "an extraction is still running after the wait"
        notes = session.stash.get(self.notes_key, None)
        if notes is None:
            return "no notes yet"
        text = session.hook.notes_current()
        if not text or not text.strip():
            return f"the notes file {notes.label} is missing or empty"
        if _template_only(text):
            return "the notes hold nothing beyond the template"
        covered = session.history.by_uuid.get(notes.upto_uuid)
        if covered is None:
            return "the entry the notes cover up to is not in the history"
        start = self._start(session, covered.index + 1)
        if start is None:
            return "no place to cut that keeps tool calls and their results together"
        preamble = [{"role": "user", "content": self._summary(text, notes.label)}]
        after = self._tokens_after(session, start, preamble, tokens)
        if after >= s.threshold:
            return f"still {after:,} tokens after compaction (threshold {s.threshold:,})"
        if start == session.history.window_start and session.history.preamble == preamble:
            return ""
        state.overhead = max(0, tokens - session.history.request_tokens(s.token_estimator))
        first = session.history[start]
        session.set_window(first, preamble)
        merged = first.role == "user"  # the notes and the first kept message are sent as one
        kept = len(session.history.messages()) - 1 + merged
        log.info("compacted: %s -> %s tokens, %d messages kept", tokens, after, kept)
        call.emit(
            Compacted,
            tokens_before=tokens,
            tokens_after=after,
            kept_messages=kept,
            start_uuid=first.uuid,
        )
        return ""

    def _start(self, session: Session, first_uncovered: int) -> int | None:
        """Where the kept history starts: back from the first uncovered entry until the
        minimums are met (never past maxKeepTokens), then at the nearest safe place."""
        history, s = session.history, self.settings
        entries = history.entries
        if first_uncovered >= len(entries):
            return None
        kept = sum(history.sent_tokens(e) for e in entries[first_uncovered:])
        texts = sum(_has_text(e) for e in entries[first_uncovered:])
        start = first_uncovered
        while start > 0 and (kept < s.min_keep_tokens or texts < s.min_keep_text_messages):
            cost = history.sent_tokens(entries[start - 1])
            if kept + cost > s.max_keep_tokens:
                break
            start, kept, texts = start - 1, kept + cost, texts + _has_text(entries[start - 1])
        candidate = start
        while candidate > 0:  # a safe place further back keeps more, within maxKeepTokens
            if history.safe_start(candidate):
                return candidate
            cost = history.sent_tokens(entries[candidate - 1])
            if kept + cost > s.max_keep_tokens:
                break
            candidate, kept = candidate - 1, kept + cost
        for candidate in range(start + 1, first_uncovered + 1):
            if history.safe_start(candidate):
                return candidate
        return None

    def _tokens_after(
        self, session: Session, start: int, preamble: list[dict[str, Any]], tokens: int
    ) -> int:
        history, estimator = session.history, self.settings.token_estimator
        kept = sum(history.sent_tokens(e, estimator) for e in history.entries[start:])
        overhead = max(0, tokens - history.request_tokens(estimator))
        return kept + count_tiktoken(preamble[0]["content"]) + overhead

    def _summary(self, notes: str, path: str) -> str:
        budget = self.settings.note_section_tokens
        parts = []
        for section in sections(notes):
            body = section.body
            if section.tokens > budget:
                kept = encoding().decode(encoding().encode_ordinary(body)[:budget])
                body = f"{kept.rstrip()}\n[… cut here; the whole section is in {path}]\n"
            parts.append(section.heading + body)
        notes_text = "".join(parts).strip()
        return f"{INTRO.format(path=path)}\n\n<session-notes>\n{notes_text}\n</session-notes>"

    def _resume(self, session: Session) -> None:
        path = home_path(self.settings.resume_notes_path or "")
        text = _read(str(path))
        if not text or _template_only(text) or session.history.preamble:
            log.info("no notes to resume from at %s", path)
            return
        if any(e.role == "assistant" for e in session.history):
            return
        session.set_window(
            session.history[0], [{"role": "user", "content": self._summary(text, str(path))}]
        )


def _read(path: str) -> str | None:
    """The notes, or None (missing, a symbolic link, not UTF-8, over the cap: logged)."""
    try:
        return read_notes(Path(path))
    except OSError as exc:
        log.warning("notes not used: %s", exc)
        return None


def _template_only(text: str) -> bool:
    """Only headings and their one-line italic descriptions."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return bool(headings(text)) and all(
        line.startswith("# ") or (line.startswith("_") and line.endswith("_")) for line in lines
    )


def _has_text(entry: Entry) -> bool:
    return any(b.get("type") == "text" and b.get("text", "").strip() for b in entry.blocks())
