"""Replaying a recorded conversation through a preset, on a simulated clock."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from .economics.ledger import Call, Fork, Ledger
from .economics.prices import load_prices
from .engine.clock import ManualClock, parse_timestamp
from .engine.engine import Engine
from .engine.events import Event, HandlerFailed, RequestViolation
from .engine.session import Session
from .engine.tokens import content_tokens
from .handlers.forked_extraction.events import ExtractionFailed, ExtractionFinished
from .handlers.inactivity_memorize import CacheTtlDetected, EntriesMemorized
from .handlers.memory_compact import Compacted
from .handlers.update_threshold import ThresholdDecision
from .integrations.transcripts import Transcript, read_transcripts
from .stores import Store, open_store

REPLAY_SYSTEM = "You are a coding agent. (System prompt not recorded in the transcript.)"
FORK_PROMPT = (resources.files("stenograph.handlers.forked_extraction") / "prompt.md").read_text(
    "utf-8"
)
Progress = Callable[[int, int], None]


@dataclass
class ReplayReport:
    """What a replay did; ``to_json()`` gives the documented JSON keys."""

    transcript: str
    format: str
    preset: str
    session_folder: str | None
    calls: int = 0
    tokens_full: int = 0
    tokens_sent: int = 0
    memorized_entries: int = 0
    memorize_events: list[dict[str, Any]] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    extractions: list[dict[str, Any]] = field(default_factory=list)
    memory_file: str | None = None
    notes_backend: str | None = None
    handler_errors: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    request_violations: list[dict[str, Any]] = field(default_factory=list)
    skipped_lines: int = 0
    warnings: list[str] = field(default_factory=list)
    not_replayed: list[dict[str, Any]] = field(default_factory=list)
    conversations: list[dict[str, Any]] = field(default_factory=list)
    cache_ttl: dict[str, Any] | None = None
    economics: dict[str, Any] | None = None
    ledger: Ledger = field(default_factory=Ledger, repr=False)

    def to_json(self, decisions: bool = False) -> dict[str, Any]:
        """A JSON-safe dict (the per-call ``decisions`` only when asked for)."""
        # field by field: ``asdict`` would deep-copy the ledger too, every call's two
        # requests (quadratic in the calls), only to drop it
        data = {
            f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "ledger"
        }
        if not decisions:
            del data["decisions"]
        data["lost"], data["exit_status"] = self.lost, self.exit_status
        return data

    @property
    def lost(self) -> int:
        """Records the model saw that the replay could not replay (skipped lines included)."""
        return sum(o["count"] for o in self.not_replayed if o["lost"])

    @property
    def exit_status(self) -> int:
        """0 when everything was replayed or deliberately left out; 1 when something was
        lost, nothing was replayed, or a rendered request breaks an API rule."""
        return int(bool(self.lost or not self.calls or self.request_violations))


def request_line(request: dict[str, Any]) -> str:
    """A rendered request as one line of JSON (``replay --requests``, ``show``)."""
    return json.dumps(request, ensure_ascii=False)


def session_id_for(path: Path) -> str:
    """A session id derived from the transcript's file name (any name gives a valid id:
    other characters become '-', '..' becomes '.', a long name is cut and given a hash)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", path.stem)
    stem = re.sub(r"\.{2,}", ".", stem).strip(".-") or "transcript"
    if len(stem) > 180:
        digest = hashlib.sha256(path.stem.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        stem = f"{stem[:180].rstrip('.-')}-{digest}"
    return "replay-" + stem


def replay(
    path: str | Path,
    preset: str | Path = "default",
    state_dir: str | Path | None = ".stenograph",
    overrides: dict[Any, dict[str, Any]] | None = None,
    progress: Progress | None = None,
    prices: str | Path | None = None,
    record: int | None = None,
    store: str | Store | None = None,
    on_event: Callable[[Event], None] | None = None,
) -> ReplayReport:
    """Replay ``path``: for each assistant message, append the inputs before it, run
    pre-call at the moment the request was sent (the newest input's time), then
    post-sampling at the response's end with the message as the response. A file holding
    several conversations replays each in its own session (``record``: only that one,
    from 1). The session folder ``<state_dir>/replay-<name>`` is started afresh; the calls
    are priced with the price table (built in, updated by the file ``prices``);
    ``on_event`` is given every event as it is recorded. ``store`` (a store URL) keeps the
    sessions there instead of under ``state_dir``."""
    table = load_prices(prices)
    transcripts = read_transcripts(path, record)
    engine = Engine.from_preset(preset, overrides)
    first = transcripts[0]
    report = ReplayReport(
        transcript=str(path),
        format=first.format,
        preset=engine.preset.name,
        session_folder=None,
        skipped_lines=first.skipped_lines,
        warnings=list(first.warnings),
        not_replayed=[o.to_json() for o in first.omitted],
    )
    kept = open_store(store) if store is not None else state_dir
    for transcript in transcripts:
        _replay_one(engine, transcript, kept, report, progress, on_event)
    if not report.calls:
        report.warnings.append(f"{path}: no model call to replay")
    report.economics = report.ledger.economics(table).to_json()
    return report


def _replay_one(
    engine: Engine,
    transcript: Transcript,
    kept: str | Path | Store | None,
    report: ReplayReport,
    progress: Progress | None,
    on_event: Callable[[Event], None] | None,
) -> None:
    """Replay one conversation in a fresh session of its own (in the folder or store
    ``kept``)."""
    session_id = session_id_for(Path(transcript.path))
    if transcript.record is not None:
        session_id += f"-{transcript.record}"
    clock = ManualClock(_first_time(transcript))
    if isinstance(kept, Store):
        kept.delete(session_id)
        session = engine.open_session(
            session_id, store=kept, clock=clock, on_event=on_event, max_events=None
        )
    else:
        if kept is not None:
            shutil.rmtree(Path(kept) / session_id, ignore_errors=True)
        session = engine.open_session(
            session_id, state_dir=kept, clock=clock, on_event=on_event, max_events=None
        )
    report.ledger.new_conversation()
    if report.session_folder is None and session.folder is not None:
        report.session_folder = str(session.folder)
    elif report.session_folder is None and session.store is not None:
        report.session_folder = f"{session.store.url} session {session_id}"
    calls = report.calls
    try:
        _run(session, clock, transcript, report, progress)
    finally:
        session.close()
    _summarise(session, report)
    if transcript.record is not None:
        report.conversations.append(
            {"record": transcript.record, "calls": report.calls - calls, "session": session_id}
        )


def _first_time(transcript: Transcript) -> float:
    for message in transcript.messages:
        moment = parse_timestamp(message.get("timestamp"))
        if moment is not None:
            return moment
    return 0.0


def _run(
    session: Session,
    clock: ManualClock,
    transcript: Transcript,
    report: ReplayReport,
    progress: Progress | None,
) -> None:
    total = len(transcript.messages)
    for done, message in enumerate(transcript.messages, 1):
        if message.get("uuid") in session.history.by_uuid:
            report.warnings.append(f"message {done}: duplicate uuid {message['uuid']}, replaced")
            message = {k: v for k, v in message.items() if k != "uuid"}
        if message.get("role") == "assistant":
            _call(session, clock, message, report)
        else:
            _advance(clock, message)
            session.append(message)
        if progress:
            progress(done, total)


def _advance(clock: ManualClock, message: dict[str, Any]) -> None:
    moment = parse_timestamp(message.get("timestamp"))
    if moment is not None and moment > clock.now:
        clock.set(moment)


def _call(
    session: Session, clock: ManualClock, message: dict[str, Any], report: ReplayReport
) -> None:
    """One model call: pre-call now (the request's moment), post-sampling at the response's
    end (its timestamp: the last chunk's)."""
    index = report.calls
    seen = len(session.events)
    model = str(message.get("model") or (message.get("meta") or {}).get("model") or "replay")
    full: dict[str, Any] = {"model": model, "system": REPLAY_SYSTEM}
    full["messages"] = report.ledger.full_messages(session.history.entries)
    now = session.clock()
    sent = session.pre_call(model=model, system=REPLAY_SYSTEM)
    session.wait_for_background()  # memorize figures counted in the background
    call = Call(now, model, full, dict(sent))
    report.ledger.calls.append(call)
    call.tokens_full = session.history.token_totals()[0]
    call.tokens_sent = session.history.request_tokens()
    report.tokens_full += call.tokens_full
    report.tokens_sent += call.tokens_sent
    for event in session.events[seen:]:
        if isinstance(event, CacheTtlDetected):
            report.cache_ttl = {
                "ttl": event.ttl,
                "source": event.source,
                "before_assistant_index": index,
            }
        if isinstance(event, Compacted):
            keys = ("tokens_before", "tokens_after", "kept_messages")
            report.compactions.append(
                {"before_assistant_index": index, **{k: getattr(event, k) for k in keys}}
            )
        if isinstance(event, RequestViolation):
            report.request_violations.append(
                {"before_assistant_index": index, "problems": list(event.problems)}
            )
        if isinstance(event, EntriesMemorized):
            report.memorize_events.append(
                {
                    "before_assistant_index": index,
                    "gap_seconds": round(event.gap_seconds, 3),
                    "entries": len(event.uuids),
                    "tokens_saved": event.tokens_saved,
                }
            )
    seen = len(session.events)
    _advance(clock, message)
    call.usage = session.post_sampling(message).usage
    session.wait_for_background()
    for event in session.events[seen:]:
        if isinstance(event, ThresholdDecision):
            decision = {"after_assistant_index": index, **_decision(event)}
            report.decisions.append(decision)
            if event.extract:
                wanted = ("after_assistant_index", "tokens", "tool_calls", "reason")
                taken = session.engine.implements("extraction_requested")
                status = "written" if taken else "no extractor"
                report.extractions.append({**{k: decision[k] for k in wanted}, "status": status})
        elif isinstance(event, ExtractionFinished):
            report.memory_file, report.notes_backend = event.path, event.backend
            call.forks.append(_fork(call, message, event))
        elif isinstance(event, ExtractionFailed) and report.extractions:
            report.extractions[-1]["status"] = f"failed: {event.error}"
    report.calls += 1


def _fork(call: Call, response: dict[str, Any], event: ExtractionFinished) -> Fork:
    """The notes fork's call as the anthropic backend would make it: the main request, the
    response, then the prompt with the notes; its output as reported, or (offline) the
    notes as written, what the rewrite mode would output."""
    try:
        notes = Path(event.path).read_text("utf-8")
    except OSError:
        notes = ""
    messages = [
        *call.sent["messages"],
        {"role": "assistant", "content": response["content"]},
        {"role": "user", "content": FORK_PROMPT + notes},
    ]
    request = {**call.sent, "messages": messages}
    output = event.output_tokens or content_tokens(notes)
    return Fork(event.time, call.model, request, output)


def _decision(event: ThresholdDecision) -> dict[str, Any]:
    keys = ("tokens", "growth", "tool_calls", "quiet", "initialized", "extract", "reason")
    return {k: getattr(event, k) for k in keys}


def _summarise(session: Session, report: ReplayReport) -> None:
    report.memorized_entries += sum(1 for e in session.history if e.memorized)
    for event in session.events:
        if isinstance(event, HandlerFailed):
            report.handler_errors.append(
                {
                    "handler": event.handler,
                    "slot": event.slot,
                    "phase": event.phase,
                    "error": event.error,
                }
            )
