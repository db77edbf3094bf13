"""``postgresql://user@host:port/db[?schema=name]`` (extra ``[postgres]``, psycopg 3):
sessions shared by workers on many machines. Every write step is one transaction that
first takes a transaction-scoped advisory lock on the session; lease times are the
server's clock, so the workers' clocks need not agree."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .base import StoreError
from .sql import SCHEMA as SQL_SCHEMA
from .sql import SqlStore

MAX_NAME_BYTES = 63  # PostgreSQL cuts a longer identifier short (NAMEDATALEN - 1)
SCHEMA = SQL_SCHEMA.format(int="BIGINT", real="DOUBLE PRECISION")


class PostgresStore(SqlStore):
    """Sessions in PostgreSQL tables (in ``schema``, default ``public``)."""

    placeholder = "%s"

    def __init__(self, url: str) -> None:
        try:
            import psycopg
            import psycopg.sql
        except ImportError:
            raise StoreError(
                f"store URL {url!r} needs psycopg: pip install 'stenograph[postgres]'"
            ) from None
        super().__init__()
        self._psycopg = psycopg
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.schema = query.pop("schema", "public")
        if not 0 < len(self.schema.encode()) <= MAX_NAME_BYTES or "\x00" in self.schema:
            raise StoreError(
                f"store URL {url!r}: schema {self.schema!r} must be 1-{MAX_NAME_BYTES} bytes"
                " of UTF-8 without NUL (PostgreSQL's limit; any such name works, it is quoted)"
            )
        self.url = url
        self._dsn = urlunsplit(parts._replace(query=urlencode(query)))

    def _connect(self) -> Any:
        conn = self._psycopg.connect(self._dsn, autocommit=True, connect_timeout=10)
        try:
            with conn.transaction():  # IF NOT EXISTS alone races between first connections
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('stenograph schema'))")
                schema = self._psycopg.sql.Identifier(self.schema)
                conn.execute(self._psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
                conn.execute(self._psycopg.sql.SQL("SET search_path TO {}").format(schema))
                conn.execute(SCHEMA)
        except BaseException:
            conn.close()  # not left open on the server until the error is collected
            raise
        return conn

    def _begin(self, conn: Any, write: bool) -> Any:
        conn.execute("BEGIN")
        return conn.cursor()

    def _serialize(self, cur: Any, session_id: str) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (session_id,))

    def _now(self, cur: Any) -> float:
        cur.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8")
        return float(cur.fetchone()[0])

    def _retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, self._psycopg.OperationalError | self._psycopg.InterfaceError)
