"""A notes file (the session-memory file of the folder store and of in-memory sessions):
created once from a template, replaced atomically and only if nobody changed it meanwhile
(compare-and-swap)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..engine.files import atomic_write, fsync_dir, private_dir, remove_temp_files
from ..engine.notes import (
    MAX_NOTES_CHARS,
    NotesConflict,
    NotesUnreadable,
    check_headings,
    headings,
    read_notes,
)
from .file_lock import FileLock


class NotesFile:
    """One notes file; ``template`` lists the headings every version must keep."""

    def __init__(self, path: Path, template: str, max_chars: int = MAX_NOTES_CHARS) -> None:
        self.path = path
        self.template = template
        self.max_chars = max_chars
        self.required = headings(template)

    def ensure(self) -> bool:
        """Create the file from the template, all or nothing: the template is written to a
        temp file (mode 0600, folder 0700) and hard-linked into place, which fails if the
        file exists. Nothing is written when the file is there. Returns True when this call
        created it."""
        if os.path.lexists(self.path):
            return False
        private_dir(self.path.parent)
        fd, tmp = tempfile.mkstemp(
            dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".new"
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(self.template)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(tmp, self.path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        fsync_dir(self.path.parent)
        return True

    def clean(self) -> int:
        """Remove the temp files a writer killed mid-way left beside the file."""
        if not self.path.parent.is_dir():
            return 0
        return remove_temp_files(self.path.parent, f".{self.path.name}.", ".new")

    def read(self) -> str:
        """The current content ('' when the file does not exist); see :func:`read_notes`."""
        return read_notes(self.path, self.max_chars)

    def check(self, text: str) -> None:
        """Refuse notes that drop or rename a template heading."""
        check_headings(self.required, text)

    def replace(self, expected: str, text: str) -> None:
        """Atomically replace the file with ``text`` if it still holds ``expected``
        (under an exclusive lock on ``<file>.lock``, so writers in other processes too
        see a true compare-and-swap)."""
        self.check(text)
        lock = FileLock(self.path.with_name(self.path.name + ".lock"), mode=0o600)
        try:
            lock.acquire()
        except OSError as exc:  # a planted link among them: never followed
            raise NotesUnreadable(
                f"{self.path}.lock cannot be opened ({exc}); a symbolic link is never followed"
            ) from None
        try:
            if self.read() != expected:
                raise NotesConflict(str(self.path))
            atomic_write(self.path, text, mode=0o600)
        finally:
            lock.release()
            lock.close()
