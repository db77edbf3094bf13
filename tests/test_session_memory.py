"""What a session keeps alive as it grows: nothing per call that nobody needs. Events are
kept up to ``max_events`` (``on_event`` still gets every one), the offline notes writer
keeps only what its notes can show, and a one-entry message costs no wrapper objects."""

from __future__ import annotations

import gc
import types
from collections import Counter
from typing import Any

import pydantic
import pytest
from helpers import tool_result, tool_turn

import stenograph
from stenograph.engine import session as session_module
from stenograph.engine.entries import Entry, make_entry
from stenograph.engine.guard import MessageIds
from stenograph.handlers.forked_extraction import ForkedExtraction
from stenograph.handlers.forked_extraction.fork import ForkContext
from stenograph.handlers.forked_extraction.offline import Facts, offline_notes

OFFLINE = {"forked-extraction": {"backend": "offline"}}
TEMPLATE = ForkedExtraction(ForkedExtraction.Settings()).template


def offline_session(**options: Any) -> tuple[stenograph.Session, stenograph.ManualClock]:
    clock = stenograph.ManualClock(1_000_000.0)
    engine = stenograph.Engine.from_preset("default", overrides=OFFLINE)
    session = engine.open_session("memory", state_dir=None, clock=clock, **options)
    session.append({"role": "user", "content": "Fix the failing test."})
    return session, clock


def calls(session: stenograph.Session, clock: stenograph.ManualClock, n: int) -> None:
    """``n`` agent calls: the request, a response calling a tool, its result (every fifth
    failing, every seventh command new)."""
    for i in range(n):
        session.pre_call(model="m")
        clock.advance(3)
        if i % 7:
            message, tool_id = tool_turn("Read", file_path=f"/src/mod{i % 5}.py")
        else:
            message, tool_id = tool_turn("Bash", command=f"pytest -k case{i}")
        session.post_sampling(message)
        clock.advance(3)
        session.append(tool_result(tool_id, f"line {i}\n" * 200, is_error=i % 5 == 0))
    session.wait_for_background()


def live(predicate: Any) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if predicate(o))


# events ------------------------------------------------------------------------------------


def test_events_keep_the_newest_max_events_and_on_event_gets_every_one():
    delivered: list[stenograph.Event] = []
    session, clock = offline_session(max_events=10, on_event=delivered.append)
    calls(session, clock, 40)
    assert session.max_events == 10
    assert len(delivered) >= 40 and len(session.events) == 10
    assert session.events == delivered[-10:]
    session.close()


def test_events_are_bounded_by_default_and_unbounded_on_request():
    session, clock = offline_session()
    assert session.max_events == session_module.MAX_EVENTS == 1_000
    session.close()
    unbounded, clock = offline_session(max_events=None)
    calls(unbounded, clock, 30)
    assert len(unbounded.events) >= 30
    unbounded.close()
    with pytest.raises(ValueError, match="max_events must be at least 1"):
        offline_session(max_events=0)


def test_an_event_amended_after_it_left_events_is_still_delivered():
    delivered: list[stenograph.Event] = []
    session, clock = offline_session(max_events=1, on_event=delivered.append)
    event = stenograph.Custom(time=clock(), name="first")
    session.record(event)
    session.amend_later(event, lambda: {"name": "first, amended"})
    session.record(stenograph.Custom(time=clock(), name="second"))  # pushes ``event`` out
    session.wait_for_background()
    names = [e.name for e in delivered if isinstance(e, stenograph.Custom)]
    assert names == ["first", "second", "first, amended"]
    assert [e.name for e in session.events] == ["second"]
    session.close()


# the offline notes writer ------------------------------------------------------------------


def conversation(n: int) -> list[Entry]:
    """``n`` rounds of the house agent loop as entries: a request now and then, a tool
    call (one file of a few, or a new command), its result (some failing), a reply."""
    entries = []
    for i in range(n):
        if i % 10 == 0:
            request = f"Request {i}: " + "go on " * 60
            entries.append(make_entry({"role": "user", "content": request}, 1e9 + i))
        name, given = ("Bash", {"command": f"make t{i}"}) if i % 3 else ("Edit", {"path": "a.py"})
        message, tool_id = tool_turn(name, **given)
        entries.append(make_entry(message, 1e9 + i))
        entries.append(make_entry(tool_result(tool_id, f"out {i}", i % 4 == 0), 1e9 + i))
    return entries


def reachable(root: object) -> int:
    """Objects reachable from ``root`` (classes and functions left out)."""
    seen, stack = set(), [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, type | types.FunctionType):
            continue
        seen.add(id(item))
        stack.extend(gc.get_referents(item))
    return len(seen)


def test_the_offline_facts_keep_only_what_the_notes_can_show():
    small, large = conversation(300), conversation(1_200)
    facts_small, facts_large = Facts().feed(small), Facts().feed(large)
    assert reachable(facts_large) < reachable(facts_small) * 1.1
    notes = offline_notes(TEMPLATE, facts_large)
    assert "- (1140 earlier steps)" in notes  # 1,200 steps, the last 60 shown
    assert "300 tool call(s) failed" in notes
    assert notes.count("`make t") == 25  # the newest 25 commands
    assert "Latest request: Request 1190: go on" in notes
    assert "Follow-up requests:\n- Request 10: go on" in notes
    assert "(cut to the section budget)" in notes  # the follow-up requests


def test_a_failed_result_names_its_call_fed_earlier():
    message, tool_id = tool_turn("Bash", command="make lint")
    facts = Facts().feed([make_entry(message, 1e9)])
    facts.feed(
        [make_entry(message, 1e9), make_entry(tool_result(tool_id, "lint failed", True), 1e9)]
    )
    assert "- Bash make lint: lint failed" in offline_notes(TEMPLATE, facts)


# the history -------------------------------------------------------------------------------


def one_entry_runs(o: object) -> bool:
    return type(o) is tuple and len(o) == 1 and type(o[0]) is Entry


def test_a_one_entry_message_keeps_no_wrapper_objects():
    session, clock = offline_session()
    calls(session, clock, 50)
    wrappers = live(one_entry_runs), live(lambda o: type(o) is MessageIds)
    calls(session, clock, 150)
    assert (live(one_entry_runs), live(lambda o: type(o) is MessageIds)) == wrappers
    session.close()


# nothing else a call leaves behind ---------------------------------------------------------


def kinds() -> Counter[str]:
    gc.collect()
    found: Counter[str] = Counter()
    for o in gc.get_objects():
        if isinstance(o, types.FunctionType) and "<lambda>" in o.__qualname__:
            found["lambda"] += 1
        elif isinstance(o, ForkContext | pydantic.BaseModel):
            found[type(o).__name__] += 1
        elif type(o) is dict and o.get("op") == "append":
            found["append record"] += 1
    return found


def test_calls_leave_no_hook_lambdas_fork_contexts_models_or_records_behind():
    session, clock = offline_session()
    calls(session, clock, 30)
    before = kinds()
    calls(session, clock, 120)
    assert kinds() == before
    session.close()
