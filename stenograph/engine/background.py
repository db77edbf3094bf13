"""Background work of a session: one long-lived worker thread per name, started on the
first job and retired after a while without work, so that handing over a job costs a
queue append instead of a thread start."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger("stenograph.engine.background")
IDLE_SECONDS = 30.0


class Worker:
    """Runs jobs one after the other, in submission order, on its own daemon thread."""

    def __init__(self, name: str, idle_seconds: float = IDLE_SECONDS) -> None:
        self.name = name
        self.idle_seconds = idle_seconds
        self._jobs: deque[Callable[[], None]] = deque()
        self._busy = False
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()

    def submit(self, job: Callable[[], None]) -> None:
        """Queue ``job``; start the thread if none is running."""
        with self._cond:
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait until no job is queued or running; True when idle."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._jobs or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    self._cond.wait(self.idle_seconds)
                if not self._jobs:
                    self._thread = None
                    return
                job = self._jobs.popleft()
                self._busy = True
            try:
                job()
            except Exception:  # a job's own failure handling comes first; this is the net
                log.exception("background job of %s failed", self.name)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
