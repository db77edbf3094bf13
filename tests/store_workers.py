"""What the worker processes of the store tests run (each opens its own store by URL)."""

from __future__ import annotations

import os
import random
import signal
import time
from typing import Any

import anthropic

import stenograph
from stenograph.integrations.anthropic import wrap
from stenograph.stores import CALL, EXTRACTION, StaleHistory, acquire_wait, open_store


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


def _entry(uuid: str) -> dict[str, Any]:
    return {"op": "append", "entry": {"uuid": uuid, "role": "user", "content": uuid, "time": 0}}
