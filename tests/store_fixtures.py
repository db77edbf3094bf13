"""Stores for the tests: a folder, an SQLite file, and the real local PostgreSQL and Redis
servers (each test gets its own schema or key prefix, removed afterwards). A server that
cannot be reached skips its tests with the reason, or fails them under
``STENOGRAPH_REQUIRE_SERVERS=1``."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES_URL = os.environ.get(
    "STENOGRAPH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("STENOGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
KINDS = ["file", "sqlite", "postgres", "redis"]


def unavailable(reason: str) -> None:
    """Skip, or fail when the servers are required."""
    if os.environ.get("STENOGRAPH_REQUIRE_SERVERS") == "1":
        pytest.fail(f"STENOGRAPH_REQUIRE_SERVERS=1 but {reason}")
    pytest.skip(reason)


def postgres_url(name: str) -> str:
    """A fresh schema on the test PostgreSQL (skips when it is unreachable)."""
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL at {POSTGRES_URL} is unreachable ({str(exc).strip()[:120]})")
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}schema={name}"


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

        schema = url.rsplit("schema=", 1)[1]
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
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
