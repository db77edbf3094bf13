"""The session notes, as every handler speaking the notes protocol reads them: a markdown
file of ``# `` sections, read safely (never through a symbolic link, bounded in size)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .tokens import count_tiktoken

HEADING = re.compile(r"^# .+$", re.MULTILINE)
MAX_NOTES_CHARS = 200_000  # about 4x the 12,000-token budget


class NotesUnreadable(OSError):
    """The notes file cannot be used as it is (not UTF-8, a symbolic link, ...); the
    message names the file and what to do."""


class NotesConflict(Exception):
    """The notes changed since they were read (compare-and-swap failed)."""


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


def check_headings(required: Sequence[str], text: str) -> None:
    """Refuse notes that drop or rename one of the ``required`` (template) headings."""
    present = set(headings(text))
    missing = [h for h in required if h not in present]
    if missing:
        raise NotesRejected(f"the new notes lost template headings: {', '.join(missing)}")


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
