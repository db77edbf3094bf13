"""What the SQL stores share: four tables (sessions, records, leases, notes) and every
step in one transaction that first serializes on the session (SQLite: ``BEGIN
IMMEDIATE``; PostgreSQL: a transaction-scoped advisory lock)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ..engine.notes import MAX_NOTES_CHARS, NotesConflict
from ..engine.store import JOURNAL_BYTES, check_session_id, encode_record
from .base import (
    CallEnd,
    Lease,
    StoredNotes,
    VersionConflict,
    claimed,
    lease_lost,
    new_write_id,
    newer,
    parse_state,
    taken,
    untaken,
    yields_to,
)

log = logging.getLogger("stenograph.stores.sql")
T = TypeVar("T")
TABLES = ("sg_records", "sg_leases", "sg_notes", "sg_writes", "sg_sessions")
SCHEMA = """
CREATE TABLE IF NOT EXISTS sg_sessions (
    id TEXT PRIMARY KEY, state TEXT, version {int} NOT NULL DEFAULT 0, pending TEXT);
CREATE TABLE IF NOT EXISTS sg_records (
    session TEXT NOT NULL, seq {int} NOT NULL, uuid TEXT, body TEXT NOT NULL,
    PRIMARY KEY (session, seq), UNIQUE (session, uuid));
CREATE TABLE IF NOT EXISTS sg_leases (
    session TEXT NOT NULL, kind TEXT NOT NULL, owner TEXT NOT NULL, epoch {int} NOT NULL,
    expires {real} NOT NULL, PRIMARY KEY (session, kind));
CREATE TABLE IF NOT EXISTS sg_notes (
    session TEXT NOT NULL, label TEXT NOT NULL, text TEXT NOT NULL, version {int} NOT NULL,
    PRIMARY KEY (session, label));
CREATE TABLE IF NOT EXISTS sg_writes (
    session TEXT NOT NULL, target TEXT NOT NULL, id TEXT NOT NULL, reply TEXT NOT NULL,
    PRIMARY KEY (session, target));
"""


class SqlStore:
    """A store on one SQL connection (shared, under a lock, by the sessions it opened)."""

    url: str
    placeholder = "?"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._conn: Any = None
        _LIVE.add(self)

    # what a dialect provides -----------------------------------------------------------

    def _connect(self) -> Any:
        raise NotImplementedError

    def _begin(self, conn: Any, write: bool) -> Any:
        """Start a transaction (one that will write when ``write``); returns a cursor."""
        raise NotImplementedError

    def _serialize(self, cur: Any, session_id: str) -> None:
        """Make concurrent writers of one session wait for each other (in the transaction)."""

    def _now(self, cur: Any) -> float:
        return time.time()

    def _retryable(self, exc: BaseException) -> bool:
        return False

    # plumbing --------------------------------------------------------------------------

    def _sql(self, text: str) -> str:
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    @contextmanager
    def tx(self, session_id: str | None = None) -> Iterator[Any]:
        """One transaction (serialized on ``session_id`` when given)."""
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            cur = self._begin(self._conn, session_id is not None)
            try:
                if session_id is not None:
                    self._serialize(cur, session_id)
                yield cur
            except BaseException:
                self._rollback()
                raise
            self._commit()

    def _commit(self) -> None:
        self._conn.execute("COMMIT")

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except Exception:  # a dead connection: reconnect next time
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                log.debug("closing a broken connection failed", exc_info=True)

    def run(self, session_id: str | None, step: Callable[[Any], T]) -> T:
        """``step(cursor)`` in a transaction; a lost connection is reopened and the step
        retried (for up to 30 s), which is safe: appends are idempotent by uuid, and a
        compare-and-swap (:meth:`SqlStorage.swap`) finds its own write when its commit
        landed unheard."""
        deadline = time.monotonic() + 30.0
        while True:
            try:
                with self.tx(session_id) as cur:
                    return step(cur)
            except Exception as exc:
                if not self._retryable(exc) or time.monotonic() > deadline:
                    raise
                log.warning("%s: connection lost (%s); retrying", self.url, exc)
                self._drop()
                time.sleep(0.2)

    def fetchone(self, cur: Any, text: str, *args: Any) -> Any:
        cur.execute(self._sql(text), args)
        return cur.fetchone()

    def execute(self, cur: Any, text: str, *args: Any) -> None:
        cur.execute(self._sql(text), args)

    # Store -----------------------------------------------------------------------------

    def session(self, session_id: str) -> SqlStorage:
        """See :class:`~stenograph.stores.base.Store`."""
        return SqlStorage(self, check_session_id(session_id))

    def sessions(self) -> list[str]:
        """See :class:`~stenograph.stores.base.Store`."""

        def step(cur: Any) -> list[str]:
            cur.execute("SELECT id FROM sg_sessions UNION SELECT session FROM sg_records")
            return sorted({row[0] for row in cur.fetchall()})

        return self.run(None, step)

    def delete(self, session_id: str) -> bool:
        """See :class:`~stenograph.stores.base.Store`."""

        def step(cur: Any) -> bool:
            found = False
            for table in TABLES:
                column = "id" if table == "sg_sessions" else "session"
                cur.execute(self._sql(f"DELETE FROM {table} WHERE {column} = ?"), (session_id,))
                found = found or cur.rowcount > 0
            return found

        return self.run(session_id, step)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._drop()


_LIVE: weakref.WeakSet[SqlStore] = weakref.WeakSet()
_held: list[SqlStore] = []  # the stores whose lock a fork in progress holds
_inherited: list[Any] = []  # a forked child's copies of its parent's connections


def _before_fork() -> None:
    """A fork waits for the transactions in progress (a child must not inherit a lock
    half held: SQLite then refuses it the database) and holds them off until it is done."""
    _held[:] = list(_LIVE)
    for store in _held:
        store._lock.acquire()


def _after_fork_in_parent() -> None:
    for store in reversed(_held):
        store._lock.release()
    _held.clear()


def _after_fork_in_child() -> None:
    """The parent's connections are left alone (closing a copy would end the parent's
    session with the server); a store used in the child connects anew."""
    for store in _held:
        store._lock = threading.RLock()
        _inherited.append(store._conn)
        store._conn = None
    _held.clear()


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)


class SqlStorage:
    """One session in a SQL store."""

    blocks = True  # a database round trip, fsyncs

    def __init__(self, store: SqlStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.location = f"{store.url} session {session_id}"

    def _run(self, step: Callable[[Any], T]) -> T:
        return self.store.run(self.session_id, step)

    def swap(self, target: str, step: Callable[[Any], Any]) -> Any:
        """``step``, a compare-and-swap of ``target`` (``state``, ``call``, ``notes:<label>``),
        under a write id of its own kept with its reply: a retry whose first try committed
        but whose reply was lost with the connection returns that reply, not a conflict."""
        write_id, tries = new_write_id(), 0

        def once(cur: Any) -> Any:
            nonlocal tries
            tries += 1
            row = tries > 1 and self._one(
                cur, "SELECT id, reply FROM sg_writes WHERE session = ? AND target = ?", target
            )
            if row and row[0] == write_id:
                return json.loads(row[1])
            reply = step(cur)
            self._exec(
                cur,
                "INSERT INTO sg_writes (session, target, id, reply) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session, target) DO UPDATE SET id = excluded.id,"
                " reply = excluded.reply",
                target,
                write_id,
                json.dumps(reply),
            )
            return reply

        return self._run(once)

    def _one(self, cur: Any, text: str, *args: Any) -> Any:
        return self.store.fetchone(cur, text, self.session_id, *args)

    def _exec(self, cur: Any, text: str, *args: Any) -> None:
        self.store.execute(cur, text, self.session_id, *args)

    # leases ----------------------------------------------------------------------------

    def acquire(self, kind: str, owner: str, seconds: float) -> Lease | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""

        def step(cur: Any) -> Lease | None:
            now = self.store._now(cur)
            row = self._one(
                cur,
                "SELECT owner, epoch, expires FROM sg_leases WHERE session = ? AND kind = ?",
                kind,
            )
            epoch = 1
            if row is not None:
                holder, held_epoch, expires = row
                live = expires > now
                if live and not yields_to(holder, owner):
                    return None
                epoch = held_epoch + (0 if live and holder == owner else 1)
            self._exec(
                cur,
                "INSERT INTO sg_leases (session, kind, owner, epoch, expires)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session, kind)"
                " DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch,"
                " expires = excluded.expires",
                kind,
                owner,
                epoch,
                now + seconds,
            )
            return Lease(self.session_id, kind, owner, epoch, now + seconds)

        return self._run(step)

    def release(self, lease: Lease) -> None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        self._run(lambda cur: self._release(cur, lease))

    def _release(self, cur: Any, lease: Lease) -> None:
        self._exec(
            cur,
            "UPDATE sg_leases SET owner = '', expires = 0"
            " WHERE session = ? AND kind = ? AND epoch = ? AND owner = ?",
            lease.kind,
            lease.epoch,
            lease.owner,
        )

    def check(self, cur: Any, lease: Lease | None) -> None:
        """Fencing: raise ``LeaseLost`` unless ``lease`` is the current, unexpired one."""
        if lease is None:
            return
        row = self._one(
            cur,
            "SELECT owner, epoch, expires FROM sg_leases WHERE session = ? AND kind = ?",
            lease.kind,
        )
        if row is None or row[1] != lease.epoch or row[0] != lease.owner:
            raise lease_lost(lease, self.location, f"epoch {row and row[1]} took over")
        if row[2] <= self.store._now(cur):
            raise lease_lost(lease, self.location, "the lease expired")

    # journal ---------------------------------------------------------------------------

    def append(
        self,
        records: list[dict[str, Any]],
        lease: Lease | None,
        lines: list[bytes] | None = None,
    ) -> tuple[int, int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        rows = _rows(records, lines)

        def step(cur: Any) -> tuple[int, int]:
            self.check(cur, lease)
            return self._append(cur, records, rows)

        return self._run(step)

    def _append(
        self, cur: Any, records: list[dict[str, Any]], rows: list[tuple[str, str | None]]
    ) -> tuple[int, int]:
        before = seq = self._last(cur)
        for (body, uuid), record in zip(rows, records, strict=True):
            if record.get("op") == "truncate":
                self._free_uuids(cur, record.get("after"))
            if uuid is not None and self._one(
                cur, "SELECT 1 FROM sg_records WHERE session = ? AND uuid = ?", uuid
            ):
                continue
            seq += 1
            self._exec(
                cur,
                "INSERT INTO sg_records (session, seq, uuid, body) VALUES (?, ?, ?, ?)",
                seq,
                uuid,
                body,
            )
        return before, seq

    def commit(self, end: CallEnd) -> tuple[int, int, int]:
        """See :class:`~stenograph.stores.base.SessionStorage` (one transaction)."""
        rows = _rows(end.records, end.lines)

        def step(cur: Any) -> tuple[int, int, int]:
            self.check(cur, end.lease)
            before, after = self._append(cur, end.records, rows)
            version = (
                end.expected if end.state is None else self._save(cur, end.state, end.expected)
            )
            if end.lease is not None:
                self._release(cur, end.lease)
            return before, after, version

        before, after, version = self.swap("call", step)
        return int(before), int(after), int(version)

    def _free_uuids(self, cur: Any, after: str | None) -> None:
        """A truncate frees the uuids of the entries it removes (they may be used again)."""
        start = 0
        if after is not None:
            row = self._one(cur, "SELECT seq FROM sg_records WHERE session = ? AND uuid = ?", after)
            if row is None:
                return
            start = row[0]
        self._exec(
            cur,
            "UPDATE sg_records SET uuid = NULL WHERE session = ? AND seq > ? AND uuid IS NOT NULL",
            start,
        )

    def _last(self, cur: Any) -> int:
        return int(
            self._one(cur, "SELECT COALESCE(MAX(seq), 0) FROM sg_records WHERE session = ?")[0]
        )

    def read(self, after: int) -> tuple[list[dict[str, Any]], int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""

        def step(cur: Any) -> tuple[list[dict[str, Any]], int]:
            self.store.execute(
                cur,
                "SELECT seq, body FROM sg_records WHERE session = ? AND seq > ? ORDER BY seq",
                self.session_id,
                after,
            )
            rows = cur.fetchall()
            return [json.loads(body) for _, body in rows], (rows[-1][0] if rows else after)

        return self.store.run(None, step)

    def position(self) -> int:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        return self.store.run(None, self._last)

    # state -----------------------------------------------------------------------------

    def load_state(self) -> tuple[dict[str, Any], str | None, int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        row = self.store.run(
            None, lambda cur: self._one(cur, "SELECT state, version FROM sg_sessions WHERE id = ?")
        )
        return parse_state(row[0], int(row[1])) if row else ({}, None, 0)

    def save_state(self, state: dict[str, Any], expected: int, lease: Lease | None) -> int:
        """See :class:`~stenograph.stores.base.SessionStorage`."""

        def step(cur: Any) -> int:
            self.check(cur, lease)
            return self._save(cur, state, expected)

        return int(self.swap("state", step))

    def _save(self, cur: Any, state: dict[str, Any], expected: int) -> int:
        row = self._one(cur, "SELECT version FROM sg_sessions WHERE id = ?")
        current = int(row[0]) if row else 0
        if current != expected:
            raise VersionConflict(
                f"{self.location}: the state is at version {current}, not {expected}"
            )
        body = json.dumps({**state, JOURNAL_BYTES: self._last(cur)}, ensure_ascii=False)
        self._exec(
            cur,
            "INSERT INTO sg_sessions (id, state, version) VALUES (?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
            " version = excluded.version",
            body,
            expected + 1,
        )
        return expected + 1

    def keep_aside(self, reason: str) -> str | None:
        """See :class:`~stenograph.stores.base.SessionStorage` (the row stays as it is)."""
        log.warning("%s: %s; the stored state is left as it is", self.location, reason)
        return None

    # notes and extraction jobs ---------------------------------------------------------

    def notes(self, label: str, template: str, max_chars: int = MAX_NOTES_CHARS) -> SqlNotes:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        return SqlNotes(self, label, template, max_chars)

    def set_pending(self, job: dict[str, Any]) -> None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""

        def step(cur: Any) -> None:
            if newer(job, self._pending(cur)):
                self._file(cur, job)

        self._run(step)

    def _file(self, cur: Any, job: dict[str, Any]) -> None:
        self._exec(
            cur,
            "INSERT INTO sg_sessions (id, version, pending) VALUES (?, 0, ?)"
            " ON CONFLICT (id) DO UPDATE SET pending = excluded.pending",
            json.dumps(job),
        )

    def pending(self) -> dict[str, Any] | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        return untaken(self.store.run(None, self._pending))

    def _pending(self, cur: Any) -> dict[str, Any] | None:
        row = self._one(cur, "SELECT pending FROM sg_sessions WHERE id = ?")
        job: dict[str, Any] | None = json.loads(row[0]) if row and row[0] else None
        return job

    def take_pending(self, lease: Lease) -> dict[str, Any] | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""

        def step(cur: Any) -> dict[str, Any] | None:
            self.check(cur, lease)
            job = untaken(self._pending(cur))
            if job is not None:
                mark = json.dumps(taken(job))
                self.store.execute(
                    cur, "UPDATE sg_sessions SET pending = ? WHERE id = ?", mark, self.session_id
                )
            return job

        return self._run(step)

    def claim(self, position: int, lease: Lease) -> bool:
        """See :class:`~stenograph.stores.base.SessionStorage`."""

        def step(cur: Any) -> bool:
            self.check(cur, lease)
            mark = claimed(position, self._pending(cur))
            if mark is not None:
                self._file(cur, mark)
            return mark is not None

        return self._run(step)

    def close(self) -> None:
        """The connection belongs to the store."""


class SqlNotes(StoredNotes["SqlStorage"]):
    """Notes in ``sg_notes``, versioned by a counter."""

    def read(self) -> tuple[str, Any]:
        """The text (the template before any write) and its version."""
        row = self.storage.store.run(
            None,
            lambda cur: self.storage._one(
                cur,
                "SELECT text, version FROM sg_notes WHERE session = ? AND label = ?",
                self.label,
            ),
        )
        return self.found(None, 0) if row is None else self.found(row[0], row[1])

    def compare_and_swap(self, version: Any, text: str, lease: Lease | None = None) -> Any:
        """Replace the notes if they are still at ``version``."""
        self.check(text)

        def step(cur: Any) -> int:
            self.storage.check(cur, lease)
            row = self.storage._one(
                cur, "SELECT version FROM sg_notes WHERE session = ? AND label = ?", self.label
            )
            current = int(row[0]) if row else 0
            if current != version:
                raise NotesConflict(f"{self.label} (version {current}, not {version})")
            self.storage._exec(
                cur,
                "INSERT INTO sg_notes (session, label, text, version) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session, label) DO UPDATE SET text = excluded.text,"
                " version = excluded.version",
                self.label,
                text,
                current + 1,
            )
            return current + 1

        return int(self.storage.swap(f"notes:{self.label}", step))


def _rows(records: list[dict[str, Any]], lines: list[bytes] | None) -> list[tuple[str, str | None]]:
    """Each record's stored body and entry uuid."""
    lines = lines or [encode_record(r) for r in records]
    return [
        (line.decode("utf-8").rstrip("\n"), _uuid(r))
        for line, r in zip(lines, records, strict=True)
    ]


def _uuid(record: dict[str, Any]) -> str | None:
    entry = record.get("entry") if record.get("op") == "append" else None
    uuid = entry.get("uuid") if isinstance(entry, dict) else None
    return uuid if isinstance(uuid, str) else None
