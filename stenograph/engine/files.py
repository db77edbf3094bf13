"""Durable file writes."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def atomic_write(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves the old or the new file, whole:
    write a temp file in the same folder, fsync it, rename it over, fsync the folder."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename inside ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def private_dir(folder: Path) -> Path:
    """Create ``folder`` (and parents); the last level gets mode 0700, also when it existed."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_mode & 0o777 != 0o700:
        os.chmod(folder, 0o700)
    return folder


def remove_temp_files(folder: Path, prefix: str, suffix: str) -> int:
    """Delete the temp files a killed writer left in ``folder`` (``<prefix>*<suffix>``)."""
    removed = 0
    for leftover in folder.glob(f"{prefix}*{suffix}"):
        if leftover.is_file() and not leftover.is_symlink():
            leftover.unlink(missing_ok=True)
            removed += 1
    return removed


def home_path(value: str) -> Path:
    """``value`` as a path with a leading ``~`` or ``~user`` expanded; a user this machine
    does not know (or no home folder) is a ``ValueError`` saying so."""
    try:
        return Path(value).expanduser()
    except RuntimeError:
        user = value[1:].split("/", 1)[0]
        who = f"no user named {user!r}" if user else "no home folder is known"
        raise ValueError(
            f"{who}: a path starting with ~{user} names that user's home folder"
        ) from None


def read_small_text(path: Path, max_bytes: int = 1_000_000) -> str:
    """A regular UTF-8 text file of at most ``max_bytes``; anything else (a device, a FIFO,
    a folder, a bigger or undecodable file) is an ``OSError``/``ValueError`` saying so,
    without blocking or reading more than ``max_bytes + 1`` bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError("not a regular file")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {data[exc.start]:#04x} at {exc.start})") from None
