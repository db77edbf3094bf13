"""An exclusive lock of a file across processes and threads, reentrant in a thread: what the
folder store takes on every step of a call, and the notes file on every write.

``flock`` on a descriptor kept open between acquisitions (1-3 µs an acquisition, where the
``filelock`` package's took 77-260 µs on the same machines: it reopens the file and runs
its fork and state bookkeeping each time), behind a ``threading.RLock`` for the threads of
one process. The file the descriptor locks is checked to still be the one at the path
after each ``flock``; when it was deleted or replaced meanwhile (a session folder removed
and made again), the path is opened anew. A forked child forgets the descriptors it
inherited (without unlocking them: the parent's lock stands) and opens its own. Symbolic
links are never followed. ``fcntl`` is imported on first use, so that every module imports
where it does not exist."""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from types import TracebackType

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_LOCKS: weakref.WeakSet[FileLock] = weakref.WeakSet()  # forgotten in a forked child


class FileLock:
    """``with FileLock(path):`` holds an exclusive lock of ``path`` (created with ``mode``
    when missing); nested ``with`` blocks of one thread hold it once."""

    def __init__(self, path: str | Path, mode: int = 0o600) -> None:
        self.path = Path(path)
        self.mode = mode
        self._reset()
        _LOCKS.add(self)

    def _reset(self) -> None:
        """No descriptor, no holder (at creation, and in a forked child)."""
        self._thread_lock = threading.RLock()
        self._depth = 0  # nested acquisitions of the holding thread
        self._owner = 0  # that thread's ident
        self._fd = -1
        self._closer: weakref.finalize[..., FileLock] | None = None

    def acquire(self, blocking: bool = True) -> bool:
        """Wait for the lock (the thread holding it already: at once); ``blocking`` False:
        take it only if it is free now. Whether it was taken."""
        if not self._thread_lock.acquire(blocking):
            return False
        try:
            taken = self._depth > 0 or self._lock_file(blocking)
        except BaseException:
            self._thread_lock.release()
            raise
        if not taken:
            self._thread_lock.release()
            return False
        self._depth += 1
        self._owner = threading.get_ident()
        return True

    def release(self) -> None:
        """Let go of one acquisition; the file is unlocked with the last."""
        if self._depth <= 0 or self._owner != threading.get_ident():
            raise RuntimeError(
                f"{self.path}: the lock is released by a thread that does not hold it"
                " (or more often than acquired)"
            )
        try:
            if self._depth == 1:
                import fcntl

                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._depth -= 1
            self._thread_lock.release()

    @property
    def is_locked(self) -> bool:
        """Whether a thread of this process holds the lock."""
        return self._depth > 0

    def close(self) -> None:
        """Close the kept descriptor (when nobody holds the lock; the next acquisition opens
        the file again)."""
        with self._thread_lock:
            if self._depth == 0:
                self._drop()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    def _lock_file(self, blocking: bool) -> bool:
        """``flock`` the file at the path now (the caller holds the thread lock); False
        when ``blocking`` is False and another holder has it."""
        import fcntl

        flags = fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB
        while True:
            if self._fd < 0:
                self._fd = os.open(self.path, _OPEN_FLAGS, self.mode)
                self._closer = weakref.finalize(self, os.close, self._fd)
            try:
                fcntl.flock(self._fd, flags)
            except BlockingIOError:
                return False
            if self._still_there():
                return True
            self._drop()  # unlocked by the close: the path holds another file now

    def _still_there(self) -> bool:
        """Whether the locked descriptor's file is the one at the path."""
        try:
            at_path = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(self._fd)
        return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)

    def _drop(self) -> None:
        """Close the kept descriptor, if any."""
        if self._closer is not None:
            self._closer()
        self._fd, self._closer = -1, None


def _forget_inherited() -> None:
    """In a forked child: close the parent's descriptors (its locks stand) and holders."""
    for lock in list(_LOCKS):
        lock._drop()
        lock._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited)
