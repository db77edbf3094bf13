"""A session the host closes and drops is freed at once by reference counting: no cycles
keep its history alive until the cyclic garbage collector runs (hosts serving many
conversations would otherwise pay for full collections over dead sessions)."""

from __future__ import annotations

import weakref

import pytest
from helpers import run_tool_calls, text_reply

import stenograph


def use_and_drop(engine: stenograph.Engine, state_dir) -> tuple[weakref.ref, set[str]]:
    """Open a session, grow it past every threshold with pauses (memorize, notes, compaction),
    close it and drop it; (a weak reference to it, the kinds of events it recorded)."""
    clock = stenograph.ManualClock(1_750_000_000.0)
    session = engine.open_session("lifetime", state_dir=state_dir, clock=clock)
    for tokens in (12_000, 50_000):
        session.append({"role": "user", "content": f"Next task ({tokens})."})
        run_tool_calls(session, clock, 3, size=30_000)
        session.pre_call(model="m")
        session.post_sampling({**text_reply(), "usage": {"input_tokens": tokens}})
        assert session.wait_for_background(10)
        clock.advance(3600)
    session.append({"role": "user", "content": "And now the docs."})
    session.pre_call(model="m")
    kinds = {e.kind for e in session.events}
    session.close()
    ref = weakref.ref(session)
    del session
    return ref, kinds


@pytest.mark.parametrize("persisted", [False, True], ids=["in-memory", "on-disk"])
@pytest.mark.parametrize("preset", ["inactivity-only", "default", "coding-agent"])
def test_a_dropped_session_is_freed_without_the_cyclic_collector(
    tmp_path, no_cyclic_gc, preset, persisted
):
    overrides = {}
    if preset != "inactivity-only":
        notes = tmp_path / "notes" / "{session_id}" / "session-memory.md"
        overrides["forked-extraction"] = {"backend": "offline", "memory_path": str(notes)}
    if preset == "coding-agent":
        overrides["memory-compact"] = {"context_window": 60_000, "min_keep_tokens": 1000}
    engine = stenograph.Engine.from_preset(preset, overrides=overrides)
    ref, kinds = use_and_drop(engine, tmp_path / "state" if persisted else None)
    expected = {
        "inactivity-only": {"EntriesMemorized"},
        "default": {"EntriesMemorized", "ExtractionFinished"},
        "coding-agent": {"ExtractionFinished", "Compacted"},
    }[preset]
    assert expected <= kinds  # the handlers really ran
    assert ref() is None
