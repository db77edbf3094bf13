"""``Session._add`` of an in-memory session in C (``C.session_add``) leaves the same session
as its Python twin (``_check`` then ``_commit``): the same History, ``_host_known``, queue of
entries to count and newest response, the same references held, and the same error for
what cannot be appended, before anything changed. What is not surely its case (an entry
whose JSON or timestamp needs a closer look, another type, a session with a store) is
handed back unchanged."""

from __future__ import annotations

import itertools
import math
import os
import sys
from pathlib import Path
from typing import Any

from helpers import compiled_twins, session_twins, under_debug_allocator
from hypothesis import given, settings
from hypothesis import strategies as st
from test_history_speedups import BLOCK, conversation, snapshot

import stenograph
from stenograph.engine.entries import Entry, EntryError, make_entry

C = compiled_twins()


ENGINE = stenograph.Engine.from_preset("inactivity-only")
IDS = itertools.count()
ODD_VALUES = [math.nan, math.inf, {1, 2}, ("a", "b"), 10**5000, "\ud800", {3: "x"}]
CONTENT = st.one_of(
    st.sampled_from(["", "hello", " ", None]),
    st.lists(BLOCK, max_size=4),
    st.lists(
        st.sampled_from(ODD_VALUES).map(lambda odd: {"type": "text", "text": odd}), max_size=1
    ),
)
# what entries can hold: a clock's float, a record's None, a response's stamp near the
# years' ends (beyond SURELY_IN_RANGE: the Python twin formats it to be sure), an int
STAMPS = st.sampled_from([1.0, 1_700_000_000.5, None, 5, -62_135_596_700.0, 253_402_300_000.0])
METAS = st.sampled_from([None, {"stop_reason": "end_turn"}, {"odd": math.nan}, {1: "x"}])
STEP = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": CONTENT,
        "uuid": st.one_of(st.sampled_from([f"u{i}" for i in range(30)]), st.just("\udfff")),
        "timestamp": STAMPS,
        "meta": METAS,
    }
)


def entry_of(step: dict[str, Any]) -> Entry:
    """An entry as a host's message becomes one (content ``make_entry`` refuses is given
    afterwards), then given the step's stamp and meta."""
    message = {"role": step["role"], "content": step["content"], "uuid": step["uuid"]}
    try:
        entry = make_entry(message, 1.0)
    except EntryError:
        entry = make_entry({**message, "content": ""}, 1.0)
        entry.content = step["content"]
    entry.timestamp, entry._meta = step["timestamp"], step["meta"]
    return entry


def state(session: stenograph.Session) -> dict[str, Any]:
    """What ``_add`` changes in a session, entries named by uuid, index and references."""

    def name(entry: Entry | None) -> Any:
        return None if entry is None else (entry.uuid, entry.index, sys.getrefcount(entry))

    return {
        "history": snapshot(session.history),
        "host_known": session._host_known,
        "uncounted": [name(e) for e in session._uncounted],
        "last_response": name(session._last_response),
    }


def add_both(ours: stenograph.Session, theirs: stenograph.Session, step: dict[str, Any]) -> str:
    """One twin entry added to each session; the outcome, which must be the same."""
    outcomes = []
    for session in (ours, theirs):
        entry = entry_of(step)
        try:
            with session_twins(None if session is theirs else C):
                session._add(entry)
            outcomes.append("added")
        except EntryError as exc:
            outcomes.append(f"EntryError: {exc}")
        del entry
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


def open_pair() -> tuple[stenograph.Session, stenograph.Session]:
    """Two in-memory sessions on clocks that read the same."""
    return tuple(  # type: ignore[return-value]
        ENGINE.open_session(
            f"twin-{next(IDS)}", state_dir=None, clock=stenograph.ManualClock(1_000.0)
        )
        for _ in range(2)
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=16))
def test_the_twins_leave_the_same_session(steps: list[dict[str, Any]]) -> None:
    ours, theirs = open_pair()
    for step in steps:
        add_both(ours, theirs, step)
        assert state(ours) == state(theirs)
    assert ours.history.messages() == theirs.history.messages()


def test_a_coding_agents_appends_take_the_c_path() -> None:
    session = ENGINE.open_session(f"one-{next(IDS)}", state_dir=None)
    for message in conversation(10):
        entry = make_entry(message, 1.0)
        assert C.session_add(session, entry) is True
    assert session._host_known == len(session.history) == 21
    assert session._last_response is session.history[-2]
    assert list(session._uncounted) == session.history.entries
    assert session.history.request_problems() == []


def test_the_host_api_takes_it() -> None:
    """``append`` and ``post_sampling`` give what they gave before, through the C twin."""
    ours, theirs = open_pair()
    for message in conversation(6):
        for session in (ours, theirs):
            call = session.append if message["role"] == "user" else session.post_sampling
            with session_twins(None if session is theirs else C):
                call(dict(message))
    assert [e.to_record() | {"uuid": ""} for e in ours.history] == [
        e.to_record() | {"uuid": ""} for e in theirs.history
    ]
    assert ours._host_known == theirs._host_known == 13


class Subclass(Entry):
    __slots__ = ()


def test_what_is_not_its_case_is_handed_back_unchanged(tmp_path: Path) -> None:
    session = ENGINE.open_session(f"one-{next(IDS)}", state_dir=None)
    for message in conversation(2):
        session._add(make_entry(message, 1.0))
    before = state(session)
    odd_stamp = make_entry({"role": "assistant", "content": "x"}, 1.0)
    odd_stamp.timestamp = 5  # an int: the Python twin compares it
    odd_meta = make_entry({"role": "assistant", "content": "x"}, 1.0)
    odd_meta._meta = {"n": ("a",)}  # JSON takes a tuple; the walk is unsure of it
    odd_uuid = make_entry({"role": "assistant", "content": "x"}, 1.0)
    odd_uuid.uuid = "\ud800"
    cases = {
        "another type": Subclass("assistant", "text", "s1", 1.0),
        "no timestamp of its case": odd_stamp,
        "meta the walk is unsure of": odd_meta,
        "a uuid UTF-8 refuses": odd_uuid,
        "content not JSON": make_entry({"role": "assistant", "content": "x"}, 1.0),
        "a known uuid": make_entry({"role": "assistant", "content": "x"}, 1.0),
        "same role as the last message": make_entry({"role": "user", "content": "again"}, 1.0),
    }
    cases["content not JSON"].content = [{"type": "text", "text": math.nan}]
    cases["a known uuid"].uuid = session.history[0].uuid
    for name, entry in cases.items():
        assert C.session_add(session, entry) is False, name
        assert state(session) == before, name
    stored = ENGINE.open_session("stored", state_dir=tmp_path)
    try:
        assert C.session_add(stored, make_entry({"role": "user", "content": "x"}, 1.0)) is False
        assert len(stored.history) == 0
    finally:
        stored.close()


DEBUG_RUN = """
import math, random, sys
sys.path.insert(0, {tests!r})
from test_session_add_speedups import add_both, open_pair, state
rng = random.Random(7)
ours, theirs = open_pair()
for n in range(3000):
    add_both(ours, theirs, {{
        "role": rng.choice(["user", "assistant"]),
        "content": rng.choice(["", "x", None, [{{"type": "text", "text": "t"}}],
                               [{{"type": "tool_use", "id": f"t{{n % 7}}", "name": "R"}}],
                               [{{"type": "tool_result", "tool_use_id": f"t{{n % 7}}"}}],
                               [{{"type": "text", "text": math.nan}}]]),
        "uuid": f"u{{rng.randrange(2500)}}",
        "timestamp": rng.choice([1.0, 2.5, None, 3, 253_402_300_000.0]),
        "meta": rng.choice([None, {{"stop_reason": "x"}}, {{"n": math.inf}}]),
    }})
print(state(ours) == state(theirs), len(ours.history))
"""


def test_a_long_run_under_the_debug_allocator() -> None:
    """Refcount or memory errors in the C twin would show here (freed memory is poisoned)."""
    verdict, added = under_debug_allocator(
        DEBUG_RUN.format(tests=os.path.dirname(__file__))
    ).split()
    assert verdict == "True" and int(added) > 1000
