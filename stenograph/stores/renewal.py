"""A lease kept alive while long work holds it (a notes fork, or a model call, may outlast
``lease_seconds``): renewed from a background thread every third of its time until the work
ends; once it is lost (expired or taken over), renewing stops and fencing refuses the work's
writes.

Every store may be used from that thread: the folder store serializes on a file lock each
thread opens for itself, the SQL stores share one connection under the store's lock
(SQLite's opened with ``check_same_thread=False``), redis-py's client draws connections
from a thread-safe pool."""

from __future__ import annotations

import heapq
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine.session import Session
    from .base import Lease, SessionStorage

log = logging.getLogger("stenograph.stores.renewal")


def extend(
    storage: SessionStorage, lease: Lease, seconds: float, retake: bool = False
) -> Lease | None:
    """``lease`` extended by ``seconds`` (the same owner keeps its epoch), or None when it
    was lost (a lease taken anew is given back at once). ``retake``: one that expired with
    nobody taking it meanwhile is taken up again, at the next epoch (every other worker's
    take would have raised it further); its holder writes under the returned lease."""
    renewed = storage.acquire(lease.kind, lease.owner, seconds)
    kept = (lease.epoch, lease.epoch + 1) if retake else (lease.epoch,)
    if renewed is not None and renewed.epoch in kept:
        return renewed
    if renewed is not None:
        storage.release(renewed)
    return None


class Renewal:
    """Extends ``lease`` on ``storage`` by ``seconds`` at each :meth:`renew`."""

    def __init__(self, storage: SessionStorage, lease: Lease, seconds: float) -> None:
        self.storage, self.lease, self.seconds = storage, lease, seconds
        self.lost = False

    def renew(self) -> bool:
        """Extend the lease; False, with a warning, once it was lost (expired or taken
        over): the writes under it are then refused by fencing."""
        if self.lost:
            return False
        if extend(self.storage, self.lease, self.seconds) is not None:
            return True
        self.lost = True
        log.warning(
            "session %s (%s): the %s lease (epoch %d) was lost while its work ran (expired"
            " or taken over); renewing stopped, its writes are refused",
            self.storage.session_id,
            self.storage.location,
            self.lease.kind,
            self.lease.epoch,
        )
        return False


@contextmanager
def kept_alive(storage: SessionStorage, lease: Lease, seconds: float) -> Iterator[Renewal]:
    """Renew ``lease`` for ``seconds`` every ``seconds / 3`` while the block runs; the
    renewing thread has stopped when the block is left (so a release after it is final)."""
    renewal, stop = Renewal(storage, lease, seconds), threading.Event()

    def loop() -> None:
        while not stop.wait(seconds / 3):
            try:
                if not renewal.renew():
                    return
            except Exception as exc:  # a store briefly unreachable: tried again next time
                log.warning(
                    "session %s (%s): renewing the %s lease failed (%s: %s)",
                    storage.session_id,
                    storage.location,
                    lease.kind,
                    type(exc).__name__,
                    exc,
                )

    thread = threading.Thread(target=loop, name=f"stenograph-{lease.session_id}-lease", daemon=True)
    thread.start()
    try:
        yield renewal
    finally:
        stop.set()
        thread.join()


class Keeper:
    """One thread per process renewing the call leases of sessions whose model call is
    running (registered at pre-call by :meth:`keep`), every third of their
    ``lease_seconds``, until the session gives the lease up, is closed or dropped, or its
    ``call_seconds`` are over. The thread starts at the first :meth:`keep`; a keep is a
    heap push (no walk over the sessions kept)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._kept: dict[int, tuple[weakref.ref[Session], float]] = {}  # id -> (ref, due)
        self._heap: list[tuple[float, int]] = []  # (due, id); stale when _kept differs
        self._thread: threading.Thread | None = None

    def keep(self, session: Session, due: float) -> None:
        """Renew ``session``'s call lease from ``due`` (monotonic seconds) on."""
        key = id(session)
        with self._cond:
            sooner = not self._heap or due < self._heap[0][0]
            self._kept[key] = (weakref.ref(session), due)
            heapq.heappush(self._heap, (due, key))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="stenograph-call-leases", daemon=True
                )
                self._thread.start()
            elif sooner:
                self._cond.notify()

    def kept(self, session: Session) -> bool:
        """Whether ``session``'s call lease is being kept."""
        with self._cond:
            held = self._kept.get(id(session))
            return held is not None and held[0]() is session

    def _loop(self) -> None:
        while True:
            for key, ref in self._wait_due():
                session = ref()
                try:
                    following = session._keep_lease() if session is not None else None
                except Exception:  # the thread goes on keeping the other sessions
                    log.exception("keeping the call lease of a session failed")
                    following = None
                if following is not None:
                    self._keep_again(key, ref, following)

    def _wait_due(self) -> list[tuple[int, weakref.ref[Session]]]:
        """The sessions due now, taken out (waiting until one is)."""
        with self._cond:
            while True:
                heap, now, due = self._heap, time.monotonic(), []
                while heap and heap[0][0] <= now:
                    at, key = heapq.heappop(heap)
                    held = self._kept.get(key)
                    if held is not None and held[1] == at:
                        del self._kept[key]
                        due.append((key, held[0]))
                if due:
                    return due
                self._cond.wait(heap[0][0] - now if heap else None)

    def _keep_again(self, key: int, ref: weakref.ref[Session], due: float) -> None:
        """Renew again at ``due``, unless a newer :meth:`keep` came meanwhile."""
        with self._cond:
            if key not in self._kept:
                self._kept[key] = (ref, due)
                heapq.heappush(self._heap, (due, key))

    def _after_fork(self) -> None:
        """In a forked child the parent's thread does not run, nor its calls."""
        self.__init__()  # type: ignore[misc]


KEEPER = Keeper()
os.register_at_fork(after_in_child=KEEPER._after_fork)


class GiveBack:
    """Gives back the call lease of a model call abandoned mid-way (its stream dropped, or
    closed before its end) on a thread of its own: :meth:`later` is safe where taking a lock
    is not (a weakref callback, a generator finalized by the garbage collector)."""

    def __init__(self) -> None:
        self._inbox: queue.SimpleQueue[tuple[weakref.ref[Session], object]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def later(self, session: weakref.ref[Session], token: object) -> None:
        """Give ``session``'s lease back unless the call ``token`` names ended meanwhile."""
        self._inbox.put((session, token))
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="stenograph-give-back", daemon=True
            )
            self._thread.start()

    def _loop(self) -> None:
        while True:
            ref, token = self._inbox.get()
            session = ref()
            try:
                if session is not None:
                    session._give_back(token)
            except Exception:  # the thread goes on for the other sessions
                log.exception("giving back the call lease of an abandoned call failed")

    def _after_fork(self) -> None:
        self.__init__()  # type: ignore[misc]


GIVE_BACK = GiveBack()
os.register_at_fork(after_in_child=GIVE_BACK._after_fork)
