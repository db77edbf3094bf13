"""``stenograph.stores.file_lock.FileLock``: exclusive across processes and threads,
reentrant in a thread, the same file as the path even when it was replaced, a forked
child's own, never through a symbolic link, and no descriptor left behind."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time

import pytest

from stenograph.stores.file_lock import FileLock

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork and flock")

PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("held")
"""


def held_elsewhere(path) -> bool:
    """Whether another process finds the file at ``path`` locked."""
    done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() == "held"


def test_another_process_waits_while_any_acquisition_of_a_thread_holds_it(tmp_path):
    lock = FileLock(tmp_path / "s.lock")
    with lock:
        with lock:  # reentrant: held once
            assert lock.is_locked and held_elsewhere(tmp_path / "s.lock")
        assert held_elsewhere(tmp_path / "s.lock")
    assert not lock.is_locked and not held_elsewhere(tmp_path / "s.lock")
    with lock:  # the kept descriptor locks again
        assert held_elsewhere(tmp_path / "s.lock")
    assert (tmp_path / "s.lock").stat().st_mode & 0o777 == 0o600


def test_another_thread_waits_for_the_last_release(tmp_path):
    lock, order = FileLock(tmp_path / "s.lock"), []

    def other() -> None:
        with lock:
            order.append("other")

    with lock, lock:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(0.3)
        assert thread.is_alive() and order == []
        order.append("first")
    thread.join(5)
    assert order == ["first", "other"]


def test_two_locks_of_one_path_in_one_process_exclude_each_other(tmp_path):
    first, second = FileLock(tmp_path / "s.lock"), FileLock(tmp_path / "s.lock")
    got = threading.Event()

    def take() -> None:
        with second:
            got.set()

    with first:
        thread = threading.Thread(target=take)
        thread.start()
        assert not got.wait(0.3)
    assert got.wait(5)
    thread.join(5)


def test_a_replaced_file_is_locked_at_its_path(tmp_path):
    path = tmp_path / "folder" / "s.lock"
    path.parent.mkdir()
    lock = FileLock(path)
    with lock:
        pass
    path.unlink()  # the session folder removed and made again: a new file at the path
    path.write_bytes(b"")
    with lock:
        assert held_elsewhere(path)
    path.unlink()
    with lock:  # deleted and not made again: created anew
        assert path.exists() and held_elsewhere(path)


def test_a_symbolic_link_is_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("keep")
    (tmp_path / "s.lock").symlink_to(outside)
    lock = FileLock(tmp_path / "s.lock")
    with pytest.raises(OSError):
        lock.acquire()
    assert not lock.is_locked and outside.read_text() == "keep"
    with pytest.raises(RuntimeError, match="more often than acquired"):
        lock.release()


def test_only_the_holding_thread_releases_it(tmp_path):
    lock, errors = FileLock(tmp_path / "s.lock"), []

    def release() -> None:
        try:
            lock.release()
        except RuntimeError as exc:
            errors.append(str(exc))

    with lock:
        thread = threading.Thread(target=release)
        thread.start()
        thread.join(5)
        assert lock.is_locked and held_elsewhere(tmp_path / "s.lock")
    assert errors and "does not hold it" in errors[0]


def test_a_forked_child_takes_its_own_lock_and_waits_for_the_parent(tmp_path):
    lock = FileLock(tmp_path / "s.lock")
    read, write = os.pipe()
    with lock:
        pid = os.fork()
        if pid == 0:  # the child: the parent's acquisition is not its own
            try:
                os.close(read)
                with lock:
                    os.write(write, b"got")
            finally:
                os._exit(0)
        os.close(write)
        time.sleep(0.3)
        os.set_blocking(read, False)
        with pytest.raises(BlockingIOError):
            os.read(read, 3)  # still waiting on the parent's lock
        assert held_elsewhere(tmp_path / "s.lock")
    os.set_blocking(read, True)
    assert os.read(read, 3) == b"got"
    assert os.waitpid(pid, 0)[1] == 0
    os.close(read)


def test_no_descriptor_is_left_open(tmp_path):
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd to count descriptors")
    gc.collect()  # what earlier tests let go is closed before counting
    before = open_fds()
    closed = FileLock(tmp_path / "a.lock")
    with closed:
        pass
    closed.close()
    dropped = FileLock(tmp_path / "b.lock")
    with dropped:
        pass
    del dropped
    gc.collect()
    assert open_fds() == before


def test_a_lock_held_elsewhere_is_not_waited_for_when_not_blocking(tmp_path):
    first, second = FileLock(tmp_path / "s.lock"), FileLock(tmp_path / "s.lock")
    assert first.acquire(blocking=False) and first.acquire(blocking=False)  # reentrant
    assert not second.acquire(blocking=False) and not second.is_locked
    first.release()
    assert not second.acquire(blocking=False)
    first.release()
    assert second.acquire(blocking=False)
    second.release()
