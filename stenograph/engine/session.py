"""A conversation managed by an Engine: the history, the phases, persisted state."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .background import Worker
from .clock import Clock, system_clock
from .collector import paused_gc
from .context import PostSamplingCall, PreCallCall
from .entries import Entry, EntryError, entry_from_record, make_entry, response_entry
from .errors import RequestError
from .events import Event, RequestViolation, StateReset
from .extraction import ExtractionDesk
from .history import History
from .store import JOURNAL_BYTES, SessionStore, check_session_id, encode_record

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("stenograph.engine.session")
CLOSE_WAIT_SECONDS = 15.0
COUNTS = "counts"  # the background worker counting tokens as entries arrive


class Session:
    """Open one with :meth:`Engine.open_session`."""

    def __init__(
        self,
        engine: Engine,
        session_id: str,
        state_dir: str | Path | None = ".stenograph",
        clock: Clock | None = None,
        services: dict[str, Any] | None = None,
    ) -> None:
        self.engine = engine
        self.services: dict[str, Any] = {**engine.services, **(services or {})}
        self.id = check_session_id(session_id)
        self.clock: Clock = clock or system_clock
        self.history = History()
        self.events: list[Event] = []
        self.last_request: dict[str, Any] | None = None
        self.folder = Path(state_dir) / self.id if state_dir is not None else None
        self._store = SessionStore(self.folder) if self.folder is not None else None
        self._lock = threading.RLock()  # the phases; background work never takes it
        self._state_lock = threading.Lock()  # state changes made by background work
        self._last_response: Entry | None = None
        self._background: dict[str, Worker] = {}
        self._state: dict[str, Any] = {"handlers": {}}
        self._runtime: dict[str, dict[str, Any]] = {}
        self._closed = False
        self.extractions = ExtractionDesk(engine.has_extractor, state_lock=self._state_lock)
        self._load()
        self.engine.dispatch("session_opened", self)

    # host API --------------------------------------------------------------------------

    def append(self, message: dict[str, Any]) -> Entry:
        """Append a message (user input, tool results, or a whole assistant turn)."""
        with self._lock:
            entry = make_entry(message, self.clock())
            self._add(entry)
            return entry

    def pre_call(
        self, *, model: str, system: Any = None, tools: list[Any] | None = None, **extra: Any
    ) -> dict[str, Any]:
        """Run the pre-call phase; return the request for ``client.messages.create``."""
        with self._lock:
            call = PreCallCall(
                session=self,
                now=self.clock(),
                model=model,
                system=system,
                tools=tools,
                extra=extra,
                previous_response=self._last_response,
                first_unseen=self._state.get("seen", 0),
                end=len(self.history),
            )
            self.engine.dispatch("pre_call", self, call)
            request = self._request(call)
            self.last_request = request
            self._state["seen"] = len(self.history)
            self._save_state_if_changed()
            return request

    def post_sampling(self, response: Any) -> Entry:
        """Append the model's response (an anthropic ``Message`` or a dict), then run the
        post-sampling phase."""
        with self._lock:
            now = self.clock()
            entry = response_entry(response, now)
            self._add(entry)
            call = PostSamplingCall(
                session=self, now=now, response=entry, request=self.last_request
            )
            self.engine.dispatch("post_sampling", self, call)
            self._save_state_if_changed()
            return entry

    async def apre_call(self, **kwargs: Any) -> dict[str, Any]:
        """:meth:`pre_call` for async hosts (see :meth:`arun_phase`)."""
        return await self.arun_phase("pre_call", self.pre_call, **kwargs)

    async def apost_sampling(self, response: Any) -> Entry:
        """:meth:`post_sampling` for async hosts (see :meth:`arun_phase`)."""
        return await self.arun_phase("post_sampling", self.post_sampling, response)

    async def arun_phase(
        self, hook: str, function: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """Run ``function`` (a phase of ``hook``) for an async host: on the event loop when
        it cannot block (an in-memory session, no ``blocking`` handler on ``hook``), else in
        a worker thread, so that a state file's fsync or a handler's wait never stalls the
        loop (a thread hop costs ~0.1 ms)."""
        if self._store is None and hook not in self.engine.blocking_hooks:
            return function(*args, **kwargs)
        return await asyncio.to_thread(function, *args, **kwargs)

    def wait_for_background(self, timeout: float = 15.0) -> bool:
        """Wait up to ``timeout`` seconds for background work; True when none is left."""
        deadline = time.monotonic() + max(0.0, timeout)
        return all(w.wait(deadline - time.monotonic()) for w in list(self._background.values()))

    def close(self, timeout: float = CLOSE_WAIT_SECONDS) -> None:
        """Wait (bounded) for background work, run ``session_closing``, save the state."""
        if self._closed:
            return
        if not self.wait_for_background(timeout):
            log.warning("session %s closed with background work still running", self.id)
        with self._lock:
            self.engine.dispatch("session_closing", self)
            self._closed = True
            if self._store is not None:
                with self._state_lock:
                    self._store.save_state(self._state)
                self._store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # for handlers ----------------------------------------------------------------------

    @property
    def previous_response(self) -> Entry | None:
        """The newest assistant entry."""
        return self._last_response

    def update_state(self, change: Callable[[], None]) -> None:
        """Run ``change`` (which edits handler state) safely from a background thread; the
        state is saved after the next phase or on close."""
        with self._state_lock:
            change()

    def set_window(self, start: Entry, preamble: list[dict[str, Any]]) -> None:
        """From now on, requests send ``preamble`` then the history from ``start`` on (the
        history itself stays whole). Saved with the session state."""
        with self._lock:
            self.history.set_window(start.index, preamble)
            self._state["window"] = {"start": start.uuid, "preamble": list(preamble)}
            self._save_state_if_changed()

    @property
    def notes(self) -> dict[str, Any] | None:
        """The session notes last written: ``{"path", "upto_uuid"}`` (None before any)."""
        return self._state.get("notes")

    def record_notes(self, path: str, upto_uuid: str) -> None:
        """An extractor wrote the notes at ``path``, covering the history up to
        ``upto_uuid`` (safe from a background thread; saved with the session state)."""
        notes = {"path": path, "upto_uuid": upto_uuid}
        self.update_state(lambda: self._state.__setitem__("notes", notes))

    def runtime_state(self, key: str) -> dict[str, Any]:
        """A dict for one handler slot's live objects in this session (never saved)."""
        return self._runtime.setdefault(key, {})

    def handler_state(self, key: str) -> dict[str, Any]:
        """The persisted dict of one handler slot (created empty)."""
        return self._state["handlers"].setdefault(key, {})

    def record(self, event: Event) -> None:
        """Add an event to ``events`` (safe from any thread)."""
        self.events.append(event)
        log.debug("event %s", event)

    def amend_later(self, event: Event, figures: Callable[[], dict[str, Any]]) -> None:
        """Replace ``event`` in ``events`` by a copy with the fields ``figures()`` returns,
        computed on the background worker that counts tokens (after the counts queued
        before it)."""

        def amend() -> None:
            amended = dataclasses.replace(event, **figures())
            for i in range(len(self.events) - 1, -1, -1):
                if self.events[i] is event:
                    self.events[i] = amended
                    log.debug("event amended %s", amended)
                    return

        self.run_in_background(COUNTS, amend)

    def memorize(
        self, entries: Iterable[Entry], *, keep: Iterable[str] = (), reduce_inputs: bool = False
    ) -> list[Entry]:
        """Mark entries memorized; returns those newly marked (already marked are skipped)."""
        memo = {"keep": sorted(set(keep)), "reduce_inputs": bool(reduce_inputs)}
        with self._lock:
            marked = [e for e in entries if not e.memorized]
            if marked:  # persisted first: a failed write changes nothing
                self._journal({"op": "memorize", "uuids": [e.uuid for e in marked], "memo": memo})
            for entry in marked:
                entry.memorized, entry.memo = True, memo
            with paused_gc():
                self.history.refresh(*marked, memorized=True)
            return marked

    def replace_sent_content(self, entry: Entry, content: str | list[dict[str, Any]]) -> None:
        """Send ``content`` for ``entry`` from now on; the history keeps the original."""
        with self._lock:
            sent = copy.deepcopy(content)
            self._journal({"op": "sent", "uuid": entry.uuid, "content": sent})
            entry.sent_content = sent
            self.history.refresh(entry)

    def run_in_background(self, name: str, work: Callable[[], None]) -> None:
        """Run ``work`` on this session's background worker ``name`` (jobs of one name run
        one after the other); ``wait_for_background`` waits for them."""
        worker = self._background.get(name)
        if worker is None:
            worker = self._background.setdefault(name, Worker(f"stenograph-{self.id}-{name}"))
        worker.submit(work)

    # internals -------------------------------------------------------------------------

    def _add(self, entry: Entry) -> None:
        """All or nothing: checked and encoded, persisted, then added."""
        if entry.uuid in self.history.by_uuid:
            raise EntryError(
                f"uuid {entry.uuid!r}: an entry with this uuid is already in the history"
            )
        line = encode_record({"op": "append", "entry": entry.to_record()})
        if self._store is not None:
            self._store.write(line)
        self.history.add(entry)
        if entry.content:
            self.run_in_background(COUNTS, functools.partial(self.history.count, entry))
        if entry.role == "assistant":
            self._last_response = entry

    def _request(self, call: PreCallCall) -> dict[str, Any]:
        request: dict[str, Any] = {"model": call.model}
        if call.system is not None:
            request["system"] = call.system
        if call.tools is not None:
            request["tools"] = call.tools
        request["messages"] = self.history.messages()
        request.update(call.extra)
        problems = self.history.request_problems()
        if problems:
            self.record(RequestViolation(time=call.now, problems=tuple(problems)))
            log.error("session %s: the API would reject the request: %s", self.id, problems)
            if self.engine.strict:
                raise RequestError(problems)
        return request

    def _journal(self, record: dict[str, Any]) -> None:
        line = encode_record(record)
        if self._store is not None:
            self._store.write(line)

    def _save_state_if_changed(self) -> None:
        """Save when something other than the ``seen`` cursor changed (the cursor is saved
        along with other changes and on close: a stale one only shows handlers again)."""
        if self._store is None:
            return
        with self._state_lock:
            if _without_seen(self._state) == _without_seen(self._saved_state):
                return
            self._store.save_state(self._state)
            self._saved_state = copy.deepcopy(self._state)

    def _load(self) -> None:
        self._saved_state: dict[str, Any] = {}
        if self._store is None:
            return
        with paused_gc():
            for record in self._store.read_journal():
                self._apply(record)
        state, problem = self._store.read_state()
        if problem:
            self._reset("state.json", f"unreadable ({problem})")
        behind = state.get(JOURNAL_BYTES)
        if isinstance(behind, int) and behind > self._store.journal_size():
            self._reset(
                "handlers",
                f"the journal is shorter ({self._store.journal_size():,} bytes) than the state"
                f" refers to ({behind:,} bytes): it lost records",
            )
            state = {k: v for k, v in state.items() if k != "handlers"}
        self._load_state(state)
        self._saved_state = copy.deepcopy(self._state)

    def _load_state(self, state: dict[str, Any]) -> None:
        """Take the saved state part by part; a part that is not what it should be is
        reset (an event and a copy of the file say so)."""
        handlers = state.get("handlers", {})
        if not isinstance(handlers, dict):
            self._reset("handlers", f"'handlers' is {type(handlers).__name__}, not an object")
            handlers = {}
        for key, value in handlers.items():
            if isinstance(value, dict):
                self._state["handlers"][key] = value
            else:
                self._reset(
                    f"handlers.{key}", f"the state is {type(value).__name__}, not an object"
                )
        seen = state.get("seen", 0)
        self._state["seen"] = (
            seen if isinstance(seen, int) and 0 <= seen <= len(self.history) else 0
        )
        notes = state.get("notes")
        if notes is not None:
            if _is_notes(notes) and notes["upto_uuid"] in self.history.by_uuid:
                self._state["notes"] = notes
            else:
                self._reset("notes", "the notes record is malformed or covers entries not kept")
        window = state.get("window")
        if window is not None:
            self._load_window(window)

    def _load_window(self, window: Any) -> None:
        entry = self.history.by_uuid.get(window.get("start")) if isinstance(window, dict) else None
        preamble = window.get("preamble") if isinstance(window, dict) else None
        try:
            if entry is None or not isinstance(preamble, list):
                raise ValueError("its start entry is not in the history or it is malformed")
            self.history.set_window(entry.index, list(preamble))
        except ValueError as exc:
            self._reset("window", f"the saved request window is dropped ({exc})")
            return
        self._state["window"] = window

    def _reset(self, part: str, reason: str) -> None:
        """Record that ``part`` of the saved state was reset; keep the file aside once."""
        assert self._store is not None
        if not hasattr(self, "_aside"):
            self._aside = self._store.keep_aside(f"{part}: {reason}")
        path = str(self._store.state_path)
        log.warning("session %s: %s: %s reset: %s", self.id, path, part, reason)
        copy_path = str(self._aside) if self._aside else ""
        self.record(
            StateReset(time=self.clock(), path=path, part=part, reason=reason, copy=copy_path)
        )

    def _apply(self, record: dict[str, Any]) -> None:
        op = record.get("op")
        try:
            if op == "append":
                entry = entry_from_record(record["entry"])
                self.history.add(entry)
                if entry.role == "assistant":
                    self._last_response = entry
            elif op == "memorize":
                marked = [self.history.by_uuid[uid] for uid in record["uuids"]]
                for entry in marked:
                    entry.memorized, entry.memo = True, record.get("memo")
                self.history.refresh(*marked, memorized=True)
            elif op == "sent":
                entry = self.history.by_uuid[record["uuid"]]
                entry.sent_content = record["content"]
                self.history.refresh(entry)
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            log.warning("session %s: skipped a journal record (%s): %.120s", self.id, exc, record)


def _is_notes(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("path"), str)
        and isinstance(value.get("upto_uuid"), str)
    )


def _without_seen(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "seen"}
