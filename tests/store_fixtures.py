"""Stores for the tests: a folder, an SQLite file, and the real local PostgreSQL and Redis
servers (each test gets its own schema or key prefix, removed afterwards), plus private
Redis and PostgreSQL servers a test may stop hard. A server that cannot be reached or
started skips its tests with the reason, or fails them under
``STENOGRAPH_REQUIRE_SERVERS=1``."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote

import pytest

POSTGRES_URL = os.environ.get(
    "STENOGRAPH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("STENOGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
KINDS = ["file", "sqlite", "postgres", "redis"]
ELSEWHERE = "another-host:1:worker"  # a worker on another machine (it cannot see our pid)


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail when the servers are required."""
    if os.environ.get("STENOGRAPH_REQUIRE_SERVERS") == "1":
        pytest.fail(f"STENOGRAPH_REQUIRE_SERVERS=1 but {reason}")
    pytest.skip(reason)


def taken_elsewhere(store_url: str, session_id: str) -> bool:
    """Whether a worker on another machine gets the session's call lease now (given back
    at once when it does)."""
    from stenograph.stores import CALL, open_store

    storage = open_store(store_url).session(session_id)
    lease = storage.acquire(CALL, ELSEWHERE, 5.0)
    if lease is not None:
        storage.release(lease)
    return lease is not None


def postgres_url(name: str) -> str:
    """A fresh schema on the test PostgreSQL (skips when it is unreachable)."""
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3, autocommit=True) as conn:
            conn.execute(drop_schema(name))
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL at {POSTGRES_URL} is unreachable ({str(exc).strip()[:120]})")
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}schema={name}"


def drop_schema(name: str) -> Any:
    """``DROP SCHEMA IF EXISTS <name> CASCADE``, the name quoted."""
    from psycopg import sql

    return sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))


def redis_url(name: str, base: str = REDIS_URL) -> str:
    """A fresh key prefix on the test Redis (skips when it is unreachable)."""
    try:
        import redis
    except ImportError:
        unavailable("redis-py is not installed (pip install -e '.[redis]')")
    try:
        redis.Redis.from_url(base, socket_connect_timeout=3).ping()
    except redis.exceptions.ConnectionError as exc:
        unavailable(f"Redis at {base} is unreachable ({exc})")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}prefix={name}:"


def drop(url: str) -> None:
    """Remove what a test stored on a server."""
    if url.startswith("postgresql"):
        import psycopg

        schema = unquote(url.rsplit("schema=", 1)[1])
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(drop_schema(schema))
    elif url.startswith("redis"):
        import redis

        prefix = url.rsplit("prefix=", 1)[1]
        client = redis.Redis.from_url(url.split("?")[0])
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)


def make_url(kind: str, tmp_path: Path) -> str:
    """A store URL of ``kind`` private to one test."""
    name = f"t_{secrets.token_hex(5)}"
    if kind == "file":
        return f"file:{tmp_path / 'store'}"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    if kind == "postgres":
        return postgres_url(name)
    return redis_url(name)


@pytest.fixture(params=KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each store in turn."""
    url = make_url(request.param, tmp_path)
    yield url
    if request.param in ("postgres", "redis"):
        drop(url)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedis:
    """A Redis server of the test's own (AOF, fsync always), which it may stop hard."""

    def __init__(self, folder: Path) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            unavailable("redis-server is not installed: cannot start a private server")
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()


def postgres_binaries() -> tuple[str, str]:
    """``initdb`` and ``postgres``: from PATH, else from ``pg_config --bindir``."""
    folders: list[str | None] = [None]
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        run = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        folders.append(run.stdout.strip() or None)
    for folder in folders:
        initdb, postgres = (shutil.which(name, path=folder) for name in ("initdb", "postgres"))
        if initdb is not None and postgres is not None:
            return initdb, postgres
    unavailable(
        "the PostgreSQL server binaries (initdb, postgres) are neither on PATH nor in"
        " `pg_config --bindir`: cannot start a private server"
    )


def unprivileged() -> dict[str, Any]:
    """How to run a PostgreSQL server: as the ``postgres`` user when the tests run as root
    (``initdb`` and ``postgres`` refuse root), else as the tests' own user."""
    if os.geteuid() != 0:
        return {}
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        unavailable(
            "the tests run as root and there is no unprivileged 'postgres' user to run a"
            " private PostgreSQL server as (initdb refuses root)"
        )
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (PostgreSQL backends are each in a session of
    their own, so a process group does not hold them)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = stat.read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if parent == str(pid):
            found.append(int(stat.parent.name))
    return found


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own (a fresh data folder, trust auth, a free
    port), which it may stop hard and start again on the same data."""

    def __init__(self) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            unavailable("psycopg is not installed (pip install -e '.[postgres]')")
        self.initdb, self.postgres = postgres_binaries()
        self.as_user = unprivileged()
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        # the tests' own tmp folder may be private to root: the server's user must reach this
        self.folder = Path(tempfile.mkdtemp(prefix="stenograph-postgres-"))
        self.data = self.folder / "data"
        self.process: subprocess.Popen[bytes] | None = None
        if self.as_user:
            os.chown(self.folder, self.as_user["user"], self.as_user["group"])

    def _initdb(self) -> None:
        run = subprocess.run(
            [self.initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
             "--locale=C", "--no-sync"],
            cwd=self.folder, capture_output=True, text=True, **self.as_user,
        )  # fmt: skip
        if run.returncode != 0:
            raise RuntimeError(f"{self.initdb} failed ({run.returncode}):\n{run.stderr[-800:]}")

    def start(self) -> None:
        """Start the server (a new cluster the first time; after a hard stop, it recovers
        from its WAL); wait until it accepts connections."""
        import psycopg

        if not self.data.exists():
            self._initdb()
        process = self._spawn()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.05)
            if process.poll() is not None:  # the killed backends still held the old memory
                process = self._spawn()
        log_tail = (self.folder / "server.log").read_text(errors="replace")[-800:]
        raise RuntimeError(f"the private PostgreSQL server did not start:\n{log_tail}")

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self.folder / "server.log", "ab") as log:
            self.process = subprocess.Popen(
                [self.postgres, "-D", str(self.data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                 "-c", "shared_buffers=16MB", "-c", "max_connections=20"],
                cwd=self.folder, stdout=log, stderr=log, **self.as_user,
            )  # fmt: skip
        return self.process

    def kill(self) -> None:
        """SIGKILL the server and every backend of it (no shutdown checkpoint)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)  # it starts no new backend meanwhile
        for pid in [*children(self.process.pid), self.process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        """Stop the server if it runs; remove its folder."""
        if self.process is not None and self.process.poll() is None:
            self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started private PostgreSQL server, removed afterwards."""
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.close()


def wait_for_acks(acks: Path, count: int, worker: Any, seconds: float = 60.0) -> None:
    """Wait until a worker has acknowledged ``count`` appends in ``acks`` (and is alive)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert worker.is_alive(), f"the worker died (exit code {worker.exitcode})"
        if acks.exists() and len(acks.read_text().split()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{acks.name}: fewer than {count} acknowledged appends in {seconds} s")
