"""At most one notes extraction per session across the cluster: 16 OS processes trigger one
on the same session at once, on every store; the fork's model answers slowly (0.5 s)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest
import store_workers
from framework_agents import require_extra

from stenograph.handlers.forked_extraction import ForkedExtraction
from stenograph.stores import open_store
from stenograph.testing.messages_server import MessagesServer, RecordedRequest, Reply

FORK = multiprocessing.get_context("fork")
WORKERS = 16
ASKED = re.compile(r"^req-(\d+)$")


class SlowNotesModel:
    """Answers each fork after 0.5 s with notes naming the newest request it saw, and
    logs when each answer started and ended."""

    def __init__(self) -> None:
        self.template = ForkedExtraction(ForkedExtraction.Settings()).template
        self.lock = threading.Lock()
        self.spans: list[tuple[float, float]] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        started = time.monotonic()
        asked = [m["content"] for m in request.body["messages"] if m["role"] == "user"]
        newest = [a for a in asked if isinstance(a, str) and ASKED.match(a)][-1]
        time.sleep(0.5)
        notes = self.template.replace("# Worklog\n", f"# Worklog\n- covered {newest}\n", 1)
        with self.lock:
            self.spans.append((started, time.monotonic()))
        return Reply.text(f"```markdown\n{notes}```")

    def most_at_once(self) -> int:
        """The largest number of forks answered at the same moment."""
        edges = sorted([(s, 1) for s, _ in self.spans] + [(e, -1) for _, e in self.spans])
        running = most = 0
        for _, step in edges:
            running += step
            most = max(most, running)
        return most


@pytest.mark.parametrize("executor", ["threads", "processes", "dask"])
def test_sixteen_workers_trigger_at_once_and_one_fork_runs_at_a_time(
    store_url, executor, monkeypatch
):
    if executor == "dask":
        require_extra("distributed", "dask")  # imported here: the forked workers share it
    model = SlowNotesModel()
    with store_workers.notes_model(model, monkeypatch):
        go = FORK.Event()
        workers = [
            FORK.Process(
                target=store_workers.trigger_extraction,
                args=(store_url, w, go, executor),
                name=f"w{w}",
            )
            for w in range(WORKERS)
        ]
        for w in workers:
            w.start()
        go.set()
        for w in workers:
            w.join(180)
            assert w.exitcode == 0, f"worker {w.name} exited with {w.exitcode}"
    assert model.spans and model.most_at_once() == 1
    assert len(model.spans) < WORKERS  # requests filed meanwhile were coalesced
    session = store_workers.extraction_engine().open_session("notes", store=store_url)
    newest = session.history.entries[-2].content
    notes = last_notes(session)
    assert notes["upto_uuid"] == session.history.entries[-1].uuid
    assert f"- covered {newest}\n" in session.notes_at(notes["path"]).read()[0]
    session.close()
    assert open_store(store_url).session("notes").pending() is None


def last_notes(session):
    """The newest notes record in the session's journal."""
    records, _ = session.storage.read(0)
    return [r for r in records if r["op"] == "notes"][-1]


def test_an_in_memory_session_refuses_an_executor():
    with ThreadPoolExecutor(1) as pool:
        engine = store_workers.extraction_engine(pool)
        with pytest.raises(ValueError, match=r"in-memory session .* \(executor= of Engine"):
            engine.open_session("m", state_dir=None)


def test_a_worker_process_builds_its_client_with_the_client_factory(tmp_path, monkeypatch):
    with MessagesServer() as server:
        server.responder = SlowNotesModel()
        monkeypatch.setenv("STENOGRAPH_TEST_SERVER", server.url)
        overrides = {"forked-extraction": {"clientFactory": "store_workers:factory_client"}}
        with ProcessPoolExecutor(1, mp_context=FORK) as pool:
            engine = store_workers.extraction_engine(pool, overrides)
            session = engine.open_session("f", store=f"sqlite:///{tmp_path / 'f.db'}")
            session.append({"role": "user", "content": "req-1"})
            session.post_sampling({"role": "assistant", "content": "ok"})
            assert session.wait_for_background(60)
            pids = {r.headers.get("x-worker-pid") for r in server.requests}
        assert pids and str(os.getpid()) not in pids  # the fork ran in the pool's process
        assert "- covered req-1\n" in session.notes_at(last_notes(session)["path"]).read()[0]
        session.close()


def test_notes_a_job_commits_survive_its_host_killed_meanwhile(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'o.db'}"
    with MessagesServer() as server:
        server.responder = SlowNotesModel()  # 0.5 s: the host is killed before the reply
        monkeypatch.setenv("STENOGRAPH_TEST_SERVER", server.url)
        host = FORK.Process(target=store_workers.call_then_hang, args=(url,))
        host.start()
        assert server.wait_for_requests(1, timeout=60)
        os.kill(host.pid, signal.SIGKILL)
        host.join()
        worker = int(server.requests[0].headers["x-worker-pid"])
        storage = open_store(url).session("orphan")
        deadline = time.monotonic() + 30
        while not [r for r in storage.read(0)[0] if r["op"] == "notes"]:
            assert time.monotonic() < deadline, "the job's notes never arrived"
            time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker, signal.SIGKILL)  # the pool's process, orphaned by the host
    record = [r for r in storage.read(0)[0] if r["op"] == "notes"][-1]
    assert "- covered req-1\n" in storage.notes(record["path"], "").read()[0]
