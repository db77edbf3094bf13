"""A model call longer than ``lease_seconds`` loses nothing: the call's lease is taken up
again at post-sampling when nobody held it meanwhile, and only a worker that did go ahead
with the session makes the late response ``LeaseLost``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import stenograph
from stenograph.stores import LeaseLost

LEASE = 0.3  # seconds; the "model call" below outlasts it


@pytest.fixture
def engine(tmp_path: Path) -> stenograph.Engine:
    path = tmp_path / "bare.toml"
    path.write_text('name = "bare"\n')
    return stenograph.Engine.from_preset(path)


def test_a_response_after_the_lease_expired_is_kept(engine, store_url):
    session = engine.open_session("long", store=store_url, lease_seconds=LEASE)
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
    slow = engine.open_session("raced", store=store_url, lease_seconds=LEASE)
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
