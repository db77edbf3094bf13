"""A compare-and-swap (state, notes, a call's end) whose write landed but whose reply was
lost (the connection cut right after the server answered) is retried and returns what it
wrote, not a conflict. A TCP proxy between the store and the real server drops the
connection at that moment. A connection whose setup failed is closed at once."""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from store_fixtures import POSTGRES_URL, drop, free_port, postgres_url, redis_url

from stenograph.stores import CALL, open_store
from stenograph.stores.base import CallEnd


class CuttingProxy:
    """Forwards TCP bytes to ``upstream``; once armed, the first server reply that
    ``is_reply`` recognises is read but not forwarded, and that connection is cut."""

    def __init__(self, upstream: tuple[str, int], is_reply: Callable[[bytes], bool]) -> None:
        self.upstream, self.is_reply = upstream, is_reply
        self.armed = threading.Event()
        self.cuts = 0
        self.listener = socket.create_server(("127.0.0.1", free_port()))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if replies and self.armed.is_set() and self.is_reply(data):
                    self.armed.clear()
                    self.cuts += 1
                    break
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()


def through(url: str, proxy: CuttingProxy, query: str = "") -> str:
    """``url`` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    netloc[-1] = host
    joined = "&".join(q for q in (parts.query, query) if q)
    return urlunsplit(parts._replace(netloc="@".join(netloc), query=joined))


def is_commit_reply(data: bytes) -> bool:
    """PostgreSQL's CommandComplete for COMMIT."""
    return b"C\x00\x00\x00\x0bCOMMIT\x00" in data


def is_script_reply(data: bytes) -> bool:
    """A RESP integer or array: what the state, notes and call-end scripts return."""
    return data[:1] in (b":", b"*")


@pytest.fixture(params=["postgres", "redis"])
def cut_store(request: pytest.FixtureRequest) -> Iterator[tuple[object, CuttingProxy]]:
    """A store whose connections pass through a cutting proxy."""
    name = f"t_{secrets.token_hex(5)}"
    if request.param == "postgres":
        url = postgres_url(name)
        upstream = urlsplit(POSTGRES_URL)
        proxy = CuttingProxy((upstream.hostname or "", upstream.port or 5432), is_commit_reply)
        store_url = through(url, proxy, "sslmode=disable&gssencmode=disable")
    else:
        url = redis_url(name)
        upstream = urlsplit(url)
        proxy = CuttingProxy((upstream.hostname or "", upstream.port or 6379), is_script_reply)
        store_url = through(url, proxy)
    store = open_store(store_url)
    try:
        yield store, proxy
    finally:
        store.close()
        proxy.close()
        drop(url)


def test_a_state_save_whose_reply_was_lost_reports_its_version(cut_store):
    store, proxy = cut_store
    storage = store.session("s")
    assert storage.save_state({"n": 1}, 0, None) == 1  # connected, scripts loaded
    proxy.armed.set()
    assert storage.save_state({"n": 2}, 1, None) == 2
    assert proxy.cuts == 1
    state, problem, version = storage.load_state()
    assert (state["n"], problem, version) == (2, None, 2)
    assert storage.save_state({"n": 3}, 2, None) == 3  # the next write goes on from there


def test_a_notes_swap_whose_reply_was_lost_reports_its_version(cut_store):
    store, proxy = cut_store
    notes = store.session("s").notes("notes.md", "# Notes\n")
    assert notes.compare_and_swap(0, "# Notes\nfirst\n") == 1
    proxy.armed.set()
    assert notes.compare_and_swap(1, "# Notes\nsecond\n") == 2
    assert proxy.cuts == 1
    assert notes.read() == ("# Notes\nsecond\n", 2)


def test_a_call_end_whose_reply_was_lost_reports_its_positions(cut_store):
    store, proxy = cut_store
    storage = store.session("s")
    record = {"op": "append", "entry": {"uuid": "u1", "role": "user", "content": "hi"}}
    lease = storage.acquire(CALL, "host:1:a", 30.0)
    proxy.armed.set()
    end = CallEnd(records=[record], lines=[], state={"n": 1}, expected=0, lease=lease)
    assert storage.commit(end) == (0, 1, 1)
    assert proxy.cuts == 1
    assert storage.read(0) == ([record], 1)
    assert storage.load_state()[2] == 1
    assert storage.acquire(CALL, "host:2:b", 30.0) is not None  # the lease was given up


def backends_gone(admin: Any, role: str) -> bool:
    """Whether ``role`` has no server process left (one exits a moment after its client
    said goodbye: waited for up to 10 s)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        query = "SELECT count(*) FROM pg_stat_activity WHERE usename = %s"
        if admin.execute(query, (role,)).fetchone() == (0,):
            return True
        time.sleep(0.05)
    return False


def test_a_connection_whose_setup_failed_is_closed():
    import psycopg

    url = postgres_url(f"t_{secrets.token_hex(5)}")
    role = f"t_{secrets.token_hex(5)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")  # it may not create the store's schema
        try:
            parts = urlsplit(url)
            as_role = parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as failed:
                open_store(urlunsplit(as_role)).sessions()
            assert failed.value is not None  # still held: so is what its frames hold
            assert backends_gone(admin, role)
        finally:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            admin.execute(f"DROP ROLE {role}")
