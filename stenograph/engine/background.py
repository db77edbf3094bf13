"""Background work of sessions: per session and name, a queue whose jobs run one after the
other; the threads running them are shared by every session of the process and retire
after a while without work. Handing over a job is a queue append: no thread is started on
a model call's path once the process has run background work (a thread start hands the
GIL back and forth, ~0.1-0.4 ms), and none is woken either (a wake is a system call and,
on a virtual machine, an interrupt to the other CPU: 10-25 µs): an idle thread looks for
work every ``POLL_SECONDS`` and takes it then, unless a host waits for it."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger("stenograph.engine.background")
IDLE_SECONDS = 30.0
POLL_SECONDS = 0.05  # how soon an idle thread takes a task handed over without a wake


class Pool:
    """Daemon threads running tasks in submission order; a thread is started only when no
    idle one is waiting, and retires after ``idle_seconds`` without a task (not when it
    finds a task a thread finishing its own took first). An idle thread looks for tasks
    every ``poll_seconds``, or at once when woken."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, poll_seconds: float = POLL_SECONDS):
        self.idle_seconds = idle_seconds
        self.poll_seconds = poll_seconds
        self._tasks: deque[Callable[[], object]] = deque()
        self._lock = threading.Lock()  # ``run`` takes it directly (see ``Worker``)
        self._cond = threading.Condition(self._lock)
        self._idle = 0
        self.threads: set[threading.Thread] = set()

    def run(self, task: Callable[[], object]) -> None:
        """Queue ``task`` for the next free thread: an idle one takes it within
        ``poll_seconds`` (at once after :meth:`hurry`); with none idle, a thread is started."""
        with self._lock:
            self._tasks.append(task)
            if self._idle >= len(self._tasks):
                return
            thread = threading.Thread(target=self._loop, name="stenograph-background", daemon=True)
            self.threads.add(thread)
        thread.start()

    def hurry(self) -> None:
        """Wake idle threads for the tasks queued (a host waits for them)."""
        with self._lock:
            if self._tasks and self._idle:
                self._cond.notify(len(self._tasks))

    def _loop(self) -> None:
        while True:
            with self._cond:
                idle_since = time.monotonic()
                while not self._tasks:  # a task another thread took first: wait on
                    self._idle += 1
                    self._cond.wait(self.poll_seconds)
                    self._idle -= 1
                    if not self._tasks and time.monotonic() - idle_since >= self.idle_seconds:
                        self.threads.discard(threading.current_thread())
                        return
                task = self._tasks.popleft()
            try:
                task()
            except BaseException:
                with self._cond:
                    self.threads.discard(threading.current_thread())
                raise

    def _after_fork(self) -> None:
        """In a forked child no thread of the parent runs: start from none."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._idle = 0
        self.threads = set()


POOL = Pool()
os.register_at_fork(after_in_child=POOL._after_fork)


class Worker:
    """Runs the jobs handed to it one after the other, in submission order, on ``pool``."""

    def __init__(self, name: str, pool: Pool = POOL) -> None:
        self.name = name
        self._pool = pool
        self._jobs: deque[Callable[[], object]] = deque()
        self._active = False  # a drain is queued or running
        self._lock = threading.Lock()  # taken directly on the call path: Condition's
        self._cond = threading.Condition(self._lock)  # own __enter__ is a Python call

    def submit(self, job: Callable[[], object]) -> None:
        """Queue ``job``; it runs after the jobs submitted before it, handed to the pool
        (which takes it within its poll)."""
        with self._lock:
            self._jobs.append(job)
            if self._active:
                return
            self._active = True
        self._pool.run(self._drain)

    def wait(self, timeout: float) -> bool:
        """Wait until no job is queued or running (what waits for a thread's poll is
        started at once); True when idle."""
        if self._active:
            self._pool.hurry()
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._active:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def _drain(self) -> None:
        threading.current_thread().name = self.name  # for logs naming the thread
        while True:
            with self._cond:
                if not self._jobs:
                    self._active = False
                    self._cond.notify_all()
                    threading.current_thread().name = "stenograph-background"
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # a job's own failure handling comes first; this is the net
                log.exception("background job of %s failed", self.name)
            except BaseException:  # the thread ends; a later submit drains what is left
                with self._cond:
                    self._active = False
                    self._cond.notify_all()
                raise
