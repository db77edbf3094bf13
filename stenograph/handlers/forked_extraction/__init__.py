"""forked-extraction: an isolated background copy of the agent writes the session notes.

It takes the extraction requests that update-threshold files (the ``extraction_requested``
hook), and runs — in the
background, on a snapshot — either a fork of the agent through the Anthropic API (same
model, system, tools and messages as the main thread, so its prompt cache is reused; only
edits of the notes file pass the tool gate) or the deterministic offline writer. It
announces the notes written (``notes_written``) and answers ``extraction_idle`` and
``notes_current`` for the handlers using them.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ...engine.events import Event
from ...engine.extraction import ExtractionRequest, NotesRecord
from ...engine.files import read_small_text
from ...engine.handler import Handler
from ...engine.hookspecs import hookimpl
from ...engine.notes import MAX_NOTES_CHARS, NotesUnreadable, sections
from ...engine.session import Session
from ...engine.settings import HandlerSettings
from ...engine.state import StateKey
from .desk import ExtractionDesk
from .events import ExtractionFailed, ExtractionFinished, ExtractionStarted, ToolCallRefused
from .fork import ForkContext, ForkResult, run_fork
from .gate import CLAUDE_CODE_EDIT, OWN_TOOL_NAME, EditError, Workspace, edit_tool_of
from .memory_file import MemoryFile, NotesConflict
from .offline import Facts, offline_notes

log = logging.getLogger("stenograph.handlers.forked_extraction")
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
REQUEST_KEYS = ("model", "system", "tools", "messages", "stream", "max_tokens")


def _text_file(value: str | None) -> str | None:
    if value is None:
        return None
    path = Path(value).expanduser()
    try:
        read_small_text(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    return str(path)


class ForkedExtractionSettings(HandlerSettings):
    """Settings of forked-extraction."""

    backend: Literal["auto", "anthropic", "offline"] = Field(
        "auto",
        description="'anthropic' (the official SDK), 'offline' (no model, no network) or"
        " 'auto': anthropic when a client or ANTHROPIC_API_KEY is available, else offline.",
    )
    model: str | None = Field(None, description="Model of the fork (default: the main call's).")
    max_turns: int = Field(5, ge=1, le=50, description="Most model calls one fork may make.")
    max_output_tokens: int = Field(
        4096, ge=256, le=64_000, description="max_tokens of each fork call."
    )
    edit_mode: Literal["auto", "host-tool", "own-tool", "rewrite"] = Field(
        "auto",
        description="How the fork edits: the host's edit tool ('host-tool'), a tool of"
        " stenograph's added to the list ('own-tool': breaks the prompt cache), a fenced full"
        " rewrite ('rewrite'), or 'auto' (host-tool when the host has one, else rewrite).",
    )
    memory_path: str | None = Field(
        None,
        description="Notes file; default <state_dir>/<session_id>/session-memory.md."
        " May use {session_id}; a relative path is taken from the session folder (a"
        " temporary folder for in-memory sessions).",
    )
    template_path: str | None = Field(None, description="Markdown file replacing the template.")
    prompt_path: str | None = Field(
        None, description="Text file replacing the prompt ({{currentNotes}}, {{notesPath}}, …)."
    )
    section_budget_tokens: int = Field(2000, ge=100, description="Tokens per section, at most.")
    total_budget_tokens: int = Field(12_000, ge=500, description="Tokens of the whole file.")
    max_notes_chars: int = Field(
        MAX_NOTES_CHARS,
        ge=1000,
        le=10_000_000,
        description="Hard cap on the notes (characters): an edit that would make them longer"
        " is refused as a tool error, a longer file is not read.",
    )
    timeout_seconds: float = Field(120.0, gt=0, le=3600, description="Timeout of each call (s).")
    max_retries: int = Field(2, ge=0, le=10, description="SDK retries of each fork call.")

    _check_files = field_validator("template_path", "prompt_path")(_text_file)


def _package_text(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@dataclass
class Writer:
    """The notes writer's live objects in one session (never persisted)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    desk: ExtractionDesk = field(default_factory=ExtractionDesk)
    busy: bool = False
    backend: tuple[str, Any] | None = None
    facts: Facts | None = None
    folder: Path | None = None


class ForkedExtraction(Handler[ForkedExtractionSettings]):
    """Writes the session notes in the background when update-threshold asks for it."""

    name = "forked-extraction"
    phase = "post-sampling"
    summary = "An isolated background fork of the agent writes the session-memory file."
    Settings = ForkedExtractionSettings

    def __init__(self, settings: ForkedExtractionSettings, slot: int = 0) -> None:
        super().__init__(settings, slot)
        self.template = _read(settings.template_path) or _package_text("template.md")
        self.prompt = _read(settings.prompt_path) or _package_text("prompt.md")
        self.writer_key = StateKey[Writer](f"{slot}:{self.name}")

    def writer(self, session: Session) -> Writer:
        """This slot's live writer objects in ``session``."""
        return session.stash.setdefault(self.writer_key, Writer())

    @hookimpl
    def extraction_requested(self, session: Session, request: ExtractionRequest) -> bool:
        """Take the request with a snapshot of the last request; start the worker unless
        one runs (a request waiting for it is coalesced into this one)."""
        writer = self.writer(session)
        with writer.lock:
            writer.desk.file(request, self._context(session))
            if writer.busy:
                return True
            writer.busy = True
        session.run_in_background("notes", lambda: self._work(session, writer))
        return True

    @hookimpl
    def extraction_idle(self, session: Session, timeout: float, stale_after: float) -> bool:
        """Wait (bounded) until this slot has no extraction pending or running."""
        return self.writer(session).desk.wait_idle(timeout, stale_after)

    @hookimpl
    def notes_current(self, session: Session) -> str:
        """The notes file's text ('' when missing or unusable: logged)."""
        memory = self.memory_file(session)
        try:
            return memory.read()
        except NotesUnreadable as exc:
            log.warning("session %s: notes not used: %s", session.id, exc)
            return ""

    @hookimpl
    def session_opened(self, session: Session) -> None:
        """Temp files a killed notes writer left are removed."""
        if session.folder is not None:
            removed = self.memory_file(session).clean()
            if removed:
                log.info("session %s: removed %d leftover notes temp files", session.id, removed)

    @hookimpl
    def session_closing(self, session: Session) -> None:
        """An in-memory session's temporary notes folder goes with it."""
        folder = self.writer(session).folder
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def memory_file(self, session: Session) -> MemoryFile:
        """The notes file of ``session``."""
        return MemoryFile(self._path(session), self.template, self.settings.max_notes_chars)

    # the worker ------------------------------------------------------------------------

    def _work(self, session: Session, writer: Writer) -> None:
        """Take requests until none is left; whatever happens, the session is left able to
        start an extraction at the next trigger (never busy with nothing running)."""
        try:
            while True:
                with writer.lock:
                    taken = writer.desk.take()
                    if taken is None:
                        writer.busy = False
                        return
                request, context = taken
                try:
                    if request.upto_uuid in session.history.by_uuid:
                        with session.traced("extraction", request):
                            self._extract(session, request, context)
                    else:  # the history was cut back meanwhile
                        request.status = "dropped"
                finally:
                    if request.status == "running":  # _extract raised before reporting
                        request.settle(session, ok=False, error="interrupted")
                    writer.desk.done(request)
        except BaseException:
            with writer.lock:
                writer.busy = False
            raise

    def _extract(self, session: Session, request: ExtractionRequest, context: ForkContext) -> None:
        backend, client = self._backend(session)
        memory = self.memory_file(session)
        path = str(memory.path)
        self._emit(
            session, ExtractionStarted, backend=backend, path=path, upto_uuid=request.upto_uuid
        )
        started = time.monotonic()
        workspace: Workspace | None = None
        try:
            memory.ensure()
            workspace = Workspace(memory.path, memory.read(), max_chars=memory.max_chars)
            result = ForkResult()
            if backend == "offline":
                facts = self._facts(session).feed(session.history.entries[: request.upto_index + 1])
                workspace.rewrite(offline_notes(self.template, facts))
            else:
                result = self._fork(client, context, workspace)
            self._save(memory, workspace)
        except Exception as exc:  # any failure: logged, an event, the state not advanced
            error = f"{type(exc).__name__}: {exc}"
            log.warning("session %s: notes not written (%s)", session.id, error)
            self._emit(session, ExtractionFailed, backend=backend, path=path, error=error)
            request.settle(session, ok=False, error=error)
            return
        finally:
            self._report_refusals(session, workspace)
        usage = result.usage
        self._emit(
            session,
            ExtractionFinished,
            backend=backend,
            path=path,
            upto_uuid=request.upto_uuid,
            turns=result.turns,
            seconds=round(time.monotonic() - started, 3),
            **usage,
        )
        log.info("session %s: notes written to %s (%s)", session.id, path, backend)
        session.announce_notes(NotesRecord(path, request.upto_uuid))
        request.settle(session, ok=True)

    def _fork(self, client: Any, context: ForkContext, workspace: Workspace) -> ForkResult:
        mode = self._mode(context)
        client = client.with_options(
            timeout=self.settings.timeout_seconds, max_retries=self.settings.max_retries
        )
        return run_fork(
            client,
            context,
            workspace,
            self._prompt(workspace, mode, context),
            mode=mode,
            max_turns=self.settings.max_turns,
            max_tokens=self.settings.max_output_tokens,
        )

    @staticmethod
    def _save(memory: MemoryFile, workspace: Workspace) -> None:
        """Compare-and-swap; on a conflict, re-read and re-apply the edits once."""
        try:
            memory.replace(workspace.original, workspace.text)
        except NotesConflict:
            current = memory.read()
            try:
                merged = workspace.merged_onto(current)
            except EditError as exc:
                raise NotesConflict(f"{memory.path} changed meanwhile and {exc}") from None
            workspace.check_size(len(merged))
            memory.replace(current, merged)

    # choices ---------------------------------------------------------------------------

    def _backend(self, session: Session) -> tuple[str, Any]:
        writer = self.writer(session)
        if writer.backend is None:
            writer.backend = self._choose_backend(session)
        return writer.backend

    def _choose_backend(self, session: Session) -> tuple[str, Any]:
        wanted = self.settings.backend
        client = session.services.get("anthropic")
        has_key = bool(
            os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
        )
        if wanted == "offline" or (wanted == "auto" and client is None and not has_key):
            log.info("session %s: notes backend %s -> offline", session.id, wanted)
            return "offline", None
        if client is None:
            import anthropic

            client = anthropic.Anthropic()
        log.info("session %s: notes backend %s -> anthropic", session.id, wanted)
        return "anthropic", client

    def _facts(self, session: Session) -> Facts:
        """The offline writer's facts, kept per session so each entry is read once."""
        writer = self.writer(session)
        if writer.facts is None:
            writer.facts = Facts(session.history.tool_name)
        return writer.facts

    def _mode(self, context: ForkContext) -> str:
        if self.settings.edit_mode != "auto":
            return self.settings.edit_mode
        return "host-tool" if edit_tool_of(context.tools) else "rewrite"

    def _path(self, session: Session) -> Path:
        configured = self.settings.memory_path
        if configured is None:
            return self._folder(session) / "session-memory.md"
        path = Path(configured.replace("{session_id}", session.id)).expanduser()
        return path if path.is_absolute() else self._folder(session) / path

    def _folder(self, session: Session) -> Path:
        """The session folder; an in-memory session gets a private temporary one."""
        if session.folder is not None:
            return session.folder
        writer = self.writer(session)
        if writer.folder is None:
            writer.folder = Path(tempfile.mkdtemp(prefix=f"stenograph-{session.id}-"))
            log.info("session %s is in memory: notes go to %s", session.id, writer.folder)
        return writer.folder

    # prompt ----------------------------------------------------------------------------

    def _prompt(self, workspace: Workspace, mode: str, context: ForkContext) -> str:
        values = {
            "currentNotes": workspace.original,
            "notesPath": str(workspace.path),
            "editInstructions": _edit_instructions(mode, edit_tool_of(context.tools)),
            "sectionBudget": f"{self.settings.section_budget_tokens:,}",
            "totalBudget": f"{self.settings.total_budget_tokens:,}",
            "budgetNote": self._budget_note(workspace.original),
        }
        return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), self.prompt)

    def _budget_note(self, notes: str) -> str:
        parts = sections(notes)
        total = sum(s.tokens for s in parts)
        over = [s for s in parts if s.tokens > self.settings.section_budget_tokens]
        if total <= self.settings.total_budget_tokens and not over:
            return ""
        largest = sorted(parts, key=lambda s: s.tokens, reverse=True)[:3]
        names = ", ".join(f"{s.heading[2:]} (~{s.tokens:,} tokens)" for s in largest)
        return (
            f"- The notes are over budget: ~{total:,} tokens in all; the largest sections are"
            f" {names}. Condense them now, keeping what is still needed."
        )

    # events ----------------------------------------------------------------------------

    def _emit(self, session: Session, event_type: type[Event], **fields: Any) -> None:
        session.record(
            event_type(time=session.clock(), handler=self.name, slot=self.slot, **fields)
        )

    def _report_refusals(self, session: Session, workspace: Workspace | None) -> None:
        for detail in workspace.refused if workspace else ():
            tool = detail.split(":", 1)[0]
            log.warning("session %s: fork tool call refused: %s", session.id, detail)
            self._emit(session, ToolCallRefused, tool=tool, detail=detail)

    def _context(self, session: Session) -> ForkContext:
        last = session.last_request or {}
        return ForkContext(
            model=self.settings.model or str(last.get("model") or "claude-sonnet-4-6"),
            system=last.get("system"),
            tools=last.get("tools"),
            messages=session.history.messages(),
            extra={k: v for k, v in last.items() if k not in REQUEST_KEYS},
        )


def _edit_instructions(mode: str, host_tool: str | None) -> str:
    if mode == "rewrite":
        return (
            "No file-edit tool is available for the notes: reply with the complete new"
            " content of {{notesPath}} in one ```markdown fenced block, and nothing else."
        ).replace("{{notesPath}}", "the notes file")
    tool = OWN_TOOL_NAME if mode == "own-tool" else host_tool or "file-edit"
    argument = "file_path" if tool == CLAUDE_CODE_EDIT else "path"
    if mode == "own-tool":
        how = f"the {tool} tool"
    else:
        how = f"the {tool} tool ({argument} = the notes path above; exact-match replacements)"
    return (
        f"Change the notes only with {how}. No other tool and no other file may be used."
        " Make all your edits now, then stop."
    )


def _read(path: str | None) -> str | None:
    return read_small_text(Path(path).expanduser()) if path else None
