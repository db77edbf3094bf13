"""What every store guarantees, checked against each (folder, SQLite, PostgreSQL, Redis)
with several real OS processes."""

from __future__ import annotations

import ast
import json
import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
import store_workers
from store_fixtures import PrivateRedis, drop, redis_url, wait_for_acks

import stenograph
from stenograph.engine.notes import NotesConflict, NotesRejected
from stenograph.stores import (
    CALL,
    EXTRACTION,
    LeaseLost,
    SessionBusy,
    StaleHistory,
    StoreError,
    VersionConflict,
    acquire_wait,
    open_store,
)
from stenograph.stores.base import CallEnd, run_pending
from stenograph.testing.messages_server import MessagesServer, Reply

FORK = multiprocessing.get_context("fork")
# 8 workers always; 50 calls each under STENOGRAPH_TEST_FULL_SIZE=1, else 20 (the machine is
# shared and has 2 cores: 4 stores x 400 calls took 80 s of the suite).
CALLS = 50 if os.environ.get("STENOGRAPH_TEST_FULL_SIZE") == "1" else 20


def entry(uuid: str) -> dict:
    return {"op": "append", "entry": {"uuid": uuid, "role": "user", "content": uuid, "time": 0}}


def run_all(processes: list) -> None:
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
        assert p.exitcode == 0, f"worker {p.name} exited with {p.exitcode}"


def test_a_lease_is_exclusive_and_its_epoch_only_grows(store_url):
    storage = open_store(store_url).session("s")
    first = storage.acquire(CALL, "host-a:1:x", 5.0)
    assert first is not None and first.epoch == 1
    assert storage.acquire(CALL, "host-b:2:y", 5.0) is None  # another worker waits
    with pytest.raises(SessionBusy, match="another worker holds its call lease"):
        acquire_wait(storage, CALL, "host-b:2:y", 5.0, wait=0.05)
    assert storage.acquire(CALL, "host-a:1:x", 5.0).epoch == 1  # the holder renews
    storage.release(first)
    second = storage.acquire(CALL, "host-b:2:y", 0.2)
    assert second.epoch == 2
    time.sleep(0.3)
    third = storage.acquire(CALL, "host-c:3:z", 5.0)  # an expired lease is taken over
    assert third.epoch == 3
    assert storage.acquire(EXTRACTION, "host-b:2:y", 5.0).epoch == 1  # a lease per kind


def test_writes_under_an_expired_or_stolen_lease_are_refused(store_url):
    storage = open_store(store_url).session("s")
    lease = storage.acquire(CALL, "host-a:1:x", 0.2)
    storage.append([entry("u1")], lease)
    time.sleep(0.3)
    with pytest.raises(LeaseLost, match="expired"):
        storage.append([entry("u2")], lease)
    newer = storage.acquire(CALL, "host-b:2:y", 5.0)
    for write in (
        lambda: storage.append([entry("u3")], lease),
        lambda: storage.save_state({"x": 1}, 0, lease),
    ):
        with pytest.raises(LeaseLost, match="write refused"):
            write()
    storage.append([entry("u4")], newer)
    assert [r["entry"]["uuid"] for r in storage.read(0)[0]] == ["u1", "u4"]


def test_appends_are_idempotent_by_uuid_ordered_and_gap_free(store_url):
    storage = open_store(store_url).session("s")
    lease = storage.acquire(CALL, "host-a:1:x", 5.0)
    before, after = storage.append([entry("a"), entry("b"), entry("a")], lease)
    again = storage.append([entry("b")], lease)  # a retry after an unknown outcome
    assert again == (after, after)
    records, end = storage.read(0)
    assert [r["entry"]["uuid"] for r in records] == ["a", "b"] and end == storage.position()
    later, _ = storage.read(before)
    assert later == records
    if not store_url.startswith("file:"):
        assert (before, after) == (0, 2)  # positions count records: gap-free


def test_four_processes_appending_keep_every_record_once(store_url):
    workers = [
        FORK.Process(target=_append_worker, args=(store_url, w), name=f"w{w}") for w in range(4)
    ]
    run_all(workers)
    records, _ = open_store(store_url).session("s").read(0)
    uuids = [r["entry"]["uuid"] for r in records]
    assert len(uuids) == len(set(uuids)) == 4 * 40
    for w in range(4):
        mine = [int(u.split("-")[1]) for u in uuids if u.startswith(f"w{w}-")]
        assert mine == sorted(mine)  # each worker's appends in its order


def _append_worker(url: str, worker: int) -> None:
    storage = open_store(url).session("s")
    owner = f"{os.uname().nodename}:{os.getpid()}:w{worker}"
    for n in range(40):
        lease = acquire_wait(storage, CALL, owner, 10.0, 60.0)
        storage.append([entry(f"w{worker}-{n}")], lease)
        storage.append([entry(f"w{worker}-{n}")], lease)  # the retry is a no-op
        storage.release(lease)


def test_state_and_notes_change_by_compare_and_swap(store_url):
    one, two = open_store(store_url).session("s"), open_store(store_url).session("s")
    lease = one.acquire(CALL, "host-a:1:x", 5.0)
    version = one.save_state({"handlers": {"a": {"n": 1}}}, 0, lease)
    with pytest.raises(VersionConflict):
        two.save_state({"handlers": {"b": {}}}, 0, lease)  # last writer does not win
    state, problem, found = two.load_state()
    assert problem is None and found == version and state["handlers"] == {"a": {"n": 1}}
    notes_a, notes_b = one.notes("notes", "# Notes\n"), two.notes("notes", "# Notes\n")
    text, v = notes_a.read()
    assert text == "# Notes\n"
    notes_a.compare_and_swap(v, "# Notes\n- a\n")
    with pytest.raises(NotesConflict):
        notes_b.compare_and_swap(v, "# Notes\n- b\n")
    assert notes_b.read()[0] == "# Notes\n- a\n"


def test_a_call_ends_in_one_step_that_writes_all_or_nothing(store_url):
    storage = open_store(store_url).session("s")
    lease = storage.acquire(CALL, "host-a:1:x", 5.0)
    records = [entry("a"), entry("b")]
    before, after, version = storage.commit(CallEnd(records, [], {"handlers": {"x": {}}}, 0, lease))
    assert version == 1 and storage.load_state()[0]["handlers"] == {"x": {}}
    assert [r["entry"]["uuid"] for r in storage.read(0)[0]] == ["a", "b"]
    assert (before, after) == (0, storage.position())
    assert storage.acquire(CALL, "host-b:2:y", 5.0) is not None  # the lease was given up
    with pytest.raises(LeaseLost):  # fenced: nothing of the step is written
        storage.commit(CallEnd([entry("c")], [], {"handlers": {}}, 1, lease))
    newer = storage.acquire(CALL, "host-b:2:y", 5.0)
    with pytest.raises(VersionConflict):  # a stale state version: no record either
        storage.commit(CallEnd([entry("d")], [], {"handlers": {}}, 0, newer))
    assert [r["entry"]["uuid"] for r in storage.read(0)[0]] == ["a", "b"]
    assert storage.commit(CallEnd([], [], None, 1, newer))[2] == 1  # only the release


def test_notes_written_by_one_process_are_read_by_another_and_fenced(store_url):
    writer = FORK.Process(target=_write_notes, args=(store_url, "# Notes\n- from a worker\n"))
    run_all([writer])
    storage = open_store(store_url).session("s")
    notes = storage.notes("session-memory.md", "# Notes\n")
    text, version = notes.read()
    assert text == "# Notes\n- from a worker\n"  # kept in the store, not in a worker's folder
    with pytest.raises(NotesConflict):
        notes.compare_and_swap("stale" if isinstance(version, str) else version - 1, "# Notes\n")
    lease = storage.acquire(EXTRACTION, "host-a:1:x", 0.2)
    time.sleep(0.3)
    with pytest.raises(LeaseLost, match="expired"):
        notes.compare_and_swap(version, "# Notes\n- late\n", lease)
    newer = storage.acquire(EXTRACTION, "host-b:2:y", 5.0)
    with pytest.raises(LeaseLost, match="write refused"):
        notes.compare_and_swap(version, "# Notes\n- stolen\n", lease)
    notes.compare_and_swap(version, "# Notes\n- holder\n", newer)
    assert notes.read()[0] == "# Notes\n- holder\n"


def test_notes_that_lose_a_template_heading_are_refused(store_url):
    notes = open_store(store_url).session("s").notes("notes", "# Notes\n# Learnings\n")
    with pytest.raises(NotesRejected, match="# Learnings"):
        notes.compare_and_swap(notes.read()[1], "# Notes\n- a\n")
    assert notes.read()[0] == "# Notes\n# Learnings\n"


def test_the_stores_depend_on_the_notes_contract_not_on_a_handler():
    stores = Path(stenograph.__file__).parent / "stores"
    for path in sorted(stores.glob("*.py")):
        name = path.name
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not [m for m in found if "handlers" in m], f"stores/{name} imports {found}"


def _write_notes(url: str, text: str) -> None:
    storage = open_store(url).session("s")
    lease = acquire_wait(storage, EXTRACTION, f"{os.uname().nodename}:{os.getpid()}:w", 5.0, 5.0)
    notes = storage.notes("session-memory.md", "# Notes\n")
    notes.compare_and_swap(notes.read()[1], text, lease)
    storage.release(lease)


def test_the_newest_pending_job_wins_and_an_older_one_filed_late_is_dropped(store_url):
    storage = open_store(store_url).session("s")
    storage.set_pending({"upto": "u5", "position": 5})
    storage.set_pending({"upto": "u3", "position": 3})  # older: the newer one stays
    assert storage.pending() == {"upto": "u5", "position": 5}
    lease = storage.acquire(EXTRACTION, "host-a:1:x", 5.0)
    assert storage.take_pending(lease) == {"upto": "u5", "position": 5}
    assert storage.pending() is None
    storage.set_pending({"upto": "u4", "position": 4})  # older than the one taken
    assert storage.pending() is None and storage.take_pending(lease) is None
    storage.set_pending({"upto": "u7", "position": 7})
    assert storage.pending() == {"upto": "u7", "position": 7}


def test_extraction_jobs_coalesce_and_go_to_the_lease_holder(store_url):
    storage = open_store(store_url).session("s")
    storage.set_pending({"upto": "u1"})
    storage.set_pending({"upto": "u2"})  # replaces the job not taken yet
    lease = storage.acquire(EXTRACTION, "host-a:1:x", 5.0)
    assert storage.acquire(EXTRACTION, "host-b:2:y", 5.0) is None
    assert storage.take_pending(lease) == {"upto": "u2"}
    assert storage.take_pending(lease) is None


def test_the_lease_holder_claims_its_own_job_unless_a_newer_one_is_filed_or_taken(store_url):
    storage = open_store(store_url).session("s")
    storage.set_pending({"upto": "u3", "position": 3})
    lease = storage.acquire(EXTRACTION, "host-a:1:x", 5.0)
    assert storage.claim(5, lease)  # newer than the one filed: that one is dropped
    assert storage.pending() is None and storage.take_pending(lease) is None
    storage.set_pending({"upto": "u4", "position": 4})  # older than the one claimed
    assert storage.pending() is None
    assert not storage.claim(4, lease)  # older than the one taken
    storage.set_pending({"upto": "u7", "position": 7})
    assert not storage.claim(6, lease)  # a newer one is filed: it runs instead
    assert storage.take_pending(lease) == {"upto": "u7", "position": 7}
    storage.release(lease)
    with pytest.raises(LeaseLost):
        storage.claim(9, lease)


def test_a_worker_that_gets_the_extraction_lease_runs_its_own_job_from_memory(store_url):
    storage = open_store(store_url).session("s")
    job = {"upto": "u5", "position": 5, "entries": [{"role": "user", "content": "x" * 1000}]}
    ran = run_pending(storage, job, 5.0, lambda filed, lease: filed)
    assert len(ran) == 1 and ran[0] is job  # neither written to the store nor read back
    storage.set_pending({"upto": "u4", "position": 4})  # older than the job run: dropped
    assert storage.pending() is None


def test_a_job_meeting_the_lease_held_elsewhere_is_filed_and_the_newest_runs(store_url):
    storage = open_store(store_url).session("s")
    holder = storage.acquire(EXTRACTION, "host-b:2:y", 5.0)
    assert run_pending(storage, {"upto": "u5", "position": 5}, 5.0, lambda f, _: f) == []
    assert storage.pending() == {"upto": "u5", "position": 5}
    storage.set_pending({"upto": "u7", "position": 7})
    storage.release(holder)
    ran = run_pending(storage, {"upto": "u6", "position": 6}, 5.0, lambda f, _: f)
    assert ran == [{"upto": "u7", "position": 7}]  # the newest request wins
    assert storage.pending() is None


def test_sessions_are_listed_and_deleted_whole(store_url):
    store = open_store(store_url)
    for sid in ("b", "a"):
        s = store.session(sid)
        lease = s.acquire(CALL, "host-a:1:x", 5.0)
        s.append([entry(f"{sid}1")], lease)
        s.save_state({"handlers": {}}, 0, lease)
    assert store.sessions() == ["a", "b"]
    assert store.delete("a") and not store.delete("a")
    assert store.sessions() == ["b"] and store.session("a").read(0) == ([], 0)


# sessions across processes ------------------------------------------------------------------


def test_eight_workers_fifty_calls_each_through_wrap(store_url):
    with MessagesServer() as server:
        server.default = Reply.text("ok")
        workers = [
            FORK.Process(
                target=store_workers.wrap_calls,
                args=(store_url, server.url, w, CALLS, w),
                name=f"w{w}",
            )
            for w in range(8)
        ]
        run_all(workers)
    session = store_workers.engine().open_session("shared", store=store_url)
    entries = session.history.entries
    inputs = [e for e in entries if e.role == "user"]
    assert len(inputs) == 8 * CALLS and len(entries) == 16 * CALLS
    for i, e in enumerate(entries):  # each call's input right before its response
        assert e.role == ("user" if i % 2 == 0 else "assistant"), i
    asked = Counter(e.content for e in inputs)
    assert len(asked) == 8 * CALLS and set(asked.values()) == {1}  # none twice, none lost
    assert len({e.uuid for e in entries}) == 16 * CALLS
    assert stenograph.check_pairing(session.pre_call(model="m")["messages"]) == []
    assert not [e for e in session.events if isinstance(e, stenograph.PairingViolation)]
    session.close()


def test_a_stale_host_list_is_refused_not_taken_as_a_rewind(store_url):
    engine = store_workers.engine()
    one = engine.open_session("s", store=store_url)
    one.append({"role": "user", "content": "hi"})
    one.post_sampling({"role": "assistant", "content": [{"type": "text", "text": "yo"}]})
    host_list = one.conversation()
    other = FORK.Process(target=_one_more_call, args=(store_url,))
    run_all([other])
    from stenograph.integrations.anthropic import take_input

    with pytest.raises(StaleHistory, match="lacks the 2 entries other workers appended"):
        take_input(one, [*host_list, {"role": "user", "content": "next"}])
    assert len(one.history) == 4  # nothing cut, nothing appended
    fresh = one.conversation()
    assert [m["content"] for m in fresh[2:]] == ["from the other worker", fresh[3]["content"]]
    take_input(one, [*fresh, {"role": "user", "content": "next"}])
    one.post_sampling({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    assert len(one.history) == 6
    one.close()


def test_an_explicit_rewind_still_works_and_every_worker_follows_it(store_url):
    engine = store_workers.engine()
    one = engine.open_session("s", store=store_url)
    for uid, role in (("a", "user"), ("b", "assistant"), ("c", "user")):
        one.append({"role": role, "content": uid, "uuid": uid})
    one.release()
    other = engine.open_session("s", store=store_url)  # same process: takes over
    other.refresh()
    assert other.truncate(after="a") == 2
    other.append({"role": "assistant", "content": "b again", "uuid": "b"})  # names reusable
    other.release()
    records, _ = open_store(store_url).session("s").read(0)
    assert [r["op"] for r in records] == ["append"] * 3 + ["truncate", "append"]
    fresh = engine.open_session("s2", store=store_url)
    fresh.close()
    third = FORK.Process(target=_check_history, args=(store_url, ["a", "b again"]))
    run_all([third])


def _check_history(url: str, contents: list[str]) -> None:
    session = store_workers.engine().open_session("s", store=url)
    assert [e.content for e in session.history] == contents, session.history.entries


def _one_more_call(url: str) -> None:
    session = store_workers.engine().open_session("s", store=url)
    session.append({"role": "user", "content": "from the other worker"})
    session.post_sampling({"role": "assistant", "content": [{"type": "text", "text": "sure"}]})
    session.close()


def test_a_paused_lease_holder_cannot_overwrite_newer_work(store_url):
    ready, ready_in = FORK.Pipe()
    result, result_in = FORK.Pipe()
    first = FORK.Process(
        target=store_workers.hold_then_write, args=(store_url, ready_in, result_in)
    )
    first.start()
    assert ready.poll(30) and ready.recv() == "holding"
    deadline = time.monotonic() + 10
    while Path(f"/proc/{first.pid}/stat").read_text().split()[2] != "T":  # stopped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    storage = open_store(store_url).session("paused")
    second = acquire_wait(storage, CALL, "host-2:2:second", 30.0, wait=10.0)  # after expiry
    extraction = acquire_wait(storage, EXTRACTION, "host-2:2:second", 30.0, wait=10.0)
    assert second.epoch == 2 and extraction.epoch == 2
    storage.append([entry("second")], second)
    version = storage.save_state({"by": "second"}, storage.load_state()[2], second)
    notes = storage.notes("notes", "# Notes\n")
    notes.compare_and_swap(notes.read()[1], "# Notes\nsecond\n", extraction)
    os.kill(first.pid, signal.SIGCONT)
    assert result.poll(30)
    outcome = result.recv()
    first.join(30)
    assert outcome == ["append: LeaseLost", "state: LeaseLost", "notes: LeaseLost"]
    state, _, found = storage.load_state()
    assert state["by"] == "second" and found == version
    assert notes.read()[0] == "# Notes\nsecond\n"
    assert [r["entry"]["uuid"] for r in storage.read(0)[0]] == ["second"]


def test_killed_workers_lose_no_acknowledged_append_and_leave_no_stuck_lease(store_url, tmp_path):
    rng = random.Random(17)
    acks = tmp_path / "acks"
    kills = 0
    while kills < 50:  # 50 SIGKILLs at random moments, two workers at a time
        workers = [
            FORK.Process(
                target=store_workers.append_forever, args=(store_url, kills + i, str(acks))
            )
            for i in range(2)
        ]
        for w in workers:
            w.start()
        time.sleep(rng.uniform(0.02, 0.15))
        for w in workers:
            os.kill(w.pid, signal.SIGKILL)
            w.join()
            kills += 1
    acknowledged = acks.read_text().split()
    storage = open_store(store_url).session("crash")
    stored = [r["entry"]["uuid"] for r in storage.read(0)[0]]
    assert acknowledged and set(acknowledged) <= set(stored)
    assert len(stored) == len(set(stored))
    start = time.monotonic()  # a dead holder's lease is taken over at once on its host
    assert acquire_wait(storage, CALL, "host-9:9:next", 5.0, wait=5.0).epoch >= 1
    assert time.monotonic() - start < 5


def test_a_redis_server_stopped_hard_mid_run_loses_no_acknowledged_append(tmp_path):
    server = PrivateRedis(tmp_path / "redis")
    server.start()
    url = redis_url("t_restart", server.url)
    acks = tmp_path / "acks"
    worker = FORK.Process(target=store_workers.append_forever, args=(url, 0, str(acks)))
    worker.start()
    try:
        time.sleep(0.5)
        server.kill()  # SIGKILL: no shutdown save; the AOF (fsync always) is what remains
        time.sleep(0.5)
        server.start()
        time.sleep(1.0)
        assert worker.is_alive()  # it waited for the server and went on
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.join()
    acknowledged = acks.read_text().split()
    stored = [r["entry"]["uuid"] for r in open_store(url).session("crash").read(0)[0]]
    assert len(acknowledged) > 20 and set(acknowledged) <= set(stored)
    drop(url)
    server.kill()


def test_a_postgresql_server_stopped_hard_mid_run_loses_no_acknowledged_append(
    tmp_path, private_postgres
):
    url = f"{private_postgres.url}?schema=t_restart"
    acks = tmp_path / "acks"
    worker = FORK.Process(target=store_workers.append_forever, args=(url, 0, str(acks)))
    worker.start()
    try:
        wait_for_acks(acks, 20, worker)
        private_postgres.kill()  # SIGKILL to every server process: no shutdown checkpoint
        before = len(acks.read_text().split())
        private_postgres.start()  # crash recovery replays the WAL
        wait_for_acks(acks, before + 20, worker)  # it reconnected and went on
    finally:
        worker.kill()
        worker.join()
    acknowledged = acks.read_text().split()
    store = open_store(url)
    storage = store.session("crash")
    stored = [r["entry"]["uuid"] for r in storage.read(0)[0]]
    assert set(acknowledged) <= set(stored) and len(stored) == len(set(stored))
    owner = f"{os.uname().nodename}:{os.getpid()}:after"
    assert storage.acquire(CALL, owner, 5.0) is not None  # the killed worker's lease is free
    store.close()


def test_an_unknown_store_url_names_the_allowed_schemes():
    with pytest.raises(StoreError, match=r"unknown scheme 'postgre' \(did you mean postgres:\?\)"):
        open_store("postgre://localhost/x")
    with pytest.raises(StoreError, match="sqlite:///relative/path.db"):
        open_store("sqlite://x.db")


class WithoutClaim:
    """A session storage written against an older protocol: everything but ``claim``."""

    def __init__(self, storage):
        self._storage = storage

    def __getattr__(self, name):
        if name == "claim":
            raise AttributeError(name)
        return getattr(self._storage, name)


class OlderStore(stenograph.stores.FolderStore):
    def session(self, session_id):
        return WithoutClaim(super().session(session_id))


def test_a_store_lacking_part_of_the_protocol_is_refused_when_opened(tmp_path):
    engine = stenograph.Engine.from_preset("inactivity-only")
    with pytest.raises(StoreError, match=r"\(WithoutClaim\) lacks claim; a SessionStorage has"):
        engine.open_session("s", store=OlderStore(tmp_path))


def test_the_folder_store_rewrites_its_lease_file_in_place_leaving_no_older_tail(tmp_path):
    storage = open_store(f"file:{tmp_path}").session("s")
    call = storage.acquire(CALL, "host-a:1:" + "x" * 60, 5.0)
    assert storage.acquire(EXTRACTION, "host-a:1:y", 5.0) is not None
    path = next(tmp_path.rglob("lease.json"))
    longest = path.stat().st_size
    storage.release(call)  # a shorter text: padded to the file's size, no older tail left
    assert path.stat().st_size == longest and list(path.parent.glob("lease.json?*")) == []
    held = json.loads(path.read_bytes())
    assert held[CALL]["owner"] == "" and held[EXTRACTION]["owner"] == "host-a:1:y"
    assert storage.acquire(CALL, "host-b:2:z", 5.0) is not None  # read back whole: free
