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
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ...engine.entries import Entry
from ...engine.errors import StenographError
from ...engine.events import Event
from ...engine.extraction import ExtractionRequest, NotesRecord
from ...engine.files import home_path, read_small_text
from ...engine.handler import Handler
from ...engine.hookspecs import hookimpl
from ...engine.notes import MAX_NOTES_CHARS, NotesUnreadable
from ...engine.session import Session
from ...engine.settings import HandlerSettings
from ...engine.state import StateKey
from ...stores.notes_file import NotesFile
from .desk import ExtractionDesk
from .events import ExtractionFailed, ExtractionFinished, ExtractionStarted, ToolCallRefused
from .fork import ForkContext
from .job import Job, Outcome, job_settings, run_job
from .offline import Facts, offline_notes

log = logging.getLogger("stenograph.handlers.forked_extraction")
REQUEST_KEYS = ("model", "system", "tools", "messages", "stream", "max_tokens")


def _text_file(value: str | None) -> str | None:
    if value is None:
        return None
    path = home_path(value)
    try:
        read_small_text(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    return str(path)


def _home_known(value: str | None) -> str | None:
    if value is not None:
        home_path(value)
    return value


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
    client_factory: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="'module:function' returning an anthropic.Anthropic, called where the"
        " fork runs when the engine has an executor (default there: anthropic.Anthropic(),"
        " from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL).",
    )

    _check_files = field_validator("template_path", "prompt_path")(_text_file)
    _check_home = field_validator("memory_path")(_home_known)


def _package_text(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@dataclass
class Writer:
    """The notes writer's live objects in one session (never persisted)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    desk: ExtractionDesk = field(default_factory=ExtractionDesk)
    busy: bool = False
    backend: tuple[str, Any] | None = None
    folder: Path | None = None
    facts: Facts | None = None  # the offline writer's, fed each entry once
    fed: str = ""  # the uuid of the last entry fed to ``facts``


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
        writer = session.stash.get(self.writer_key, None)
        if writer is None:  # made once: a Writer's locks are not free
            writer = session.stash.setdefault(self.writer_key, Writer())
        return writer

    @hookimpl
    def extraction_requested(self, session: Session, request: ExtractionRequest) -> bool:
        """Take the request with the journal position it covers and, for the anthropic
        backend, a snapshot of the last request (the offline writer reads the entries);
        start the worker unless one runs (a request waiting for it is coalesced into this
        one, and nothing of it is kept)."""
        writer = self.writer(session)
        offline = self._backend(session)[0] == "offline"  # its notes come from the entries
        context = None if offline else self._context(session)
        with writer.lock:
            writer.desk.file(request, (context, session.position))
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
        try:
            label = self._label(session)[0]
            return session.notes_at(label, max_chars=self.settings.max_notes_chars).read()[0]
        except (NotesUnreadable, StenographError) as exc:
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

    def memory_file(self, session: Session) -> NotesFile:
        """The notes file of ``session``."""
        return NotesFile(self._path(session), self.template, self.settings.max_notes_chars)

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
                request, (context, position) = taken
                try:
                    if request.upto_uuid in session.history.by_uuid:
                        with session.traced("extraction", request):
                            self._extract(session, request, context, position)
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

    def _extract(
        self,
        session: Session,
        request: ExtractionRequest,
        context: ForkContext | None,
        position: int,
    ) -> None:
        job = self._job(session, request, context, position)
        self._emit(
            session, ExtractionStarted, backend=job.backend, path=job.label, upto_uuid=job.upto_uuid
        )
        try:
            outcomes = self._run(session, job)
        except Exception as exc:  # the executor failed: reported like a failed fork
            outcomes = [job.failed(f"{type(exc).__name__}: {exc}")]
        for outcome in outcomes:
            self._apply(session, outcome)
        mine = [o for o in outcomes if o.position >= job.position]
        if any(o.ok for o in mine):
            request.settle(session, ok=True)
        elif mine:
            request.settle(session, ok=False, error=mine[-1].error)
        else:  # another worker holds the extraction lease: it runs the job filed for it
            log.info("session %s: notes job handed to the extraction lease holder", session.id)
            request.settle(session, ok=False, error="handed to the lease holder")

    def _run(self, session: Session, job: Job) -> list[Outcome]:
        """The job on the engine's executor, or on this background thread by default."""
        executor = session.engine.executor
        if executor is None:
            return run_job(job, self._backend(session)[1], session.storage)
        result: list[Outcome] = executor.submit(run_job, job).result()
        return result

    def _apply(self, session: Session, outcome: Outcome) -> None:
        """What a job did, in this session: events, the notes announced (a job with a
        store journaled them; notes covering entries this session has not seen yet are
        announced when it catches up)."""
        self._report_refusals(session, outcome.refused)
        path, backend = outcome.label, outcome.backend
        if not outcome.ok:
            log.warning("session %s: notes not written (%s)", session.id, outcome.error)
            self._emit(session, ExtractionFailed, backend=backend, path=path, error=outcome.error)
            return
        self._emit(
            session,
            ExtractionFinished,
            backend=backend,
            path=path,
            upto_uuid=outcome.upto_uuid,
            turns=outcome.turns,
            seconds=outcome.seconds,
            **outcome.usage,
        )
        log.info("session %s: notes written to %s (%s)", session.id, path, backend)
        if outcome.upto_uuid in session.history.by_uuid:
            record = NotesRecord(path, outcome.upto_uuid)
            session.announce_notes(record, journaled=session.storage is not None)

    def _job(
        self,
        session: Session,
        request: ExtractionRequest,
        context: ForkContext | None,
        position: int,
    ) -> Job:
        backend = self._backend(session)[0]
        label, shown = self._label(session)
        offline = backend == "offline"
        return Job(
            session_id=session.id,
            store_url=session.store.url if session.store is not None else None,
            label=label,
            shown=shown,
            upto_uuid=request.upto_uuid,
            upto_index=request.upto_index,
            position=position,
            backend=backend,
            template=self.template,
            prompt=self.prompt,
            settings=job_settings(self.settings),
            lease_seconds=session.lease_seconds,
            context=None if offline else context,
            notes=self._offline_notes(session, request.upto_index) if offline else None,
        )

    def _offline_notes(self, session: Session, upto_index: int) -> str:
        """The offline writer's notes up to entry ``upto_index``, from facts gathered once
        per entry (gathered anew when the history was cut back since)."""
        writer = self.writer(session)
        entries = session.history.entries[: upto_index + 1]
        facts = writer.facts
        if facts is None or facts.upto > len(entries) or _moved(entries, facts.upto, writer.fed):
            facts = writer.facts = Facts()
        facts.feed(entries)
        writer.fed = entries[-1].uuid if entries else ""
        return offline_notes(self.template, facts)

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

    def _label(self, session: Session) -> tuple[str, str]:
        """The notes' name in the store and the path the fork is shown: the file itself
        with a folder store or in memory; with a server store the notes are a row or a
        key, shown as ``/<session_id>/<name>``."""
        if session.folder is not None or session.storage is None:
            path = str(self._path(session))
            return path, path
        label = (self.settings.memory_path or "session-memory.md").replace(
            "{session_id}", session.id
        )
        return label, label if os.path.isabs(label) else f"/{session.id}/{label}"

    def _path(self, session: Session) -> Path:
        configured = self.settings.memory_path
        if configured is None:
            return self._folder(session) / "session-memory.md"
        path = home_path(configured.replace("{session_id}", session.id))
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

    # events ----------------------------------------------------------------------------

    def _emit(self, session: Session, event_type: type[Event], **fields: Any) -> None:
        session.record(
            event_type(time=session.clock(), handler=self.name, slot=self.slot, **fields)
        )

    def _report_refusals(self, session: Session, refused: tuple[str, ...]) -> None:
        for detail in refused:
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


def _moved(entries: list[Entry], upto: int, uuid: str) -> bool:
    """Whether the entry the facts were last fed is no longer the ``upto``-th."""
    return upto > 0 and entries[upto - 1].uuid != uuid


def _read(path: str | None) -> str | None:
    return read_small_text(home_path(path)) if path else None
