"""Persisted session state: an append-only journal of entries and marks, and a small
``state.json`` (handler state) replaced atomically.

Durability contract: a journal record is written whole or not at all (a failed write is
cut back off the file and raised); it is in the operating system when ``append`` returns
(a killed process loses nothing acknowledged); the journal is fsynced before every state
save, and the state records the journal length it refers to, so the state is never ahead
of the journal: if it is at open (the journal lost its tail), the session reconciles.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .entries import SURELY_IN_RANGE, Entry, EntryError
from .files import atomic_write, private_dir, remove_temp_files
from .speedups import C

log = logging.getLogger("stenograph.engine.store")
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
STATE_VERSION = 1
JOURNAL_BYTES = "journalBytes"
MAX_JSON_DEPTH = 200  # deeper content is checked by encoding it
_BIGGEST_INT = 10**4000  # str() of a longer int is refused (sys.get_int_max_str_digits)
BLANK = " \t\n\r\v\f"  # what ``bytes.strip`` takes off (``str.strip`` takes more)
# json.loads's own parser, without its layers
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def check_session_id(session_id: str) -> str:
    """Session ids name folders: letters, digits, ``.``, ``_``, ``-`` (no ``..``)."""
    if not isinstance(session_id, str) or not SESSION_ID.match(session_id) or ".." in session_id:
        raise ValueError(
            f"invalid session id {session_id!r}: use 1-200 letters, digits, '.', '_' or '-'"
            " (no '..')"
        )
    return session_id


def encode_record(record: dict[str, Any]) -> bytes:
    """One journal line: compact JSON, UTF-8. Anything JSON cannot hold (bytes, a set, a
    datetime, NaN, a lone surrogate, nesting too deep) is an ``EntryError`` naming the field."""
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return (text + "\n").encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError included
        body = record.get("entry", record)
        raise EntryError(f"{json_problem(body)} ({type(exc).__name__})") from None


def parse_line(line: str) -> Any:
    """``json.loads(line)`` of a journal line (an object, then its line end at most),
    read straight by the parser; any other line goes through ``json.loads`` itself, so a
    bad one fails as it would there."""
    if line[0] == "{":
        try:
            value, end = _scan(line, 0)
        except (StopIteration, ValueError, RecursionError):
            pass
        else:
            if end == len(line) or (end == len(line) - 1 and line[end] == "\n"):
                return value
    return json.loads(line)


def check_json(record: dict[str, Any]) -> None:
    """Raise the ``EntryError`` :func:`encode_record` would, without encoding: what an
    in-memory session checks (a walk over the values, several times cheaper than encoding;
    what the walk cannot vouch for is encoded, so the two accept the same records)."""
    if not _json_ok(record, 0):
        encode_record(record)


def check_entry(entry: Entry) -> None:
    """:func:`check_json` of the entry's journal record, without building the record unless
    a part of it needs a closer look (what an in-memory session checks per append)."""
    stamp, meta = entry.timestamp, entry._meta
    if (
        _json_ok(entry.content, 2)
        and (meta is None or _json_ok(meta, 2))
        and _json_ok(entry.uuid, 2)
        and (stamp is None or SURELY_IN_RANGE[0] < stamp < SURELY_IN_RANGE[1])
    ):
        return
    check_json({"op": "append", "entry": entry.to_record()})


def _is_json(value: Any, depth: int) -> bool:
    """Whether ``json.dumps`` (no NaN) and UTF-8 take ``value``; False when unsure. Exact
    types only (a subclass, a tuple, a key that is not a string: unsure). Text, the usual
    item, is checked in the loop rather than by a call per item."""
    kind = type(value)
    if kind is dict:
        for key in value:
            if type(key) is not str or not (key.isascii() or _is_utf8(key)):
                return False
        items: Any = value.values()
    elif kind is list:
        items = value
    elif kind is str:
        return value.isascii() or _is_utf8(value)
    elif kind is int:
        return bool(-_BIGGEST_INT < value < _BIGGEST_INT)
    elif kind is float:
        return math.isfinite(value)
    else:
        return value is None or kind is bool
    if depth > MAX_JSON_DEPTH:
        return False
    for item in items:
        if type(item) is str:
            if not (item.isascii() or _is_utf8(item)):
                return False
        elif not _is_json(item, depth + 1):
            return False
    return True


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_json_ok: Callable[[Any, int], bool] = _is_json if C is None else C.is_json


def json_problem(value: Any, path: str = "", depth: int = 0) -> str:
    """Where and why ``value`` is not JSON, e.g. ``content[0].input.data: bytes is not JSON``."""
    where = path or "message"
    if depth > MAX_JSON_DEPTH:
        return f"{where}: nested too deeply"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}: key {key!r} is not a string"
            found = json_problem(item, f"{path}.{key}" if path else key, depth + 1)
            if found:
                return found
        return ""
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = json_problem(item, f"{path}[{i}]", depth + 1)
            if found:
                return found
        return ""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{where}: text holds a lone surrogate {value[exc.start]!r} (not UTF-8)"
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value!r} is not a JSON number"
    if value is None or isinstance(value, bool | int | float):
        return ""
    return f"{where}: {type(value).__name__} is not JSON (use str, number, list or dict)"


def write_fd(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (the one place journal bytes are written)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class SessionStore:
    """The files of one session under ``<state_dir>/<session_id>/``."""

    def __init__(self, folder: Path) -> None:
        self.folder = private_dir(folder)
        self.journal_path = folder / "journal.jsonl"
        self.state_path = folder / "state.json"
        self._fd: int | None = None
        self._size = 0  # bytes of whole records in the journal
        self._dirty = False  # a failed write could not be cut back yet
        self.remove_leftovers()

    def remove_leftovers(self) -> None:
        """Delete the temp files a state writer killed mid-write left."""
        remove_temp_files(self.folder, f".{self.state_path.name}.", ".tmp")

    def journal_size(self) -> int:
        """Bytes in the journal now."""
        if self._fd is not None:
            return self._size
        try:
            return self.journal_path.stat().st_size
        except FileNotFoundError:
            return 0

    def read_journal(self) -> Iterator[dict[str, Any]]:
        """Every valid journal record, one at a time (never all parsed records at once); a
        torn or corrupt line is skipped with a warning."""
        if not self.journal_path.exists():
            return
        with self.journal_path.open(encoding="utf-8", errors="replace") as handle:
            for lineno, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except (json.JSONDecodeError, RecursionError) as exc:
                    log.warning(
                        "%s:%d: skipped a corrupt journal line (%s)",
                        self.journal_path,
                        lineno,
                        type(exc).__name__,
                    )
                    continue
                if isinstance(record, dict) and "op" in record:
                    yield record

    def read_state(self) -> tuple[dict[str, Any], str | None]:
        """The saved state (empty when there is none), and why it was unusable if it was."""
        try:
            state = json.loads(self.state_path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            return {}, None
        except (OSError, ValueError, RecursionError) as exc:  # undecodable bytes, bad JSON
            return {}, f"{type(exc).__name__}: {exc}"
        if not isinstance(state, dict):
            return {}, f"the top level is {type(state).__name__}, not an object"
        return state, None

    def append(self, record: dict[str, Any]) -> None:
        """Append one record (see :meth:`write`)."""
        self.write(encode_record(record))

    def write(self, line: bytes) -> None:
        """Append one encoded record, whole or not at all: when the write fails (ENOSPC,
        EIO, ...) the journal is cut back to its last whole record and the error raised."""
        fd = self._open()
        if self._dirty:
            self._cut_back(fd)
        try:
            write_fd(fd, line)
        except OSError:
            self._dirty = True
            self._cut_back(fd)
            raise
        self._size += len(line)

    def _open(self) -> int:
        if self._fd is None:
            self._repair_tail()
            fd = os.open(
                self.journal_path,
                os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            os.fchmod(fd, 0o600)
            self._size, self._fd = os.fstat(fd).st_size, fd
        return self._fd

    def _cut_back(self, fd: int) -> None:
        try:
            os.ftruncate(fd, self._size)
        except OSError as exc:
            log.error("%s: a failed write could not be cut back yet (%s)", self.journal_path, exc)
            return
        self._dirty = False

    def _repair_tail(self) -> None:
        """A crash may leave a line without its newline: end it so the next record is whole."""
        if self.journal_path.exists() and self.journal_path.stat().st_size:
            with self.journal_path.open("rb+") as handle:
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")

    def sync(self) -> None:
        """Make the journal durable (fsync)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def save_state(self, state: dict[str, Any]) -> None:
        """Fsync the journal, then replace ``state.json`` atomically, recording the journal
        length it refers to."""
        self.sync()
        record = {"version": STATE_VERSION, **state, JOURNAL_BYTES: self.journal_size()}
        atomic_write(self.state_path, json.dumps(record, ensure_ascii=False, indent=1))

    def keep_aside(self, reason: str) -> Path | None:
        """Copy ``state.json`` to ``state.json.bad-<n>`` (kept for the user); its path."""
        if not self.state_path.exists():
            return None
        n = 1
        while (aside := self.state_path.with_name(f"{self.state_path.name}.bad-{n}")).exists():
            n += 1
        aside.write_bytes(self.state_path.read_bytes())
        os.chmod(aside, 0o600)
        log.warning("%s: %s; a copy is kept in %s", self.state_path, reason, aside)
        return aside

    def close(self) -> None:
        """Fsync and close the journal file."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
