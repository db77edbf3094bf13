"""A process forked while another thread is inside a SQLite transaction (a process pool
started by a notes job while the host commits its call, say) can use the database: the
fork waits for the transaction, so the child does not inherit a half-held lock."""

from __future__ import annotations

import os
import threading
import time

import pytest

from stenograph.stores import open_store

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def test_a_child_forked_during_a_transaction_can_write(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    store.session("a").append([{"op": "notes", "path": "n", "upto_uuid": "u"}], None)
    inside = threading.Event()

    def hold() -> None:
        with store.tx("a"):  # type: ignore[attr-defined]
            inside.set()
            time.sleep(0.5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(5)
    pid = os.fork()
    if pid == 0:  # the child: its own store, as a pool worker opens one
        code = 1
        try:
            child = open_store(url)
            child.session("b").append([{"op": "notes", "path": "n", "upto_uuid": "v"}], None)
            code = 0
        finally:
            os._exit(code)
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    records, _ = open_store(url).session("b").read(0)
    assert [r["upto_uuid"] for r in records] == ["v"]
    store.close()
