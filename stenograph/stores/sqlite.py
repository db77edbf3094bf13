"""``sqlite:///path.db``: many processes on one host share sessions in one database file
(WAL journal, a busy timeout, writers serialized by ``BEGIN IMMEDIATE``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .sql import SCHEMA as SQL_SCHEMA
from .sql import SqlStore

BUSY_TIMEOUT_MS = 30_000
SCHEMA = SQL_SCHEMA.format(int="INTEGER", real="REAL")


class SqliteStore(SqlStore):
    """Sessions in one SQLite database file."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"

    def _connect(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")  # a commit is on disk when it returns
            conn.executescript(SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _begin(self, conn: Any, write: bool) -> Any:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        return conn.cursor()
