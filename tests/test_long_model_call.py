"""A model call longer than ``lease_seconds`` loses nothing: the call's lease is renewed
while the model call runs (up to ``call_seconds``), so no other worker takes the session
meanwhile; past ``call_seconds`` it lapses, is taken up again at post-sampling when nobody
held it meanwhile, and only a worker that did go ahead with the session makes the late
response ``LeaseLost``."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
import store_workers
from store_fixtures import PrivateRedis, drop, redis_url, taken_elsewhere

import stenograph
from stenograph.stores import LeaseLost, SessionBusy
from stenograph.stores.renewal import KEEPER

LEASE = 0.3  # seconds; the "model call" below outlasts it
KEPT = 1.0  # the lease of a call that is kept: renewed every 1/3 s, slack for a loaded machine


@pytest.fixture
def engine(tmp_path: Path) -> stenograph.Engine:
    path = tmp_path / "bare.toml"
    path.write_text('name = "bare"\n')
    return stenograph.Engine.from_preset(path)


def test_a_long_model_call_keeps_the_session_from_other_workers(engine, store_url):
    session = engine.open_session("kept", store=store_url, lease_seconds=KEPT)
    session.append({"role": "user", "content": "write the report"})
    session.pre_call(model="m")
    time.sleep(KEPT * 2.5)  # a model call two and a half leases long
    assert not taken_elsewhere(store_url, "kept")
    session.post_sampling({"role": "assistant", "content": "the report"})
    assert taken_elsewhere(store_url, "kept")  # the call's end gave it up
    time.sleep(KEPT / 2)
    assert not KEEPER.kept(session)  # dropped at its next turn
    session.close()
    again = engine.open_session("kept", store=store_url)
    assert [e.content for e in again.history] == ["write the report", "the report"]
    again.close()


def long_call_elsewhere(store_url: str) -> multiprocessing.process.BaseProcess:
    """A worker process in a model call three leases long (started and under way)."""
    started = multiprocessing.get_context("fork").Event()
    worker = multiprocessing.get_context("fork").Process(
        target=store_workers.long_model_call, args=(store_url, KEPT, started, KEPT * 3)
    )
    worker.start()
    assert started.wait(30)
    time.sleep(KEPT * 1.5)  # past its lease
    return worker


def test_another_process_waits_for_a_long_model_call(engine, store_url):
    worker = long_call_elsewhere(store_url)
    other = engine.open_session("long", store=store_url, wait_seconds=LEASE)
    with pytest.raises(SessionBusy):
        other.append({"role": "user", "content": "are you done?"})
    worker.join(30)
    assert worker.exitcode == 0
    other.append({"role": "user", "content": "are you done?"})  # the call ended: free
    assert [e.content for e in other.history] == [
        "write the report",
        "the report",
        "are you done?",
    ]
    other.close()


def test_a_worker_killed_in_a_long_model_call_leaves_the_session_free(engine, store_url):
    worker = long_call_elsewhere(store_url)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(30)
    other = engine.open_session("long", store=store_url, wait_seconds=KEPT)
    other.append({"role": "user", "content": "again"})  # its lease is not kept by anyone
    assert [e.content for e in other.history] == ["write the report", "again"]
    other.close()


def test_the_lease_of_a_long_call_is_kept_through_a_store_restart(engine, tmp_path):
    server = PrivateRedis(tmp_path / "redis")
    server.start()
    url = redis_url("t_keep", server.url)
    try:
        session = engine.open_session("kept", store=url, lease_seconds=1.0)
        session.append({"role": "user", "content": "write the report"})
        session.pre_call(model="m")
        time.sleep(0.4)  # renewed once, at a third of the lease
        server.kill()  # down over the next renewal, which waits for the server
        time.sleep(0.3)
        server.start()
        time.sleep(1.5)  # past the lease taken at pre-call
        assert not taken_elsewhere(url, "kept")
        session.post_sampling({"role": "assistant", "content": "the report"})
        assert [e.content for e in session.history] == ["write the report", "the report"]
        session.close()
    finally:
        drop(url)
        server.kill()


def test_a_late_renewal_takes_up_an_expired_lease_nobody_took(engine, store_url):
    session = engine.open_session("late", store=store_url, lease_seconds=LEASE)
    session.append({"role": "user", "content": "q"})
    session.pre_call(model="m")
    epoch = session._lease.epoch
    with KEEPER._cond:
        KEEPER._kept.pop(id(session))  # as if the keeper's thread were held up
    time.sleep(LEASE * 2)  # the lease expired, and nobody took it
    assert session._keep_lease() is not None  # the renewal, late
    assert session._lease.epoch == epoch + 1  # the next epoch: nobody held it meanwhile
    assert not taken_elsewhere(store_url, "late")
    session.post_sampling({"role": "assistant", "content": "a"})
    session.close()


def test_keeping_ends_with_call_seconds(engine, store_url):
    session = engine.open_session(
        "bounded", store=store_url, lease_seconds=LEASE, call_seconds=LEASE
    )
    session.append({"role": "user", "content": "q"})
    session.pre_call(model="m")
    time.sleep(LEASE * 4)
    assert taken_elsewhere(store_url, "bounded")  # the lease lapsed after call_seconds
    with pytest.raises(LeaseLost, match="another worker"):  # which went ahead meanwhile
        session.post_sampling({"role": "assistant", "content": "a"})
    session.close()


def test_a_released_call_is_not_kept(engine, store_url):
    session = engine.open_session("released", store=store_url, lease_seconds=LEASE)
    session.append({"role": "user", "content": "q"})
    session.pre_call(model="m")
    session.release()  # the model call failed
    assert taken_elsewhere(store_url, "released")
    time.sleep(LEASE)
    assert not KEEPER.kept(session)
    session.close()


def test_an_abandoned_session_is_not_kept(engine, store_url):
    session = engine.open_session("abandoned", store=store_url, lease_seconds=LEASE)
    session.append({"role": "user", "content": "q"})
    session.pre_call(model="m")
    del session
    gc.collect()
    time.sleep(LEASE * 2)
    assert taken_elsewhere(store_url, "abandoned")


def test_a_response_after_the_lease_expired_is_kept(engine, store_url):
    session = engine.open_session(
        "long", store=store_url, lease_seconds=LEASE, call_seconds=LEASE / 2
    )
    session.append({"role": "user", "content": "write the report"})
    session.pre_call(model="m")
    time.sleep(LEASE * 3)  # a long model call; no other worker wants the session
    session.post_sampling({"role": "assistant", "content": "the report"})
    session.append({"role": "user", "content": "thanks"})  # the next call goes on as usual
    session.pre_call(model="m")
    session.post_sampling({"role": "assistant", "content": "welcome"})
    session.close()
    again = engine.open_session("long", store=store_url)
    assert [e.content for e in again.history] == [
        "write the report",
        "the report",
        "thanks",
        "welcome",
    ]
    again.close()


def overtaken(
    engine: stenograph.Engine, store_url: str
) -> tuple[stenograph.Session, stenograph.Session]:
    """A session whose model call outlasted its lease while another worker took the lease
    and appended to the session (the journal moved on); both sessions."""
    slow = engine.open_session(
        "raced", store=store_url, lease_seconds=LEASE, call_seconds=LEASE / 2
    )
    slow.append({"role": "user", "content": "first question"})
    slow.pre_call(model="m")
    time.sleep(LEASE * 2)
    other = engine.open_session("raced", store=store_url, lease_seconds=5.0)
    other.append({"role": "user", "content": "another question"})  # takes the expired lease
    other.release()
    return slow, other


def test_a_response_after_another_worker_went_ahead_is_refused(engine, store_url):
    slow, other = overtaken(engine, store_url)
    with pytest.raises(LeaseLost, match="another worker"):
        slow.post_sampling({"role": "assistant", "content": "a late answer"})
    assert [e.content for e in slow.history] == ["first question"]
    other.close()
    slow.close()


def test_a_commit_refused_by_fencing_leaves_nothing_behind(engine, store_url):
    slow, other = overtaken(engine, store_url)
    slow._lease_at = time.monotonic()  # as if renewed just before the lease was lost
    with pytest.raises(LeaseLost, match="write refused"):
        slow.post_sampling({"role": "assistant", "content": "a late answer"})
    assert [e.content for e in slow.history] == ["first question"]
    other.close()
    slow.close()


def _counting_takes(session: stenograph.Session) -> list[str]:
    takes: list[str] = []
    storage = session.storage
    assert storage is not None
    take = storage.acquire
    storage.acquire = lambda kind, owner, seconds: (takes.append(kind), take(kind, owner, seconds))[
        1
    ]  # type: ignore[method-assign]
    return takes


def test_pre_call_extends_a_lease_only_once_it_has_aged(engine, tmp_path):
    """The lease the call's input took moments before is not written again at pre-call;
    one older than a sixth of ``lease_seconds`` is, so the model call starts with most of
    it."""
    session = engine.open_session("aged", state_dir=tmp_path, lease_seconds=KEPT)
    takes = _counting_takes(session)
    session.append({"role": "user", "content": "write the report"})
    session.pre_call(model="m")
    assert takes == ["call"]  # taken by the input, not extended at once
    session.post_sampling({"role": "assistant", "content": "done"})
    session.append({"role": "user", "content": "and the summary"})
    time.sleep(KEPT / 6 + 0.05)
    session.pre_call(model="m")
    assert takes == ["call", "call", "call"]  # taken, then extended at pre-call
    session.post_sampling({"role": "assistant", "content": "done"})
    session.close()
