"""The store seam: what a session needs from where it is kept, declared as Protocols.

A :class:`Store` holds many sessions; :meth:`Store.session` gives one session's
:class:`SessionStorage`. Every implementation keeps the same guarantees (the conformance
suite in the tests runs against each): leases with epochs that only increase (fencing),
appends idempotent by entry uuid, ordered and gap-free, state and notes replaced by
compare-and-swap, at most one extraction lease per session.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ..engine.errors import StenographError
from ..engine.notes import MAX_NOTES_CHARS, NotesUnreadable, check_headings, headings
from .renewal import kept_alive

T = TypeVar("T")
S = TypeVar("S", bound="SessionStorage")
CALL = "call"
EXTRACTION = "extraction"
KINDS = (CALL, EXTRACTION)


class StoreError(StenographError):
    """A store URL or a store's content is unusable; the message names which."""


class SessionBusy(StenographError):
    """Another worker held the session's lease for longer than this one would wait."""


class LeaseLost(StenographError):
    """A write under a lease that expired or was taken over: newer work is not overwritten."""


class StaleHistory(StenographError, ValueError):
    """The host's list lacks entries another worker appended: reload and retry."""


class VersionConflict(StenographError):
    """A compare-and-swap found a newer version than the one it expected."""


@dataclass(frozen=True)
class Lease:
    """A time-bound right to write one session (``kind`` ``call`` or ``extraction``);
    ``epoch`` grows by one each time a new owner takes it."""

    session_id: str
    kind: str
    owner: str
    epoch: int
    expires: float


def new_owner() -> str:
    """A lease owner name unique across machines and processes (``host:pid:random``)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def new_write_id() -> str:
    """A compare-and-swap's own id, stored with what it wrote: a retry whose first try
    landed unheard (the reply lost with the connection) finds it and reports success."""
    return secrets.token_hex(8)


def yields_to(holder: str, owner: str) -> bool:
    """Whether ``holder``'s live lease goes to ``owner``: the same owner renews, a
    session opened again in the same process takes over from the older object (which
    then gets ``LeaseLost``), and so does anyone when the holder's process on this host
    is gone; a live lease of another process is waited for."""
    if holder == owner or holder.rsplit(":", 1)[0] == owner.rsplit(":", 1)[0]:
        return True
    return _dead_here(holder)


def _dead_here(holder: str) -> bool:
    """A holder on this host whose process is gone (killed): its lease is not waited for."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


@dataclass(frozen=True)
class CallEnd:
    """What a call writes in its last step: the records to append (``lines``: encoded, or
    empty), the state (None: unchanged) expected at version ``expected``, the lease it
    gives up."""

    records: list[dict[str, Any]]
    lines: list[bytes]
    state: dict[str, Any] | None
    expected: int
    lease: Lease | None


@runtime_checkable
class Notes(Protocol):
    """One notes text, replaced only by compare-and-swap."""

    label: str  # what the fork and the summaries call it (a path for the folder store)

    def read(self) -> tuple[str, Any]:
        """The text ('' when there is none) and its version (opaque)."""

    def compare_and_swap(self, version: Any, text: str, lease: Lease | None = None) -> Any:
        """Replace the text if it is still at ``version`` (``NotesConflict`` if not);
        ``lease`` (an extraction lease) fences the write. Returns the new version."""


@runtime_checkable
class SessionStorage(Protocol):
    """What one session is kept in. Positions order the journal: ``read(after)`` returns
    the records written after position ``after``."""

    session_id: str
    location: str  # names the session's state in messages (a file, a URL)
    blocks: bool  # whether writes may wait (disk, network): async hosts then use a thread

    def acquire(self, kind: str, owner: str, seconds: float) -> Lease | None:
        """Take (or renew) the lease ``kind`` for ``seconds``; None when another owner
        holds it unexpired."""

    def release(self, lease: Lease) -> None:
        """Give the lease up (nothing happens if it is no longer ``lease``)."""

    def append(
        self,
        records: list[dict[str, Any]],
        lease: Lease | None,
        lines: list[bytes] | None = None,
    ) -> tuple[int, int]:
        """Append journal records in order, all or nothing; an ``append`` record whose
        entry uuid is already stored is skipped. Raises ``LeaseLost`` unless ``lease``
        is current. ``lines`` are the records encoded, when the caller has them. Returns
        the positions (before, after) the records took."""

    def read(self, after: int) -> tuple[list[dict[str, Any]], int]:
        """The records after position ``after`` and the position after them."""

    def position(self) -> int:
        """The position after the last record."""

    def load_state(self) -> tuple[dict[str, Any], str | None, int]:
        """The saved state, why it was unusable (or None), its version (0: none)."""

    def save_state(self, state: dict[str, Any], expected: int, lease: Lease | None) -> int:
        """Replace the state if it is at version ``expected`` (``VersionConflict`` if
        not; ``LeaseLost`` unless ``lease`` is current); the new version."""

    def commit(self, end: CallEnd) -> tuple[int, int, int]:
        """One atomic step at the end of a call: append ``end.records`` (as
        :meth:`append`), replace the state when ``end.state`` is given (as
        :meth:`save_state`), give ``end.lease`` up. Returns the positions (before, after)
        and the state's version."""

    def keep_aside(self, reason: str) -> str | None:
        """Keep a copy of unusable state for the user; where it is."""

    def notes(self, label: str, template: str, max_chars: int = MAX_NOTES_CHARS) -> Notes:
        """The notes called ``label``, kept in the store (the template until the first
        write; a text over ``max_chars`` is ``NotesUnreadable``)."""

    def set_pending(self, job: dict[str, Any]) -> None:
        """File an extraction job; it replaces the one not taken yet, unless that one or
        the last one taken covers a later journal ``position`` (coalescing: the newest
        request wins, an older one filed late is dropped)."""

    def pending(self) -> dict[str, Any] | None:
        """The job filed and not taken yet (read only, no lease needed)."""

    def take_pending(self, lease: Lease) -> dict[str, Any] | None:
        """The pending job, for the holder of the extraction ``lease``; only the mark of
        its position stays filed."""

    def claim(self, position: int, lease: Lease) -> bool:
        """For the holder of the extraction ``lease``, about to run its own job (never
        filed) covering journal ``position``: file the mark of that position as the job
        taken last, unless the job pending or taken last covers a later one; whether it
        did. A pending job it replaces is dropped (coalescing)."""

    def close(self) -> None:
        """Release what this object holds open."""


def checked_storage(storage: SessionStorage, url: str) -> SessionStorage:
    """``storage`` when it has every attribute of ``SessionStorage``, else a ``StoreError``
    naming what it lacks (a store written against an older protocol fails when opened,
    not at its first notes job)."""
    missing = [name for name in _STORAGE_ATTRIBUTES if not hasattr(storage, name)]
    if missing:
        raise StoreError(
            f"store {url!r}: its session storage ({type(storage).__qualname__}) lacks"
            f" {', '.join(missing)}; a SessionStorage has {', '.join(_STORAGE_ATTRIBUTES)}"
            " (see stenograph.stores.base.SessionStorage)"
        )
    return storage


_STORAGE_ATTRIBUTES = (
    *SessionStorage.__annotations__,
    *(n for n, v in vars(SessionStorage).items() if callable(v) and n[0] != "_"),
)


@runtime_checkable
class Store(Protocol):
    """Where sessions are kept, named by a URL."""

    url: str

    def session(self, session_id: str) -> SessionStorage:
        """The storage of one session (created on first write)."""

    def sessions(self) -> list[str]:
        """The ids of the stored sessions, sorted."""

    def delete(self, session_id: str) -> bool:
        """Remove every trace of a session; whether there was one."""

    def close(self) -> None:
        """Close connections."""


def acquire_wait(
    storage: SessionStorage, kind: str, owner: str, seconds: float, wait: float
) -> Lease:
    """The lease, waiting up to ``wait`` seconds for another owner to give it up."""
    deadline = time.monotonic() + wait
    for pause in _backoff():
        lease = storage.acquire(kind, owner, seconds)
        if lease is not None:
            return lease
        left = deadline - time.monotonic()
        if left <= 0:
            raise SessionBusy(
                f"session {storage.session_id} ({storage.location}): another worker holds"
                f" its {kind} lease; waited {wait:g} s (set wait_seconds= on open_session)"
            )
        time.sleep(min(pause, left))
    raise AssertionError("unreachable")  # pragma: no cover


def job_owner() -> str:
    """A lease owner for one background job: unique even among the jobs of one process
    (which never take a lease over from each other), and seen as gone when its process
    is."""
    return f"{new_owner()}:job"


def newer(job: dict[str, Any], than: dict[str, Any] | None) -> bool:
    """Whether ``job`` replaces ``than``, the job pending or the last one taken
    (coalescing: the newest, by the journal ``position`` it covers, wins)."""
    return than is None or int(job.get("position", 0)) >= int(than.get("position", 0))


def taken(job: dict[str, Any] | None) -> dict[str, Any] | None:
    """What stays filed once ``job`` is taken: its position, so an older job filed late
    is not run after it."""
    return None if job is None else {"position": job.get("position", 0), "taken": True}


def claimed(position: int, filed: dict[str, Any] | None) -> dict[str, Any] | None:
    """The mark a lease holder files to run its own job covering ``position`` (see
    ``claim``), or None when ``filed``, the job pending or taken last, covers a later one."""
    mark = {"position": position, "taken": True}
    return mark if newer(mark, filed) else None


def untaken(job: dict[str, Any] | None) -> dict[str, Any] | None:
    """``job`` unless it is the mark of one taken already."""
    return None if job is None or job.get("taken") else job


def run_pending(
    storage: SessionStorage,
    job: dict[str, Any],
    seconds: float,
    run: Callable[[dict[str, Any], Lease], T],
) -> list[T]:
    """Run ``job`` and the jobs other workers filed, holding the session's extraction
    lease, so at most one runs at a time across the cluster. A worker that gets the lease
    runs its own job from memory (only the mark of its position is filed). One that
    cannot files its job for the holder (coalesced: the newest wins) and tries the lease
    once more, as the holder may just have given it up; a holder looks at the pending mark
    again after giving the lease up and takes it again when a job came. The lease is
    renewed while the jobs run (a fork may outlast ``seconds``)."""
    owner = job_owner()
    own: dict[str, Any] | None = job
    done: list[T] = []
    while True:
        lease = storage.acquire(EXTRACTION, owner, seconds)
        if lease is not None:
            try:
                with kept_alive(storage, lease, seconds):
                    own = _run_held(storage, lease, own, run, done)
            finally:
                storage.release(lease)
        if own is not None:
            storage.set_pending(own)
            own = None
        elif lease is None or storage.pending() is None:
            return done


def _run_held(
    storage: SessionStorage,
    lease: Lease,
    own: dict[str, Any] | None,
    run: Callable[[dict[str, Any], Lease], T],
    done: list[T],
) -> dict[str, Any] | None:
    """Holding ``lease``: run ``own`` (unless a later job was filed or taken) and the jobs
    filed; ``own`` back when the lease was lost before it could be claimed."""
    try:
        if own is not None:
            claimed = storage.claim(int(own.get("position", 0)), lease)
            mine, own = own, None
            if claimed:
                done.append(run(mine, lease))
        while (filed := storage.take_pending(lease)) is not None:
            done.append(run(filed, lease))
    except LeaseLost:
        pass  # the lease was lost (renewal late or refused): its new holder goes on
    return own


class StoredNotes(Generic[S]):
    """What the notes kept in a server store share: the template until the first write,
    the notes cap on reading, the template headings kept on writing."""

    def __init__(self, storage: S, label: str, template: str, max_chars: int = MAX_NOTES_CHARS):
        self.storage, self.label, self.template = storage, label, template
        self.max_chars = max_chars
        self.required = headings(template)

    def found(self, text: str | None, version: Any) -> tuple[str, Any]:
        """What :meth:`Notes.read` gives for the stored ``text`` (None: never written),
        unless it is longer than the notes cap (``NotesUnreadable``)."""
        if text is None:
            return self.template, 0
        if len(text) > self.max_chars:
            raise NotesUnreadable(
                f"{self.storage.location}: the notes {self.label!r} hold more than"
                f" {self.max_chars:,} characters (the notes cap, maxNotesChars): raise the cap"
                " or delete the session's notes"
            )
        return text, int(version)

    def check(self, text: str) -> None:
        """Refuse new notes that drop or rename a template heading (``NotesRejected``)."""
        check_headings(self.required, text)


def _backoff() -> Iterator[float]:
    pause = 0.002
    while True:
        yield pause * (0.5 + secrets.randbelow(1000) / 1000)
        pause = min(pause * 1.5, 0.05)


def parse_state(body: str | None, version: int) -> tuple[dict[str, Any], str | None, int]:
    """A stored state text as ``load_state`` returns it (empty when there is none)."""
    if body is None:
        return {}, None, version
    try:
        state = json.loads(body)
    except ValueError as exc:
        return {}, f"{type(exc).__name__}: {exc}", version
    if not isinstance(state, dict):
        return {}, f"the top level is {type(state).__name__}, not an object", version
    return state, None, version


def lease_lost(lease: Lease | None, location: str, why: str) -> LeaseLost:
    """The error for a write refused by fencing."""
    held = f"epoch {lease.epoch} of {lease.owner}" if lease else "no lease"
    return LeaseLost(
        f"{location}: write refused, {why} (this worker held {held}); newer work by another"
        " worker is kept: reopen or retry the call"
    )
