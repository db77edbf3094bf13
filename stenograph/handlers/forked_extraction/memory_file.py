"""The session-memory file: created once from a template, replaced atomically and only
if nobody changed it meanwhile (compare-and-swap)."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ...engine.files import atomic_write, fsync_dir, private_dir, remove_temp_files
from ...engine.tokens import count_tiktoken

HEADING = re.compile(r"^# .+$", re.MULTILINE)
MAX_NOTES_CHARS = 200_000  # about 4x the 12,000-token budget


class NotesConflict(Exception):
    """The file changed since it was read (compare-and-swap failed)."""


class NotesUnreadable(OSError):
    """The notes file cannot be used as it is (not UTF-8, a symbolic link, ...); the
    message names the file and what to do."""


class NotesRejected(ValueError):
    """New notes that would lose a template heading."""


@dataclass(frozen=True)
class Section:
    """One ``# `` heading and the text under it."""

    heading: str
    body: str

    @property
    def tokens(self) -> int:
        """Estimated tokens of the section (cl100k)."""
        return count_tiktoken(self.heading + "\n" + self.body)


def headings(text: str) -> list[str]:
    """The ``# `` headings of a markdown text, in order."""
    return HEADING.findall(text)


def sections(text: str) -> list[Section]:
    """The text split at its ``# `` headings (text before the first one is dropped)."""
    marks = list(HEADING.finditer(text))
    return [
        Section(m.group(0), text[m.end() : marks[i + 1].start() if i + 1 < len(marks) else None])
        for i, m in enumerate(marks)
    ]


def read_notes(path: Path, max_chars: int = MAX_NOTES_CHARS) -> str:
    """A notes file's text ('' when it does not exist). A symbolic link is never followed,
    only a regular file is read, at most ``max_chars`` characters of it; anything else
    (undecodable bytes too) is a ``NotesUnreadable`` naming the file and what to do."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if os.path.islink(path):
            raise NotesUnreadable(
                f"{path} is a symbolic link; notes are never read through one:"
                " replace it with a regular file or delete it"
            ) from None
        raise NotesUnreadable(f"{path} cannot be read: {exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise NotesUnreadable(f"{path} is not a regular file")
        data = handle.read(4 * max_chars + 1)  # UTF-8: at most 4 bytes a character
    text = None
    if len(data) <= 4 * max_chars:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotesUnreadable(
                f"{path} is not valid UTF-8 (byte {data[exc.start]:#04x} at offset"
                f" {exc.start}): fix the file or delete it (it is recreated from the template)"
            ) from None
    if text is None or len(text) > max_chars:
        raise NotesUnreadable(
            f"{path} holds more than {max_chars:,} characters (the notes cap,"
            " maxNotesChars): shorten the file or delete it"
        )
    return text


class MemoryFile:
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
        present = set(headings(text))
        missing = [h for h in self.required if h not in present]
        if missing:
            raise NotesRejected(f"the new notes lost template headings: {', '.join(missing)}")

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
