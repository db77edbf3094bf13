"""The notes writer's queue in one session: at most one request waits (a newer one
coalesces it) and at most one runs."""

from __future__ import annotations

import threading
import time
from typing import Any

from ...engine.extraction import ExtractionRequest


class ExtractionDesk:
    """Requests taken through ``extraction_requested``, each with the fork's snapshot."""

    def __init__(self) -> None:
        self.pending: tuple[ExtractionRequest, Any] | None = None
        self.running: ExtractionRequest | None = None
        self._lock = threading.Condition()
        self._started = 0.0

    def file(self, request: ExtractionRequest, context: Any) -> None:
        """File ``request``; it replaces a request still waiting to be taken."""
        with self._lock:
            if self.pending is not None:
                self.pending[0].status = "coalesced"
            self.pending = (request, context)

    def take(self) -> tuple[ExtractionRequest, Any] | None:
        """The pending request and its snapshot, now running (None when there is none)."""
        with self._lock:
            taken, self.pending = self.pending, None
            if taken is not None:
                taken[0].status = "running"
                self.running = taken[0]
                self._started = time.monotonic()
            return taken

    def done(self, request: ExtractionRequest) -> None:
        """``request`` (settled) no longer runs: waiters are woken."""
        with self._lock:
            if self.running is request:
                self.running = None
            self._lock.notify_all()

    def wait_idle(self, timeout: float, stale_after: float) -> bool:
        """Wait up to ``timeout`` seconds until nothing is pending or running; a run older
        than ``stale_after`` seconds is not waited for. True when idle."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.running or self.pending:
                now = time.monotonic()
                if self.running and now - self._started > stale_after:
                    return False
                if now >= deadline:
                    return False
                self._lock.wait(deadline - now)
        return True
