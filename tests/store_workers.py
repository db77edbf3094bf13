"""What the worker processes of the store tests run (each opens its own store by URL)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import anthropic

import stenograph
from stenograph.integrations.anthropic import wrap
from stenograph.stores import CALL, EXTRACTION, StaleHistory, acquire_wait, open_store
from stenograph.testing.messages_server import MessagesServer


def engine() -> stenograph.Engine:
    """The default preset (its notes writer offline: no key in the tests)."""
    return stenograph.Engine.from_preset(
        "default", overrides={"forked-extraction": {"backend": "offline"}}
    )


def wrap_calls(url: str, server: str, worker: int, calls: int, seed: int) -> None:
    """``calls`` calls through ``wrap()``, the host list reloaded when it is stale."""
    rng = random.Random(seed)
    client = anthropic.Anthropic(api_key="k", base_url=server, max_retries=3)
    session = engine().open_session("shared", store=url, wait_seconds=60)
    wrapped = wrap(client, session)
    messages = session.conversation()
    done = 0
    while done < calls:
        ask = {"role": "user", "content": f"w{worker}-c{done}"}
        try:
            reply = wrapped.messages.create(model="m", max_tokens=16, messages=[*messages, ask])
        except StaleHistory:
            messages = session.conversation()
            continue
        messages = [*messages, ask, {"role": "assistant", "content": reply.content}]
        done += 1
        if rng.random() < 0.3:
            time.sleep(rng.random() * 0.005)
    session.close()


def append_forever(url: str, worker: int, acks: str) -> None:
    """Append entries under the call lease until killed; each acknowledged uuid is then
    written to ``acks`` (so what is in ``acks`` was acknowledged)."""
    storage = open_store(url).session("crash")
    owner = f"{os.uname().nodename}:{os.getpid()}:w{worker}"
    with open(acks, "a", encoding="utf-8") as log:
        n = 0
        while True:
            lease = acquire_wait(storage, CALL, owner, 30.0, 60.0)
            for _ in range(3):
                uuid = f"w{worker}-{os.getpid()}-{n}"
                record = {
                    "op": "append",
                    "entry": {"uuid": uuid, "role": "user", "content": uuid, "time": 0},
                }
                storage.append([record], lease)
                log.write(uuid + "\n")
                log.flush()
                n += 1
            storage.release(lease)


def hold_then_write(url: str, ready: Any, result: Any) -> None:
    """Take both leases (1 s), say so, be stopped (SIGSTOP) past them, then try to write."""
    storage = open_store(url).session("paused")
    owner = f"{os.uname().nodename}:{os.getpid()}:first"
    call = storage.acquire(CALL, owner, 1.0)
    extraction = storage.acquire(EXTRACTION, owner, 1.0)
    notes = storage.notes("notes", "# Notes\n")
    text, version = notes.read()
    state, _, state_version = storage.load_state()
    ready.send("holding")
    os.kill(os.getpid(), signal.SIGSTOP)  # the test resumes us after another worker took over
    outcome = []
    for name, step in (
        ("append", lambda: storage.append([_entry("first-late")], call)),
        ("state", lambda: storage.save_state({"by": "first"}, state_version, call)),
        ("notes", lambda: notes.compare_and_swap(version, "# Notes\nfirst\n", extraction)),
    ):
        try:
            step()
            outcome.append(f"{name}: written")
        except stenograph.StenographError as exc:
            outcome.append(f"{name}: {type(exc).__name__}")
        except Exception as exc:  # a notes conflict is also a refusal
            outcome.append(f"{name}: {type(exc).__name__}")
    result.send(outcome)


def long_model_call(url: str, lease: float, started: Any, seconds: float) -> None:
    """One call whose model call lasts ``seconds`` (several of its ``lease`` seconds)."""
    session = engine().open_session("long", store=url, lease_seconds=lease)
    session.append({"role": "user", "content": "write the report"})
    session.pre_call(model="m")
    started.set()
    time.sleep(seconds)
    session.post_sampling({"role": "assistant", "content": "the report"})
    session.close()


def _entry(uuid: str) -> dict[str, Any]:
    return {"op": "append", "entry": {"uuid": uuid, "role": "user", "content": uuid, "time": 0}}


def extraction_engine(
    executor: Any = None, more: dict[str, Any] | None = None
) -> stenograph.Engine:
    """Every response triggers an extraction; the fork asks the test server (from
    ``ANTHROPIC_BASE_URL``) and rewrites the notes."""
    overrides = {
        "update-threshold": {"minimumMessageTokensToInit": 1, "minimumTokensBetweenUpdate": 1},
        "forked-extraction": {"backend": "anthropic", "maxRetries": 0},
    }
    for name, values in (more or {}).items():
        overrides[name] = {**overrides.get(name, {}), **values}
    return stenograph.Engine.from_preset("default", overrides=overrides, executor=executor)


def factory_client() -> anthropic.Anthropic:
    """The client a worker builds through ``clientFactory``: it names its process."""
    return anthropic.Anthropic(
        api_key="k",
        base_url=os.environ["STENOGRAPH_TEST_SERVER"],
        default_headers={"x-worker-pid": str(os.getpid())},
    )


def trigger_extraction(url: str, worker: int, go: Any, executor_kind: str) -> None:
    """One call on the shared session once ``go`` is set; its response triggers an
    extraction, which this worker runs or files for the extraction lease holder."""
    with worker_executor(executor_kind) as executor:
        session = extraction_engine(executor).open_session("notes", store=url, wait_seconds=60)
        go.wait(30)
        triggering_call(session, f"req-{worker}")
        assert session.wait_for_background(120)
        session.close()


def triggering_call(session: stenograph.Session, text: str) -> None:
    """One model call asking ``text``, whose response triggers an extraction."""
    session.append({"role": "user", "content": text})
    session.pre_call(model="m")
    usage = {"input_tokens": 1000 * len(session.history), "output_tokens": 10}
    session.post_sampling(
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "usage": usage}
    )


@contextlib.contextmanager
def notes_model(responder: Any, monkeypatch: Any) -> Iterator[MessagesServer]:
    """The test model server answering the forks with ``responder``; the anthropic client
    of this process (and of the processes it forks) finds it from the environment."""
    with MessagesServer() as server:
        server.responder = responder
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


@contextlib.contextmanager
def worker_executor(kind: str) -> Iterator[Any]:
    """No executor (the shared threads), a process pool, or a small Dask cluster."""
    if kind == "threads":
        yield None
    elif kind == "processes":
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
            pool.submit(int).result()  # its process forked now, before any thread runs here
            yield pool
    else:
        from distributed import Client, LocalCluster

        small = {"n_workers": 1, "threads_per_worker": 2, "processes": False}
        with (
            LocalCluster(**small, dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            yield client.get_executor(pure=False)


def call_then_hang(url: str) -> None:
    """One call whose response starts a notes job on a process pool; then this host waits
    to be killed while the job runs."""
    with worker_executor("processes") as executor:
        more = {"forked-extraction": {"clientFactory": "store_workers:factory_client"}}
        session = extraction_engine(executor, more).open_session("orphan", store=url)
        session.append({"role": "user", "content": "req-1"})
        session.post_sampling({"role": "assistant", "content": "ok"})
        time.sleep(600)
