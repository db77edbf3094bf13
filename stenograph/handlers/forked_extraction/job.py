"""The notes job: a plain value (the fork's snapshot, where the notes are kept, the
settings it needs) run by :func:`run_job`, a module-level function, on any executor. With
a store, the job takes the session's extraction lease itself and commits the notes and
their journal record under it, so the host may die meanwhile without losing them."""

from __future__ import annotations

import dataclasses
import importlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...engine.notes import NotesConflict, sections
from ...stores.base import Lease, Notes, SessionStorage, run_pending
from .fork import ForkContext, ForkResult, run_fork
from .gate import CLAUDE_CODE_EDIT, OWN_TOOL_NAME, EditError, Workspace, edit_tool_of
from .offline import facts_of, offline_notes

PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
#: the handler settings a job carries (the rest only matter on the host)
JOB_SETTINGS = (
    "edit_mode",
    "max_turns",
    "max_output_tokens",
    "section_budget_tokens",
    "total_budget_tokens",
    "max_notes_chars",
    "timeout_seconds",
    "max_retries",
    "client_factory",
)


@dataclass(frozen=True)
class Job:
    """One notes extraction, picklable and JSON-able (it is filed in the store while
    another worker holds the extraction lease). ``label`` names the notes in the store
    (the file path for a folder store or an in-memory session); ``shown`` is the path the
    fork edits; ``entries`` (for the offline backend: see :func:`.offline.snapshot`) or
    ``context`` (for the anthropic backend) is the snapshot, made for the job and never
    changed: it shares the history's contents (read-only), so it is not copied."""

    session_id: str
    store_url: str | None
    label: str
    shown: str
    upto_uuid: str
    upto_index: int
    position: int
    backend: str
    template: str
    prompt: str
    settings: dict[str, Any]
    lease_seconds: float
    context: ForkContext | None = None
    entries: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The job as JSON-able data, sharing the snapshot (made for the job, never
        changed): no copy of a long history per extraction."""
        data = _fields(self)
        data["context"] = _fields(self.context) if self.context is not None else None
        return data

    def failed(self, error: str) -> Outcome:
        """The outcome of this job when it could not run."""
        return Outcome(
            self.upto_uuid, self.upto_index, self.position, self.backend, self.label, False, error
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        """The job :meth:`to_dict` gave."""
        context = data.get("context")
        fields = {**data, "context": ForkContext(**context) if context else None}
        return cls(**fields)


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields by name, the values themselves (``asdict`` copies them)."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


@dataclass(frozen=True)
class Outcome:
    """What one job did, for the host to apply (events, the notes record, state)."""

    upto_uuid: str
    upto_index: int
    position: int
    backend: str
    label: str
    ok: bool
    error: str | None = None
    turns: int = 0
    seconds: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    refused: tuple[str, ...] = ()


def run_job(job: Job, client: Any = None, storage: SessionStorage | None = None) -> list[Outcome]:
    """Run ``job`` (and, holding the extraction lease, the jobs other workers filed
    meanwhile); what each did. ``client`` (an ``anthropic.Anthropic``) is used when given,
    else one is built in this process (``clientFactory``, else from ``ANTHROPIC_API_KEY`` /
    ``ANTHROPIC_BASE_URL``). ``storage`` is the session's, when the job runs in the
    host's process; elsewhere the store is opened by its URL."""
    if job.store_url is None:
        return [execute(job, None, None, client)]
    if storage is not None:
        return _run_stored(job, storage, client)
    from ...stores import open_store

    store = open_store(job.store_url)
    try:
        return _run_stored(job, store.session(job.session_id), client)
    finally:
        store.close()


def _run_stored(job: Job, storage: SessionStorage, client: Any) -> list[Outcome]:
    def run(filed: dict[str, Any], lease: Lease) -> Outcome:
        return execute(Job.from_dict(filed), storage, lease, client)

    return run_pending(storage, job.to_dict(), job.lease_seconds, run)


def execute(
    job: Job, storage: SessionStorage | None, lease: Lease | None, client: Any = None
) -> Outcome:
    """Write the notes for one job; failures become an unsuccessful outcome."""
    started = time.monotonic()
    notes = _notes(job, storage)
    workspace: Workspace | None = None
    result = ForkResult()
    try:
        text, version = notes.read()
        max_chars = int(job.settings["max_notes_chars"])
        workspace = Workspace(Path(job.shown), text or job.template, max_chars=max_chars)
        if job.backend == "offline":
            workspace.rewrite(offline_notes(job.template, facts_of(job.entries or [])))
        else:
            result = _fork(job, client or make_client(job.settings), workspace)
        _save(notes, version, workspace, lease)
        if storage is not None:
            record = {"op": "notes", "path": job.label, "upto_uuid": job.upto_uuid}
            storage.append([record], lease)
    except Exception as exc:  # any failure: reported to the host, the state not advanced
        return dataclasses.replace(
            job.failed(f"{type(exc).__name__}: {exc}"),
            seconds=round(time.monotonic() - started, 3),
            refused=tuple(workspace.refused) if workspace else (),
        )
    return Outcome(
        job.upto_uuid,
        job.upto_index,
        job.position,
        job.backend,
        job.label,
        ok=True,
        turns=result.turns,
        seconds=round(time.monotonic() - started, 3),
        usage=dict(result.usage),
        refused=tuple(workspace.refused),
    )


def make_client(settings: dict[str, Any]) -> Any:
    """An Anthropic client built in this process: ``clientFactory`` (``module:function``)
    when set, else ``anthropic.Anthropic()`` (``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_BASE_URL``)."""
    factory = settings.get("client_factory")
    if factory:
        module, _, name = str(factory).partition(":")
        return getattr(importlib.import_module(module), name)()
    import anthropic

    return anthropic.Anthropic()


def _notes(job: Job, storage: SessionStorage | None) -> Notes:
    max_chars = int(job.settings["max_notes_chars"])
    if storage is not None:
        return storage.notes(job.label, job.template, max_chars)
    from ...stores.folder import FileNotes

    return FileNotes(Path(job.label), job.template, max_chars=max_chars)


def _save(notes: Notes, version: Any, workspace: Workspace, lease: Lease | None) -> None:
    """Compare-and-swap; on a conflict, re-read and re-apply the edits once."""
    try:
        notes.compare_and_swap(version, workspace.text, lease)
    except NotesConflict:
        current, version = notes.read()
        try:
            merged = workspace.merged_onto(current)
        except EditError as exc:
            raise NotesConflict(f"{notes.label} changed meanwhile and {exc}") from None
        workspace.check_size(len(merged))
        notes.compare_and_swap(version, merged, lease)


# the fork ------------------------------------------------------------------------------


def _fork(job: Job, client: Any, workspace: Workspace) -> ForkResult:
    context = job.context
    if context is None:
        raise ValueError(f"session {job.session_id}: the job has no fork context")
    s = job.settings
    mode = _mode(s["edit_mode"], context)
    client = client.with_options(timeout=s["timeout_seconds"], max_retries=s["max_retries"])
    return run_fork(
        client,
        context,
        workspace,
        render_prompt(job.prompt, s, workspace, mode, context),
        mode=mode,
        max_turns=s["max_turns"],
        max_tokens=s["max_output_tokens"],
    )


def _mode(edit_mode: str, context: ForkContext) -> str:
    if edit_mode != "auto":
        return edit_mode
    return "host-tool" if edit_tool_of(context.tools) else "rewrite"


def job_settings(settings: Any) -> dict[str, Any]:
    """The part of forked-extraction's settings a job carries."""
    return dict(settings.model_dump(include=set(JOB_SETTINGS)))


def render_prompt(
    prompt: str, s: dict[str, Any], workspace: Workspace, mode: str, context: ForkContext
) -> str:
    """The fork's instruction: ``prompt`` with its placeholders filled."""
    values = {
        "currentNotes": workspace.original,
        "notesPath": str(workspace.path),
        "editInstructions": _edit_instructions(mode, edit_tool_of(context.tools)),
        "sectionBudget": f"{s['section_budget_tokens']:,}",
        "totalBudget": f"{s['total_budget_tokens']:,}",
        "budgetNote": _budget_note(workspace.original, s),
    }
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), prompt)


def _budget_note(notes: str, settings: dict[str, Any]) -> str:
    parts = sections(notes)
    total = sum(s.tokens for s in parts)
    over = [s for s in parts if s.tokens > settings["section_budget_tokens"]]
    if total <= settings["total_budget_tokens"] and not over:
        return ""
    largest = sorted(parts, key=lambda s: s.tokens, reverse=True)[:3]
    names = ", ".join(f"{s.heading[2:]} (~{s.tokens:,} tokens)" for s in largest)
    return (
        f"- The notes are over budget: ~{total:,} tokens in all; the largest sections are"
        f" {names}. Condense them now, keeping what is still needed."
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
