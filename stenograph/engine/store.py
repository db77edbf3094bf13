"""Persisted session state: an append-only journal of entries and marks, and a small
``state.json`` (handler state) replaced atomically."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from .files import atomic_write, private_dir

log = logging.getLogger("stenograph.engine.store")
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
STATE_VERSION = 1


def check_session_id(session_id: str) -> str:
    """Session ids name folders: letters, digits, ``.``, ``_``, ``-`` (no ``..``)."""
    if not isinstance(session_id, str) or not SESSION_ID.match(session_id) or ".." in session_id:
        raise ValueError(
            f"invalid session id {session_id!r}: use 1-200 letters, digits, '.', '_' or '-'"
        )
    return session_id


class SessionStore:
    """The files of one session under ``<state_dir>/<session_id>/``."""

    def __init__(self, folder: Path) -> None:
        self.folder = private_dir(folder)
        self.journal_path = folder / "journal.jsonl"
        self.state_path = folder / "state.json"
        self._journal = None

    def read_journal(self) -> list[dict[str, Any]]:
        """Every valid journal record; a torn or corrupt line is skipped with a warning."""
        if not self.journal_path.exists():
            return []
        records = []
        with self.journal_path.open(encoding="utf-8", errors="replace") as handle:
            for lineno, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    log.warning("%s:%d: skipped a corrupt journal line", self.journal_path, lineno)
                    continue
                if isinstance(record, dict) and "op" in record:
                    records.append(record)
        return records

    def read_state(self) -> dict[str, Any]:
        """The saved state, or an empty one."""
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as exc:
            log.warning(
                "%s unreadable (%s); starting with empty handler state", self.state_path, exc
            )
            return {}
        return state if isinstance(state, dict) else {}

    def append(self, record: dict[str, Any]) -> None:
        """Append one record to the journal (flushed; one line per record)."""
        if self._journal is None:
            self._repair_tail()
            self._journal = self.journal_path.open("a", encoding="utf-8")
        self._journal.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._journal.flush()

    def _repair_tail(self) -> None:
        """A crash may leave a line without its newline: end it so the next record is whole."""
        if self.journal_path.exists() and self.journal_path.stat().st_size:
            with self.journal_path.open("rb+") as handle:
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")

    def save_state(self, state: dict[str, Any]) -> None:
        """Replace ``state.json`` atomically."""
        text = json.dumps({"version": STATE_VERSION, **state}, ensure_ascii=False, indent=1)
        atomic_write(self.state_path, text)

    def close(self) -> None:
        """Close the journal file."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
