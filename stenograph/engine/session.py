"""A conversation managed by an Engine: the history, the phases, persisted state."""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Container, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .background import Worker
from .clock import Clock, system_clock
from .collector import paused_gc
from .context import PostSamplingCall, PreCallCall
from .entries import Entry, EntryError, entry_from_record, make_entry, response_entry
from .errors import RequestError
from .events import (
    Event,
    EventLog,
    HistoryEdited,
    HistoryTruncated,
    RequestViolation,
    StateReset,
)
from .extraction import NotesRecord
from .history import History
from .hooks import SessionHooks
from .notes import MAX_NOTES_CHARS
from .request import Request, sole_messages
from .speedups import C
from .state import Stash
from .store import JOURNAL_BYTES, check_entry, check_json, check_session_id, encode_record
from .sync import HostMessages, Synced, plan
from .telemetry import NO_SPAN
from .tokens import encoding

if TYPE_CHECKING:
    from ..stores.base import Lease, Notes, SessionStorage, Store
    from ..stores.folder import FolderStorage

if TYPE_CHECKING:
    from .engine import Engine
LEASE_SECONDS = 120.0
WAIT_SECONDS = 30.0
CALL_SECONDS = 600.0  # the longest model call whose lease is kept (the SDK's own timeout)

log = logging.getLogger("stenograph.engine.session")
CLOSE_WAIT_SECONDS = 15.0
COUNTS = "counts"  # the background worker counting tokens as entries arrive
COUNT_BATCH = 8  # entries whose counting waits to be handed over together (see ``pre_call``)
MAX_EVENTS = 1_000  # the newest events ``Session.events`` keeps (``on_event`` gets them all)


class Session:
    """Open one with :meth:`Engine.open_session`."""

    def __init__(
        self,
        engine: Engine,
        session_id: str,
        state_dir: str | Path | None = ".stenograph",
        clock: Clock | None = None,
        services: dict[str, Any] | None = None,
        on_event: Callable[[Event], None] | None = None,
        store: str | Path | Store | None = None,
        lease_seconds: float = LEASE_SECONDS,
        wait_seconds: float = WAIT_SECONDS,
        max_events: int | None = MAX_EVENTS,
        call_seconds: float = CALL_SECONDS,
    ) -> None:
        from ..stores import open_store
        from ..stores.base import checked_storage, new_owner
        from ..stores.folder import FolderStorage

        self.engine = engine
        self.on_event = on_event
        self.services: dict[str, Any] = {**engine.services, **(services or {})}
        self.id = check_session_id(session_id)
        self.clock: Clock = clock or system_clock
        self.history = History()
        if max_events is not None and max_events < 1:
            raise ValueError(
                f"max_events must be at least 1 (None keeps every event), got {max_events}"
            )
        self.max_events = max_events
        self.events = EventLog(maxlen=max_events)  # the newest ``max_events``, oldest first
        self._events_lock = threading.Lock()
        self.last_request: dict[str, Any] | None = None
        if store is None and state_dir is not None:
            store = Path(state_dir)
        self.store: Store | None = open_store(store) if store is not None else None
        if (
            self.store is None
            and engine.executor is not None
            and engine.implements("extraction_requested")
        ):
            raise ValueError(
                f"session {self.id}: an in-memory session (state_dir=None, no store=) cannot"
                " run its notes jobs on the engine's executor (executor= of"
                " Engine.from_preset): give the session a store, or build the engine"
                " without executor="
            )
        self._store: SessionStorage | None = (
            checked_storage(self.store.session(self.id), self.store.url) if self.store else None
        )
        self.folder = self._store.folder if isinstance(self._store, FolderStorage) else None
        self.lease_seconds, self.wait_seconds = lease_seconds, wait_seconds
        self.call_seconds = call_seconds
        self._owner = new_owner()
        self._lease: Lease | None = None
        self._lease_at = 0.0  # when the lease was taken or last extended (monotonic)
        self._keep_until = 0.0  # the call lease is kept alive until then (monotonic)
        self._holder: weakref.ref[object] | None = None  # see ``held_by``
        self._position = 0  # the journal position this session has applied up to
        self._state_version = 0
        self._host_known = 0  # entries the host was shown at the end of the last call
        self._lock = threading.RLock()  # the phases; background work never takes it
        self._state_lock = threading.Lock()  # state changes made by background work
        self._last_response: Entry | None = None
        self._background = {COUNTS: Worker(f"stenograph-{self.id}-{COUNTS}")}
        self._uncounted: deque[Entry] = deque()  # appended, not handed over for counting yet
        # the job counting them (holding the history, not the session: a queued job does
        # not keep an abandoned session alive)
        self._count_job = functools.partial(count_queued, self._uncounted, self.history)
        self._state: dict[str, Any] = {"handlers": {}}
        self.stash = Stash()  # live per-session values under typed keys, never saved
        self._closed = False
        self._saved_state: dict[str, Any] = {}
        self._host = HostMessages()
        self._batch: list[tuple[dict[str, Any], bytes]] | None = None  # records of a phase
        self._heard: NotesRecord | None = None  # the newest notes record the journal holds
        self._load()
        engine.bind_states(self)
        self._announce_heard()
        self.run_in_background(COUNTS, encoding)  # the tokenizer loads off the call path
        self.engine.dispatch("session_opened", self)

    # host API --------------------------------------------------------------------------

    def append(self, message: dict[str, Any]) -> Entry:
        """Append a message (user input, tool results, or a whole assistant turn)."""
        with self._lock:
            if self._store is not None:
                self.begin()
            entry = make_entry(message, self.clock())
            self._add(entry)
            return entry

    def begin(self, renew: bool = False) -> None:
        """Take the session's lease for a call (waiting up to ``wait_seconds``, then
        ``SessionBusy``) and catch up with what other workers stored. The host API calls
        it; a call ends with :meth:`post_sampling` or :meth:`release`."""
        if self._store is None:  # set once, at open: nothing to take
            return
        with self._lock:
            if self._lease is not None:
                # at pre-call (``renew``), a lease older than a sixth of its time, so that the
                # model call starts with most of it (one taken by this call's input is not
                # written again); at any step, one past half its time (after a long call)
                limit = self.lease_seconds / (6 if renew else 2)
                if time.monotonic() - self._lease_at > limit:
                    self._renew()
                return
            from ..stores.base import CALL, acquire_wait

            self._lease = acquire_wait(
                self._store, CALL, self._owner, self.lease_seconds, self.wait_seconds
            )
            self._lease_at = time.monotonic()
            self._catch_up()

    def release(self) -> None:
        """End the call: give the lease up (after a failed model call, say)."""
        if self._store is None:  # no lease, nor a holder (see ``held_by``)
            return
        with self._lock:
            lease, self._lease, self._holder = self._lease, None, None
            if lease is not None:
                self._store.release(lease)

    def held_by(self, holder: object) -> None:
        """The running model call belongs to ``holder`` (a stream object handed to the
        host, say): when ``holder`` is garbage-collected before the call ends, the call's
        lease is given back (on a thread of stenograph's, moments later), so that other
        workers need not wait out ``call_seconds``. In-memory sessions hold no lease."""
        if self._store is None:
            return
        from ..stores.renewal import GIVE_BACK

        me = weakref.ref(self)
        self._holder = weakref.ref(holder, lambda token: GIVE_BACK.later(me, token))

    def give_back_later(self) -> None:
        """Give the running call's lease back moments later, on a thread of stenograph's,
        unless the call ended meanwhile; safe where taking a lock is not (a generator the
        garbage collector finalizes). Only a call given to :meth:`held_by` is given back."""
        token = self._holder
        if token is not None:
            from ..stores.renewal import GIVE_BACK

            GIVE_BACK.later(weakref.ref(self), token)

    def _give_back(self, token: object) -> None:
        with self._lock:
            if self._holder is token and self._lease is not None:
                log.warning(
                    "session %s: a model call was abandoned before its end (its stream"
                    " dropped or left unread); the session's lease is given back",
                    self.id,
                )
                self.release()

    def refresh(self) -> None:
        """Catch up now with what other workers stored (no lease taken)."""
        with self._lock:
            if self._store is not None:
                self._catch_up()

    def check_host_list(self, roles: Sequence[str | None]) -> None:
        """Refuse a host list (given by its messages' roles) that lacks entries other
        workers appended since this worker last showed the session to its host: shorter
        than the history, or parting from it where those entries are."""
        known, history = self._host_known, self.history
        if len(history) <= known:
            return
        if len(roles) >= len(history) and all(
            roles[i] == history[i].role for i in range(known, len(history))
        ):
            return
        from ..stores.base import StaleHistory

        self.release()
        raise StaleHistory(
            f"session {self.id}: the host's list ({len(roles)} messages) lacks the"
            f" {len(history) - known} entries other workers appended since this worker last"
            " saw the session: reload it (session.conversation()) and retry; to cut the"
            " history, call session.truncate(after=uuid)"
        )

    def conversation(self) -> list[dict[str, Any]]:
        """The history as the host's message list (original content)."""
        with self._lock:
            self._host_known = len(self.history)
            return [{"role": e.role, "content": copy.deepcopy(e.content)} for e in self.history]

    def sync(self, messages: Sequence[Any]) -> Synced:
        """Make the history hold exactly ``messages``, the host's whole conversation (the
        host's list is the truth): messages the session has not seen are appended, an
        earlier message the host changed (a redaction, a fix) is adopted with its new
        content, and a shorter list, or one whose roles part from the history, rewinds it
        (as :meth:`truncate`). Each change is persisted and recorded as an event. Raises
        ``ConversationMismatch`` (a ``ValueError``) when two or more messages overlap the
        history and none matches: another conversation is never taken for this one."""
        with self._lock:
            given = [self._host.plain(m) for m in messages]
            self.begin()
            self.check_host_list([m.get("role") for m in given])
            self._host.forget_except(given)
            todo = plan(self.history.entries, given, self._host)
            now = self.clock()
            new = [make_entry(m, now) for m in todo.new]  # all checked before any change
            known = {e.uuid for e in self.history.entries[: todo.keep]}
            lines = []
            for entry in new:
                lines.append(self._check(entry, known))
                known.add(entry.uuid)
            edited = self._adopt(todo.edits) if todo.edits else []
            removed = 0
            if todo.keep < len(self.history):
                keep = self.history[todo.keep - 1].uuid if todo.keep else None
                removed = self.truncate(after=keep)
            for entry, line in zip(new, lines, strict=True):
                self._commit(entry, line)
            return Synced(tuple(new), tuple(edited), removed)

    def truncate(self, after: str | None) -> int:
        """Remove every entry after the entry ``after`` (every entry when None): a host
        rewind. Persisted (a restart keeps it); the request window and the notes record
        go when the entries they name do. Returns how many entries were removed."""
        with self._lock:
            self.begin()
            if after is not None and after not in self.history.by_uuid:
                raise KeyError(f"session {self.id} has no entry {after!r}")
            keep = self.history.by_uuid[after].index + 1 if after is not None else 0
            removed = len(self.history) - keep
            if not removed:
                return 0
            self._journal({"op": "truncate", "after": after})
            self._rebuild(self.history.entries[:keep])
            self.record(
                HistoryTruncated(time=self.clock(), after_uuid=after or "", removed=removed)
            )
            self._save_state_if_changed()
            return removed

    def pre_call(
        self, *, model: str, system: Any = None, tools: list[Any] | None = None, **extra: Any
    ) -> Request:
        """Run the pre-call phase; return the request for ``client.messages.create``."""
        with self._lock:
            if self._store is not None:
                self.begin(renew=True)
                self._keep_call_lease()
            call = PreCallCall(  # by position: keywords cost twice as much
                self,
                self.clock(),
                model,
                system,
                tools,
                extra,
                self._last_response,
                self._state.get("seen", 0),
                len(self.history.entries),
            )
            if self.engine.telemetry is None:  # no span: no context manager either
                request = self._pre_call_phase(call)
            else:
                with self.traced("pre_call", call):
                    request = self._pre_call_phase(call)
            self._state["seen"] = len(self.history.entries)
            self._save_state_if_changed()
            self._hand_over_counts()
            return cast(Request, request)

    def post_sampling(self, response: Any) -> Entry:
        """Append the model's response (an anthropic ``Message`` or a dict), then run the
        post-sampling phase."""
        with self._lock:
            stored = self._store is not None
            if stored:
                self.begin()
            try:
                now = self.clock()
                entry = response_entry(response, now)
                self._batch = []  # one store step at the end: the records, the state, release
                try:
                    self._add(entry)
                    call = PostSamplingCall(self, now, entry, self.last_request)
                    if self.engine.telemetry is None:
                        self.engine.dispatch("post_sampling", self, call)
                    else:
                        with self.traced("post_sampling", call):
                            self.engine.dispatch("post_sampling", self, call)
                finally:
                    self._commit_batch()
            finally:
                if stored:
                    self.release()
            return entry

    async def apre_call(self, **kwargs: Any) -> Request:
        """:meth:`pre_call` for async hosts (see :meth:`arun_phase`)."""
        return cast(Request, await self.arun_phase("pre_call", self.pre_call, **kwargs))

    async def apost_sampling(self, response: Any) -> Entry:
        """:meth:`post_sampling` for async hosts (see :meth:`arun_phase`)."""
        return cast(Entry, await self.arun_phase("post_sampling", self.post_sampling, response))

    async def arun_phase(
        self, hook: str, function: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """Run ``function`` (a phase of ``hook``) for an async host: on the event loop when
        it cannot block (no storage whose writes block, no ``blocking`` handler on
        ``hook``), else in a worker thread, so that a state file's fsync, a database round
        trip or a handler's wait never stalls the loop (a thread hop costs ~0.1 ms)."""
        writes_block = self._store is not None and self._store.blocks
        if not writes_block and hook not in self.engine.blocking_hooks:
            return function(*args, **kwargs)
        import asyncio  # async hosts have it loaded already

        return await asyncio.to_thread(function, *args, **kwargs)

    def wait_for_background(self, timeout: float = 15.0, *, batched: bool = True) -> bool:
        """Wait up to ``timeout`` seconds for background work; True when none is left.
        ``batched`` False: counts still waiting for their batch stay queued, and only the
        work already started is waited for (what a model call's latency lets run)."""
        deadline = time.monotonic() + max(0.0, timeout)
        if batched:
            self._hand_over_uncounted()
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
                self._save_on_close()
                self._store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # for handlers ----------------------------------------------------------------------

    @property
    def hook(self) -> SessionHooks:
        """``session.hook.<name>(**arguments)`` calls a hook on every slot, in preset order
        (made on each use: the session holds no reference to it)."""
        return SessionHooks(self.engine, self)

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
    def storage(self) -> SessionStorage | None:
        """Where this session is kept (None: in memory)."""
        return self._store

    @property
    def position(self) -> int:
        """The journal position this session has applied up to (it only grows)."""
        return self._position

    def notes_at(self, label: str, template: str = "", max_chars: int = MAX_NOTES_CHARS) -> Notes:
        """The notes ``label`` of this session, kept in its store (the file at ``label``
        for the folder store and for an in-memory session)."""
        if self._store is not None:
            return self._store.notes(label, template, max_chars)
        from ..stores.folder import FileNotes

        return FileNotes(Path(label), template, max_chars=max_chars)

    def announce_notes(
        self, notes: NotesRecord, lease: Lease | None = None, journaled: bool = False
    ) -> None:
        """An extractor wrote ``notes``: journal the record (fenced by the extraction
        ``lease`` when given; ``journaled``: the extractor's job did), so that every
        worker and a reopened session learn of it too, then call ``notes_written`` on
        every slot. Safe from a background thread."""
        if self._store is not None and not journaled:
            self._store.append([_notes_op(notes)], lease)
        self.hook.notes_written(notes=notes)

    def handler_state(self, key: str) -> dict[str, Any]:
        """The persisted dict of one handler slot (created empty)."""
        return cast(dict[str, Any], self._state["handlers"].setdefault(key, {}))

    def record(self, event: Event) -> None:
        """Add an event to ``events`` (safe from any thread; the oldest goes once there are
        ``max_events``) and hand it to ``on_event``."""
        with self._events_lock:
            self.events.append(event)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("event %s", event)
        if self.on_event is not None or self.engine.telemetry is not None:
            self._deliver(event)

    def _deliver(self, event: Event) -> None:
        telemetry = self.engine.telemetry
        if telemetry is not None:
            telemetry.event(self, event)
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # a broken observer never breaks the session
            log.exception("session %s: on_event failed on %s", self.id, event.kind)

    def amend_later(self, event: Event, figures: Callable[[], dict[str, Any]]) -> None:
        """Hand ``on_event`` a copy of ``event`` with the fields ``figures()`` returns, in
        ``events`` too in its place (unless it left them meanwhile), computed on the
        background worker that counts tokens (after the counts queued before it)."""

        def amend() -> None:
            amended = dataclasses.replace(event, **figures())
            with self._events_lock:
                events = self.events
                for i in range(len(events) - 1, -1, -1):
                    if events[i] is event:
                        events[i] = amended
                        break
            log.debug("event amended %s", amended)
            self._deliver(amended)

        self.run_in_background(COUNTS, amend)

    def memorize(
        self, entries: Iterable[Entry], *, keep: Iterable[str] = (), reduce_inputs: bool = False
    ) -> list[Entry]:
        """Mark entries memorized; returns those newly marked (already marked are skipped)."""
        memo = {"keep": sorted(set(keep)), "reduce_inputs": bool(reduce_inputs)}
        with self._lock:
            self.begin()
            marked = [e for e in entries if not e.memorized]
            if marked and self._store is not None:  # persisted first: a failed write is void
                self._journal({"op": "memorize", "uuids": [e.uuid for e in marked], "memo": memo})
            for entry in marked:
                entry.memorized, entry.memo = True, memo
            with paused_gc():
                self.history.refresh(*marked, memorized=True)
            return marked

    def replace_sent_content(self, entry: Entry, content: str | list[dict[str, Any]]) -> None:
        """Send ``content`` for ``entry`` from now on; the history keeps the original."""
        with self._lock:
            self.begin()
            sent = copy.deepcopy(content)
            self._journal({"op": "sent", "uuid": entry.uuid, "content": sent})
            entry.sent_content = sent
            self.history.refresh(entry)

    def run_in_background(self, name: str, work: Callable[[], object]) -> None:
        """Run ``work`` on this session's background worker ``name`` (jobs of one name run
        one after the other); ``wait_for_background`` waits for them."""
        worker = self._background.get(name)
        if worker is None:
            worker = self._background.setdefault(name, Worker(f"stenograph-{self.id}-{name}"))
        if name == COUNTS:  # after the counts of the entries before it
            self._hand_over_uncounted()
        telemetry = self.engine.telemetry
        worker.submit(work if telemetry is None else telemetry.carry(work))

    def traced(self, name: str, call: Any = None) -> AbstractContextManager[object]:
        """A telemetry span around ``name`` — a phase, or a handler's background work such
        as the notes fork (``call`` says what it is about); a no-op unless telemetry is on
        (``stenograph.integrations.otel``)."""
        telemetry = self.engine.telemetry
        return NO_SPAN if telemetry is None else telemetry.span(self, name, call)

    # internals -------------------------------------------------------------------------

    def _add(self, entry: Entry) -> None:
        """All or nothing: checked and encoded, persisted, then added; in C for an
        in-memory session's entry as hosts append it (``C.session_add``)."""
        if C is None or not C.session_add(self, entry):
            self._commit(entry, self._check(entry, self.history.by_uuid))

    def _check(self, entry: Entry, known: Container[str]) -> tuple[dict[str, Any], bytes]:
        """The entry's journal record and line (no line in memory: only checked); an
        ``EntryError`` if it cannot be appended."""
        if entry.uuid in known:
            raise EntryError(
                f"uuid {entry.uuid!r}: an entry with this uuid is already in the history"
            )
        if self._store is None:
            check_entry(entry)
            return {}, b""
        record = {"op": "append", "entry": entry.to_record()}
        return record, encode_record(record)

    def _commit(self, entry: Entry, checked: tuple[dict[str, Any], bytes]) -> None:
        if self._store is not None:
            self._journal(*checked)
        self.history.add(entry)
        self._host_known = len(self.history.entries)
        if entry.content:  # counted once the request is out (see ``pre_call``)
            self._uncounted.append(entry)
        if entry.role == "assistant":
            self._last_response = entry

    def _hand_over_counts(self) -> None:
        """Hand the queued entries over for counting during the model call, once a batch
        of them waits (one hand-over per batch, not per call), or at once when the newest
        response reported no usage: the context size then needs the counts."""
        last = self._last_response
        if len(self._uncounted) >= COUNT_BATCH or last is None or not last.usage:
            self._hand_over_uncounted()

    def _hand_over_uncounted(self) -> None:
        """Hand the counting worker the entries waiting to be counted (when some wait)."""
        if self._uncounted:
            self._background[COUNTS].submit(self._count_job)

    def _adopt(self, edits: dict[int, dict[str, Any]]) -> list[Entry]:
        """Give entries the host's new content (checked and persisted first, then applied)."""
        changes = []
        for index, message in edits.items():
            entry = self.history[index]
            fresh = make_entry({"role": entry.role, "content": message.get("content")}, 0.0)
            changes.append((entry, fresh))
        for entry, fresh in changes:
            self._journal({"op": "edit", "uuid": entry.uuid, "content": fresh.content})
        recount = [e for entry, fresh in changes for e in self.history.take_content(entry, fresh)]
        self._rebuild(self.history.entries)
        for entry in recount:
            self.run_in_background(COUNTS, functools.partial(self.history.count, entry))
        uuids = tuple(e.uuid for e, _ in changes)
        self.record(HistoryEdited(time=self.clock(), uuids=uuids))
        log.info("session %s: the host changed %d earlier message(s)", self.id, len(uuids))
        return [e for e, _ in changes]

    def _rebuild(self, entries: list[Entry]) -> None:
        """The history rebuilt from ``entries``; a request window naming entries that are
        gone is dropped (handlers check what their own state names)."""
        self.history.rebuild(entries)
        self._last_response = next((e for e in reversed(entries) if e.role == "assistant"), None)
        self._state["seen"] = min(self._state.get("seen", 0), len(entries))
        window = self._state.get("window")
        if window is not None:
            self._load_window(window, quiet=True)

    def _pre_call_phase(self, call: PreCallCall) -> dict[str, Any]:
        self.engine.dispatch("pre_call", self, call)
        request = self.last_request = self._request(call)
        return request

    def _request(self, call: PreCallCall) -> dict[str, Any]:
        request: dict[str, Any] = {"model": call.model}
        if call.system is not None:
            request["system"] = call.system
        if call.tools is not None:
            request["tools"] = call.tools
        reused = None if C is None else C.request_reuse(self)  # the common case, in C
        if reused is None:
            previous = None if self.last_request is None else sole_messages(self.last_request)
            request["messages"] = self.history.request_messages(previous)
        else:
            request["messages"] = reused  # and the guard has nothing to check
        request.update(call.extra)
        problems = [] if reused is not None else self.history.request_problems()
        if problems:
            self.record(RequestViolation(time=call.now, problems=tuple(problems)))
            log.error("session %s: the API would reject the request: %s", self.id, problems)
            if self.engine.strict:
                raise RequestError(problems)
        return request

    def _journal(self, record: dict[str, Any], line: bytes | None = None) -> None:
        if self._store is None:
            check_json(record)  # the same checks as a stored record
            return
        if self._batch is not None:
            self._batch.append((record, line or encode_record(record)))
            return
        before, after = self._store.append([record], self._lease, None if line is None else [line])
        self._moved(before, after)

    def _moved(self, before: int, after: int) -> None:
        if before == self._position:
            self._position = after

    def _commit_batch(self) -> None:
        """The records journaled during the phase, the state when it changed, and the
        lease's release: one store step (one transaction, one script)."""
        batch, self._batch = self._batch or [], None
        if self._store is None:
            return
        from ..stores.base import CallEnd, LeaseLost

        with self._state_lock:
            changed = _without_seen(self._state) != _without_seen(self._saved_state)
            try:
                records, lines = [r for r, _ in batch], [line for _, line in batch]
                state = self._state if changed else None
                end = CallEnd(records, lines, state, self._state_version, self._lease)
                before, after, version = self._store.commit(end)
            except BaseException as exc:
                self._undo(batch, refused=isinstance(exc, LeaseLost))
                raise
            self._lease = None  # released by the commit
            if changed:
                self._state_version = version
                self._saved_state = copy.deepcopy(self._state)
        self._moved(before, after)

    def _undo(self, batch: list[tuple[dict[str, Any], bytes]], refused: bool) -> None:
        """A batch that was not stored: the entries it added leave the history again
        (all or nothing, as an append). ``refused``: fencing refused it, so nothing of it
        was stored, whatever other workers stored meanwhile."""
        added = {r["entry"]["uuid"] for r, _ in batch if r.get("op") == "append"}
        if not added or self._store is None:
            return
        if not refused and self._store.position() != self._position:
            return  # the records were stored before the failure
        keep = next(i for i, e in enumerate(self.history.entries) if e.uuid in added)
        self._rebuild(self.history.entries[:keep])
        self._host_known = min(self._host_known, keep)

    def _renew(self) -> None:
        """Extend the lease held (taken up again when it expired during a long model call
        and nobody took it meanwhile); one another worker held since is lost."""
        from ..stores.base import lease_lost
        from ..stores.renewal import extend

        assert self._store is not None and self._lease is not None
        renewed = extend(self._store, self._lease, self.lease_seconds, retake=True)
        if renewed is None:
            lease, self._lease = self._lease, None
            raise lease_lost(lease, self._store.location, "another worker took the lease over")
        self._lease, self._lease_at = renewed, time.monotonic()

    def _keep_call_lease(self) -> None:
        """Have the keeper renew the call lease while the model call runs (up to
        ``call_seconds``), so that no other worker takes the session meanwhile."""
        from ..stores.renewal import KEEPER

        self._keep_until = time.monotonic() + self.call_seconds
        KEEPER.keep(self, self._lease_at + self.lease_seconds / 3)

    def _keep_lease(self) -> float | None:
        """Renew the call lease (on the keeper's thread); when to renew it next, or None
        once keeping ends: the lease given up or lost, the session closed, or the call
        longer than ``call_seconds`` (the lease then lapses; see :meth:`begin`)."""
        from ..stores.renewal import extend

        if self._lease is None:  # the usual: the call ended (read without the lock)
            return None
        with self._lock:
            lease, now = self._lease, time.monotonic()
            if lease is None or self._closed or self._store is None or now > self._keep_until:
                return None
            try:  # taken up again when a late renewal finds it expired but not taken
                renewed = extend(self._store, lease, self.lease_seconds, retake=True)
            except Exception as exc:  # a store briefly unreachable: tried again next time
                log.warning(
                    "session %s: renewing the call lease failed (%s: %s)",
                    self.id,
                    type(exc).__name__,
                    exc,
                )
                return now + self.lease_seconds / 3
            if renewed is None:
                log.warning(
                    "session %s: the call lease (epoch %d) was taken over during the model"
                    " call; the response will be refused",
                    self.id,
                    lease.epoch,
                )
                return None
            self._lease, self._lease_at = renewed, time.monotonic()
            return self._lease_at + self.lease_seconds / 3

    def _catch_up(self) -> None:
        """Apply what was stored since this session last looked (journal, then state)."""
        assert self._store is not None
        records, self._position = self._store.read(self._position)
        for record in records:
            self._apply(record)
        state, problem, version = self._store.load_state()
        if version != self._state_version and not problem:
            with self._state_lock:
                self._state = {"handlers": {}}
                self._load_state(state)
                self._saved_state = copy.deepcopy(self._state)
            self._state_version = version
        self._announce_heard()

    def _announce_heard(self) -> None:
        """Announce the newest notes record read from the journal, when it covers an entry
        still in the history."""
        heard, self._heard = self._heard, None
        if heard is not None and heard.upto_uuid in self.history.by_uuid:
            self.hook.notes_written(notes=heard)

    def _save_on_close(self) -> None:
        from ..stores.base import SessionBusy

        try:
            self.begin()
        except SessionBusy as exc:
            log.warning("session %s: state not saved on close (%s)", self.id, exc)
            return
        try:
            with self._state_lock:
                self._save_state()
        finally:
            self.release()

    def _save_state(self) -> None:
        assert self._store is not None
        self._state_version = self._store.save_state(self._state, self._state_version, self._lease)

    def _save_state_if_changed(self) -> None:
        """Save when something other than the ``seen`` cursor changed (the cursor is saved
        along with other changes and on close: a stale one only shows handlers again)."""
        if self._store is None or self._batch is not None:
            return  # a phase's batch saves the state with its records
        with self._state_lock:
            if _without_seen(self._state) == _without_seen(self._saved_state):
                return
            self._save_state()
            self._saved_state = copy.deepcopy(self._state)

    def _load(self) -> None:
        self._saved_state = {}
        if self._store is None:
            return
        with paused_gc():
            if self.folder is not None:  # each record applied as soon as it is parsed
                self._position = cast("FolderStorage", self._store).replay(0, self._apply)
            else:
                records, self._position = self._store.read(0)
                for record in records:
                    self._apply(record)
        self._host_known = len(self.history)
        state, problem, self._state_version = self._store.load_state()
        if problem:
            self._reset("state.json", f"unreadable ({problem})")
        behind = state.get(JOURNAL_BYTES)
        if isinstance(behind, int) and behind > self._store.position():
            self._reset(
                "handlers",
                f"the journal is shorter ({self._store.position():,} bytes) than the state"
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
        notes = state.get("notes")  # where versions before the notes hooks kept it too
        if notes is not None:
            if _is_notes(notes) and notes["upto_uuid"] in self.history.by_uuid:
                self._heard = self._heard or NotesRecord(notes["path"], notes["upto_uuid"])
            else:
                self._reset("notes", "the notes record is malformed or covers entries not kept")
        window = state.get("window")
        if window is not None:
            self._load_window(window)

    def _load_window(self, window: Any, quiet: bool = False) -> None:
        """Apply a request window; one that no longer fits the history is dropped."""
        start = window.get("start") if isinstance(window, dict) else None
        entry = self.history.by_uuid.get(start) if isinstance(start, str) else None
        preamble = window.get("preamble") if isinstance(window, dict) else None
        try:
            if entry is None or not isinstance(preamble, list):
                raise ValueError("its start entry is not in the history or it is malformed")
            self.history.set_window(entry.index, list(preamble))
        except ValueError as exc:
            self._state.pop("window", None)
            if quiet:
                log.info("session %s: request window dropped (%s)", self.id, exc)
            else:
                self._reset("window", f"the saved request window is dropped ({exc})")
            return
        self._state["window"] = window

    def state_reset(self, part: str, reason: str) -> None:
        """A part of the saved state was not what it should be and is reset: a warning log
        and a ``StateReset`` event name the file, the part and why."""
        self._reset(part, reason)

    def _reset(self, part: str, reason: str) -> None:
        """Record that ``part`` of the saved state was reset; keep the file aside once."""
        assert self._store is not None
        if not hasattr(self, "_aside"):
            self._aside = self._store.keep_aside(f"{part}: {reason}")
        path = self._store.location
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
                if entry.uuid in self.history.by_uuid:
                    return  # idempotent: a record this session wrote itself
                self.history.add(entry)
                if entry.role == "assistant":
                    self._last_response = entry
            elif op == "memorize":
                marked = [self.history.by_uuid[uid] for uid in record["uuids"]]
                marked = [e for e in marked if not e.memorized]
                for entry in marked:
                    entry.memorized, entry.memo = True, record.get("memo")
                self.history.refresh(*marked, memorized=True)
            elif op == "sent":
                entry = self.history.by_uuid[record["uuid"]]
                entry.sent_content = record["content"]
                self.history.refresh(entry)
            elif op == "notes":
                self._heard = NotesRecord(
                    str(record["path"]), str(record["upto_uuid"]), record.get("version")
                )
            elif op == "edit":
                entry = self.history.by_uuid[record["uuid"]]
                fresh = make_entry({"role": entry.role, "content": record["content"]}, 0)
                self.history.take_content(entry, fresh)
                self.history.rebuild(self.history.entries)
            elif op == "truncate":
                after = record["after"]
                keep = self.history.by_uuid[after].index + 1 if after is not None else 0
                self.history.rebuild(self.history.entries[:keep])
                self._last_response = next(
                    (e for e in reversed(self.history.entries) if e.role == "assistant"), None
                )
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            log.warning("session %s: skipped a journal record (%s): %.120s", self.id, exc, record)


def count_queued(queue: deque[Entry], history: History) -> None:
    """Count the entries ``queue`` holds (on the counting worker; the host appends
    meanwhile: each entry is taken off the queue once, whichever job takes it)."""
    while queue:
        try:
            entry = queue.popleft()
        except IndexError:  # another job took the last one
            return
        history.count(entry)


def _is_notes(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("path"), str)
        and isinstance(value.get("upto_uuid"), str)
    )


def _notes_op(notes: NotesRecord) -> dict[str, Any]:
    """The journal record of ``notes`` (the format every version reads)."""
    record = {"op": "notes", "path": notes.label, "upto_uuid": notes.upto_uuid}
    return record if notes.version is None else {**record, "version": notes.version}


def _without_seen(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "seen"}
