"""The contract between a handler that decides notes need refreshing and one that writes
them: requests are filed on the session's desk and taken by the extractor."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ExtractionRequest:
    """Refresh the notes to cover the history up to ``upto_uuid``."""

    upto_uuid: str
    upto_index: int
    tokens: int
    tool_calls: int
    reason: str
    filed_at: float
    on_success: Callable[[ExtractionRequest], None] | None = field(default=None, repr=False)
    context: Any = field(default=None, repr=False)
    status: str = "pending"
    error: str | None = None


class ExtractionDesk:
    """At most one pending request: a newer one replaces (coalesces) it. With no extractor
    in the preset, a filed request counts as handled at once. The filer's ``on_success`` (a
    state change made from a background thread) runs holding ``state_lock``."""

    def __init__(
        self, has_extractor: bool, state_lock: AbstractContextManager[Any] | None = None
    ) -> None:
        self.has_extractor = has_extractor
        self.pending: ExtractionRequest | None = None
        self.running: ExtractionRequest | None = None
        self._lock = threading.Condition()
        self._state_lock = state_lock if state_lock is not None else nullcontext()
        self._started = 0.0

    def file(self, request: ExtractionRequest) -> None:
        """File ``request``; it replaces a request still waiting to be taken."""
        if not self.has_extractor:
            self.finish(request, ok=True)
            return
        with self._lock:
            if self.pending is not None:
                self.pending.status = "coalesced"
            self.pending = request

    def take(self) -> ExtractionRequest | None:
        """The pending request, now running (None when there is none)."""
        with self._lock:
            request, self.pending = self.pending, None
            if request is not None:
                request.status = "running"
                self.running = request
                self._started = time.monotonic()
            return request

    def finish(self, request: ExtractionRequest, ok: bool, error: str | None = None) -> None:
        """Report the outcome; on success the filer's ``on_success`` advances its state."""
        with self._lock:
            request.status, request.error = ("succeeded", None) if ok else ("failed", error)
            if self.running is request:
                self.running = None
            self._lock.notify_all()
        if ok and request.on_success is not None:
            with self._state_lock:
                request.on_success(request)

    def wait_idle(self, timeout: float, stale_after: float) -> bool:
        """Wait up to ``timeout`` seconds until nothing is pending or running; a run older
        than ``stale_after`` seconds is not waited for. True when idle."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.has_extractor and (self.running or self.pending):
                now = time.monotonic()
                if self.running and now - self._started > stale_after:
                    return False
                if now >= deadline:
                    return False
                self._lock.wait(deadline - now)
        return True
