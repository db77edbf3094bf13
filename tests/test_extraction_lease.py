"""The extraction lease is renewed while a notes fork runs: a fork longer than
``lease_seconds`` keeps it, and a second worker's request meanwhile is handed over and run
after it, never beside it; a renewal that finds the lease lost stops and says so."""

from __future__ import annotations

import logging
import multiprocessing
import re
import threading
from concurrent.futures import ProcessPoolExecutor

import pytest
import store_workers
from framework_agents import require_extra

from stenograph.handlers.forked_extraction import ExtractionFailed, ForkedExtraction
from stenograph.stores import open_store
from stenograph.stores.base import EXTRACTION, job_owner
from stenograph.stores.renewal import Renewal
from stenograph.testing.messages_server import RecordedRequest, Reply

LEASE = 1.0  # seconds; the first fork is held well past it (renewed every third of it)
ASKED = re.compile(r"^req-\w+$")
ELSEWHERE = "another-host:1:worker:job"  # a live lease of it is never taken over here


class HeldNotesModel:
    """Holds the first fork until ``go_on`` is set, answers the others at once (notes
    naming the newest request seen); counts the forks answered at the same moment."""

    def __init__(self) -> None:
        self.template = ForkedExtraction(ForkedExtraction.Settings()).template
        self.started, self.go_on = threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.running = self.most = self.forks = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        with self.lock:
            first = self.forks == 0
            self.forks += 1
            self.running += 1
            self.most = max(self.most, self.running)
        self.started.set()
        try:
            if first:
                assert self.go_on.wait(30), "the first fork was never let go on"
            asked = [m["content"] for m in request.body["messages"] if m["role"] == "user"]
            newest = [a for a in asked if isinstance(a, str) and ASKED.match(a)][-1]
            notes = self.template.replace("# Worklog\n", f"# Worklog\n- covered {newest}\n", 1)
            return Reply.text(f"```markdown\n{notes}```")
        finally:
            with self.lock:
                self.running -= 1


def test_a_fork_longer_than_the_lease_keeps_it_and_runs_the_next_request_after(
    store_url, monkeypatch
):
    held_past_the_lease(store_url, monkeypatch, None)


def test_a_job_in_a_pool_process_renews_the_lease_there(tmp_path, monkeypatch):
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        held_past_the_lease(f"file:{tmp_path / 'store'}", monkeypatch, pool)


def test_a_job_on_a_dask_cluster_renews_the_lease_there(store_url, monkeypatch):
    require_extra("distributed", "dask")
    with store_workers.worker_executor("dask") as executor:  # two threads: both jobs run
        held_past_the_lease(store_url, monkeypatch, executor)


def held_past_the_lease(store_url: str, monkeypatch, executor) -> None:
    """Hold the first session's fork past its lease while a second session object (its
    jobs on ``executor``, else on its own thread) requests an extraction."""
    model = HeldNotesModel()
    with store_workers.notes_model(model, monkeypatch):
        engine = store_workers.extraction_engine(executor)
        first = engine.open_session("long", store=store_url, lease_seconds=LEASE)
        store_workers.triggering_call(first, "req-a")
        assert model.started.wait(30)
        threading.Event().wait(LEASE * 1.5)  # the first fork outlasts its lease meanwhile
        second = engine.open_session("long", store=store_url, lease_seconds=LEASE)
        store_workers.triggering_call(second, "req-b")
        assert second.wait_for_background(30)
        model.go_on.set()
        assert first.wait_for_background(30)
        second.close()
        first.close()
    assert model.most == 1, "two forks of one session ran at once"
    assert model.forks == 2  # the second request was run, after the first
    assert not [e for e in first.events if isinstance(e, ExtractionFailed)], first.events
    store = open_store(store_url)
    records, _ = store.session("long").read(0)
    store.close()
    notes = [r for r in records if r["op"] == "notes"]
    assert len(notes) == 2 and notes[-1]["upto_uuid"] == second.history.entries[-1].uuid
    assert "- covered req-b\n" in second.notes_at(notes[-1]["path"]).read()[0]


@pytest.fixture
def store(store_url):
    opened = open_store(store_url)
    yield opened
    opened.close()


def test_a_renewal_keeps_the_epoch_and_extends_the_lease(store):
    storage = store.session("renewed")
    owner = job_owner()
    lease = storage.acquire(EXTRACTION, owner, LEASE)
    assert lease is not None
    assert Renewal(storage, lease, 30.0).renew()
    assert storage.acquire(EXTRACTION, ELSEWHERE, 30.0) is None  # still held, for 30 s now
    again = storage.acquire(EXTRACTION, owner, 30.0)
    assert again is not None and again.epoch == lease.epoch


@pytest.mark.parametrize("taken_over", [True, False])
def test_a_renewal_that_finds_the_lease_lost_stops_and_says_so(store, taken_over, caplog):
    storage = store.session("lost")
    owner = job_owner()
    lease = storage.acquire(EXTRACTION, owner, 30.0)
    assert lease is not None
    storage.acquire(EXTRACTION, owner, -1.0)  # the same lease, expired
    other = storage.acquire(EXTRACTION, ELSEWHERE, 30.0) if taken_over else None
    renewal = Renewal(storage, lease, 30.0)
    with caplog.at_level(logging.WARNING, "stenograph.stores.renewal"):
        assert not renewal.renew()
        assert not renewal.renew()  # once lost, never taken again
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert "session lost" in message and storage.location in message and "lost" in message
    held = storage.acquire(EXTRACTION, ELSEWHERE, 30.0)
    assert held is not None
    if taken_over:  # the new holder keeps it
        assert other is not None and held.epoch == other.epoch
    else:  # taken anew after it expired: another epoch, given back at once
        assert held.epoch == lease.epoch + 2
