"""The folder store (``file:DIR``, the default): one folder per session holding the journal
(``journal.jsonl``), the state (``state.json``), the notes file, and the leases
(``lease.json``); every fenced step runs under an exclusive lock of ``session.lock``, so
several processes on one host share a session safely."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..engine.files import atomic_write, private_dir
from ..engine.notes import MAX_NOTES_CHARS
from ..engine.store import BLANK, SessionStore, check_session_id, encode_record, log, parse_line
from .base import (
    CallEnd,
    Lease,
    VersionConflict,
    claimed,
    lease_lost,
    newer,
    taken,
    untaken,
    yields_to,
)
from .file_lock import FileLock
from .notes_file import NotesFile

STATE_VERSION_KEY = "stateVersion"


class FolderStorage(SessionStore):
    """One session's folder."""

    blocks = True  # fsyncs

    def __init__(self, folder: Path, session_id: str) -> None:
        self._file_lock = FileLock(private_dir(folder) / "session.lock", mode=0o600)
        super().__init__(folder)
        self.session_id = session_id
        self.location = str(self.state_path)
        self._uuids: dict[str, None] = {}  # stored entry uuids, in journal order
        self._indexed = 0  # journal bytes whose entry uuids are in _uuids

    def remove_leftovers(self) -> None:
        """Under the lock: another process's state writer is never mid-write then."""
        with self._locked():
            super().remove_leftovers()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The session's exclusive lock across processes (reentrant)."""
        with self._file_lock:
            yield

    # leases ----------------------------------------------------------------------------

    def _leases(self) -> dict[str, Any]:
        try:
            found = json.loads((self.folder / "lease.json").read_bytes())
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _write_leases(self, leases: dict[str, Any]) -> None:
        """Rewrite ``lease.json`` in place (every reader holds the session lock): one write
        of the whole file, padded with spaces to its size, so that no older tail is left
        and no truncation a kill could cut short follows. No fsync: a lease need not
        outlive a crash. (A temp file renamed over it cost ~10x as much.)"""
        data = json.dumps(leases).encode()
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
        fd = os.open(self.folder / "lease.json", flags, 0o600)
        try:
            os.pwrite(fd, data.ljust(os.fstat(fd).st_size), 0)
        finally:
            os.close(fd)

    def acquire(self, kind: str, owner: str, seconds: float) -> Lease | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        with self._locked():
            leases, now = self._leases(), time.time()
            held = leases.get(kind) or {}
            live = held.get("expires", 0) > now
            if live and not yields_to(held.get("owner", ""), owner):
                return None
            epoch = int(held.get("epoch", 0)) + (0 if live and held.get("owner") == owner else 1)
            leases[kind] = {"owner": owner, "epoch": epoch, "expires": now + seconds}
            self._write_leases(leases)
            return Lease(self.session_id, kind, owner, epoch, now + seconds)

    def release(self, lease: Lease) -> None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        with self._locked():
            leases = self._leases()
            held = leases.get(lease.kind) or {}
            if held.get("epoch") == lease.epoch and held.get("owner") == lease.owner:
                leases[lease.kind] = {**held, "owner": "", "expires": 0}
                self._write_leases(leases)

    def _check(self, lease: Lease | None) -> None:
        if lease is None:
            return
        held = self._leases().get(lease.kind) or {}
        if held.get("epoch") != lease.epoch or held.get("owner") != lease.owner:
            raise lease_lost(lease, self.location, f"epoch {held.get('epoch')} took over")
        if held.get("expires", 0) <= time.time():
            raise lease_lost(lease, self.location, "the lease expired")

    # journal ---------------------------------------------------------------------------

    def append(  # type: ignore[override]
        self,
        records: list[dict[str, Any]],
        lease: Lease | None,
        lines: list[bytes] | None = None,
    ) -> tuple[int, int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        if lines is None:
            lines = [encode_record(r) for r in records]  # checked before anything is written
        with self._locked():
            self._check(lease)
            fd = self._open()
            before = self._size = os.fstat(fd).st_size
            if self._indexed < before:
                self.read(self._indexed)
            several = len(records) > 1 or records[0].get("op") == "truncate"
            uuids = dict(self._uuids) if several else None  # changed only once written
            fresh, kept = [], []
            for line, record in zip(lines, records, strict=True):
                uuid = _entry_uuid(record)
                if uuid is not None and uuid in (self._uuids if uuids is None else uuids):
                    continue  # stored already: a retry
                fresh.append(line)
                kept.append(record)
                if uuids is not None:
                    index_uuid(uuids, record)
            if fresh:
                self.write(b"".join(fresh))
                if uuids is None:
                    for record in kept:
                        index_uuid(self._uuids, record)
                else:
                    self._uuids = uuids
                self._indexed = self._size
            return before, self._size

    def read(self, after: int) -> tuple[list[dict[str, Any]], int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        records: list[dict[str, Any]] = []
        return records, self.replay(after, records.append)

    def replay(self, after: int, apply: Callable[[dict[str, Any]], object]) -> int:
        """:meth:`read`, each record handed to ``apply`` as soon as it is parsed (none
        are held: what is applied while its line is fresh costs less); the position
        after them."""
        index = after == self._indexed  # the stored uuids follow what is read
        try:
            with self._locked(), self.journal_path.open("rb") as handle:
                handle.seek(after)
                # whole lines, under the lock (a line without its end is torn), parsed as
                # they are read: the journal is never held in memory at once
                lines = io.TextIOWrapper(handle, "utf-8", "replace", newline="\n")
                for record in self._parse(lines):
                    if index:
                        index_uuid(self._uuids, record)
                    apply(record)
                end = handle.tell()
                lines.detach()  # the handle is closed by its own block
        except FileNotFoundError:
            return 0
        if index:
            self._indexed = end
        return end

    def _parse(self, lines: Iterable[str]) -> Iterator[dict[str, Any]]:
        """The journal records of ``lines``; a corrupt line is skipped with a warning."""
        for line in lines:
            if line[0] != "{" and not line.strip(BLANK):
                continue
            try:
                record = parse_line(line)
            except (ValueError, RecursionError) as exc:
                log.warning(
                    "%s: skipped a corrupt journal line (%s)", self.journal_path, type(exc).__name__
                )
                continue
            if isinstance(record, dict) and "op" in record:
                yield record

    def position(self) -> int:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        return self.journal_size()

    # state -----------------------------------------------------------------------------

    def load_state(self) -> tuple[dict[str, Any], str | None, int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        state, problem = self.read_state()
        return state, problem, _version(state)

    def save_state(  # type: ignore[override]
        self, state: dict[str, Any], expected: int = 0, lease: Lease | None = None
    ) -> int:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        with self._locked():
            self._check(lease)
            self._expect(expected)
            super().save_state({**state, STATE_VERSION_KEY: expected + 1})
            return expected + 1

    def _expect(self, expected: int) -> None:
        current = _version(self.read_state()[0])
        if current != expected:
            raise VersionConflict(
                f"{self.state_path}: the state is at version {current}, not {expected}"
            )

    def commit(self, end: CallEnd) -> tuple[int, int, int]:
        """See :class:`~stenograph.stores.base.SessionStorage` (under the session lock)."""
        with self._locked():
            self._check(end.lease)
            if end.state is not None:
                self._expect(end.expected)  # checked first: nothing is written on a conflict
            span = (self.position(),) * 2
            if end.records:
                span = self.append(end.records, end.lease, end.lines or None)
            version = end.expected
            if end.state is not None:
                version = self.save_state(end.state, end.expected, end.lease)
            if end.lease is not None:
                self.release(end.lease)
            return span[0], span[1], version

    def keep_aside(self, reason: str) -> str | None:  # type: ignore[override]
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        aside = super().keep_aside(reason)
        return str(aside) if aside else None

    # notes and extraction jobs ---------------------------------------------------------

    def notes(self, label: str, template: str, max_chars: int = MAX_NOTES_CHARS) -> FileNotes:
        """The notes file ``label``: a bare file name is in the session folder, any other
        label is the file's path."""
        path = Path(label)
        path = self.folder / path if len(path.parts) == 1 else path
        return FileNotes(path, template, self, max_chars)

    def set_pending(self, job: dict[str, Any]) -> None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        with self._locked():
            if newer(job, self._filed()):
                atomic_write(self.folder / "pending.json", json.dumps(job))

    def pending(self) -> dict[str, Any] | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        return untaken(self._filed())

    def _filed(self) -> dict[str, Any] | None:
        try:
            job = json.loads((self.folder / "pending.json").read_bytes())
        except (OSError, ValueError):
            return None
        return job if isinstance(job, dict) else None

    def take_pending(self, lease: Lease) -> dict[str, Any] | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        with self._locked():
            self._check(lease)
            job = self.pending()
            if job is not None:
                atomic_write(self.folder / "pending.json", json.dumps(taken(job)))
            return job

    def claim(self, position: int, lease: Lease) -> bool:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        with self._locked():
            self._check(lease)
            mark = claimed(position, self._filed())
            if mark is not None:
                atomic_write(self.folder / "pending.json", json.dumps(mark))
            return mark is not None

    def close(self) -> None:
        """Close the journal and the lock's descriptor."""
        super().close()
        self._file_lock.close()


class FileNotes:
    """A notes file; its version is its content (the compare of a compare-and-swap)."""

    def __init__(
        self,
        path: Path,
        template: str,
        storage: FolderStorage | None = None,
        max_chars: int = MAX_NOTES_CHARS,
    ) -> None:
        self.memory = NotesFile(path, template, max_chars)
        self.label = str(path)
        self._storage = storage

    def read(self) -> tuple[str, Any]:
        """The text and its version; a missing file is first created from the template
        (a reader without a template creates nothing)."""
        if self.memory.template:
            self.memory.ensure()
        text = self.memory.read()
        return text, text

    def compare_and_swap(self, version: Any, text: str, lease: Lease | None = None) -> Any:
        """Replace the file if it still holds ``version``."""
        if self._storage is None or lease is None:
            self.memory.replace(version, text)
            return text
        with self._storage._locked():
            self._storage._check(lease)
            self.memory.replace(version, text)
        return text


class FolderStore:
    """``file:DIR``: a folder per session under ``root``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.url = f"file:{self.root}"

    def session(self, session_id: str) -> FolderStorage:
        """See :class:`~stenograph.stores.base.Store`."""
        return FolderStorage(self.root / check_session_id(session_id), session_id)

    def sessions(self) -> list[str]:
        """See :class:`~stenograph.stores.base.Store`."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir() and ((p / "journal.jsonl").exists() or (p / "state.json").exists())
        )

    def delete(self, session_id: str) -> bool:
        """See :class:`~stenograph.stores.base.Store`."""
        folder = self.root / check_session_id(session_id)
        if not folder.is_dir():
            return False
        shutil.rmtree(folder)
        return True

    def close(self) -> None:
        """Nothing is held open by the store itself."""


def index_uuid(uuids: dict[str, None], record: dict[str, Any]) -> None:
    """Follow ``record`` in the ordered set of stored entry uuids: an append adds its
    entry's, a truncate frees those of the entries it removed (their names are reusable)."""
    uuid = _entry_uuid(record)
    if uuid is not None:
        uuids[uuid] = None
    elif record.get("op") == "truncate":
        after = record.get("after")
        if after is not None and after not in uuids:
            return
        order = list(uuids)
        for gone in order[order.index(after) + 1 if after is not None else 0 :]:
            del uuids[gone]


def _entry_uuid(record: dict[str, Any]) -> str | None:
    if record.get("op") != "append":
        return None
    entry = record.get("entry")
    uuid = entry.get("uuid") if isinstance(entry, dict) else None
    return uuid if isinstance(uuid, str) else None


def _version(state: dict[str, Any]) -> int:
    version = state.get(STATE_VERSION_KEY, 0)
    return version if isinstance(version, int) and version >= 0 else 0
