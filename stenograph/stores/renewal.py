"""A lease kept alive while long work holds it (a notes fork may outlast ``lease_seconds``):
renewed from a background thread every third of its time until the work ends; once it is
lost (expired or taken over), renewing stops and fencing refuses the work's writes.

Every store may be used from that thread: the folder store serializes on a file lock each
thread opens for itself, the SQL stores share one connection under the store's lock
(SQLite's opened with ``check_same_thread=False``), redis-py's client draws connections
from a thread-safe pool."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
