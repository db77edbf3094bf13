"""``make_entry`` and ``response_entry`` in C (``C.make_entry``, ``C.response_entry``) build
the Entry their Python twins build, field by field and sharing the same atoms, on every
message and response hypothesis draws (odd roles, content, usage, uuids and timestamps);
what they hand back (None) the Python twin takes, and what the twin refuses the C path
never builds."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from helpers import compiled_twins
from hypothesis import given, settings
from hypothesis import strategies as st
from test_speedups import BLOCKS, VALUES, MyDict, MyStr, same_shape

import stenograph
from stenograph.engine import entries

C = compiled_twins()

DRAWN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
CONTENT = st.one_of(BLOCKS, VALUES, st.sampled_from(["", " ", "text", None]))
NUMBER = st.one_of(
    st.integers(-3, 10**6), st.floats(), st.booleans(), st.none(), st.text(max_size=2)
)
USAGE_KEY = st.sampled_from(entries._ALL_USAGE_KEYS + ("cache_creation", "other"))
USAGE = st.one_of(
    st.none(),
    st.integers(),
    st.dictionaries(USAGE_KEY, NUMBER, max_size=6),
    st.builds(
        lambda flat, split, kind: {**flat, "cache_creation": kind(split)},
        st.dictionaries(USAGE_KEY, NUMBER, max_size=4),
        st.dictionaries(st.sampled_from(entries.TTL_USAGE_KEYS), NUMBER, max_size=2),
        st.sampled_from([dict, MyDict]),
    ),
)
UUID = st.one_of(st.none(), st.sampled_from(["", "u-1", 0, 7]), st.text(max_size=3).map(MyStr))
STAMP = st.one_of(
    st.floats(),
    st.integers(-(10**12), 10**12),
    st.sampled_from([10**400, 253_402_300_799, -62_135_596_800, True, None, "2026-12-01"]),
)


def outcome(build: Any, *args: Any) -> Any:
    """The entry built, or the type of the error raised."""
    try:
        return build(*args)
    except Exception as exc:
        return type(exc)


def check_twins(ours: Any, theirs: Any, given: dict[str, Any]) -> None:
    """The C result (None: handed back) is the Python twin's entry, field by field."""
    if ours is None:
        return
    assert isinstance(theirs, entries.Entry), f"the Python twin raised {theirs}"
    assert type(ours) is entries.Entry
    for field in dataclasses.fields(entries.Entry):
        a, b = getattr(ours, field.name), getattr(theirs, field.name)
        if field.name == "uuid" and not given.get("uuid"):
            assert DRAWN.match(a) and DRAWN.match(b) and a != b
        elif field.name == "timestamp":
            assert a == b or (math.isnan(a) and math.isnan(b))
        elif field.name == "usage":  # int(257.0) is a new int each time: equal, not shared
            assert a == b and all(type(n) is int for n in (a or {}).values())
        else:
            assert same_shape(a, b), field.name


MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", MyStr("user")])},
    optional={"content": CONTENT, "uuid": UUID, "timestamp": STAMP, "usage": USAGE},
)


@settings(max_examples=600, deadline=None)
@given(MESSAGE, st.booleans(), st.sampled_from([0.0, 1.5e9, 7]))
def test_the_messages_become_the_same_entry(message: Any, owned: bool, now: float) -> None:
    ours = outcome(C.make_entry, message, now, owned)
    theirs = outcome(entries._make_entry, message, now, owned)
    if isinstance(ours, type):
        assert ours is theirs  # the same error
    else:
        check_twins(ours, theirs, message)


RESPONSE = st.fixed_dictionaries(
    {},
    optional={
        "content": CONTENT,
        "usage": USAGE,
        "id": st.one_of(st.none(), st.text(max_size=3)),
        "model": st.one_of(st.none(), st.just("claude")),
        "stop_reason": st.one_of(st.none(), st.just("tool_use")),
        "uuid": UUID,
        "timestamp": STAMP,
        "type": st.just("message"),
    },
)


@settings(max_examples=800, deadline=None)
@given(RESPONSE, st.booleans(), st.sampled_from([0.0, 1.5e9]))
def test_the_responses_become_the_same_entry(data: Any, owned: bool, now: float) -> None:
    ours = outcome(C.response_entry, data, now, owned)
    theirs = outcome(entries._response_entry, data, now, owned)
    if isinstance(ours, type):
        assert ours is theirs
    else:
        check_twins(ours, theirs, data)


def test_a_hosts_append_and_a_models_response_take_the_c_path() -> None:
    results = [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 5, "cache_creation": {}},
        "timestamp": 1.8e9,
    }
    user = C.make_entry({"role": "user", "content": results}, 1.0, False)
    reply = C.response_entry(response, 2.0, False)
    assert user.tool_result_ids == ("t1",) and user.content == results
    assert user.content is not results  # copied
    assert reply.usage == {"input_tokens": 3, "output_tokens": 5}
    assert reply.meta == {"id": "msg_1", "model": "claude", "stop_reason": "end_turn"}
    assert reply.timestamp == 1.8e9


def test_an_infinite_count_is_no_count() -> None:
    """Found by the twins' test: ``int(inf)`` raised OverflowError out of post_sampling."""
    for twin in (C.response_entry, entries._response_entry):
        entry = twin({"usage": {"input_tokens": float("inf"), "output_tokens": 2}}, 0.0, False)
        assert entry.usage == {"output_tokens": 2}


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "x", "uuid": "given"},  # more than role and content
        {"role": "user", "content": [stenograph.ManualClock(0.0)]},  # an object to copy
        {"role": "user", "content": [{"type": 3}]},  # a block the Python scan refuses
        {"role": "tool", "content": "x"},
        MyDict(role="user", content="x"),
    ],
    ids=["meta", "object", "odd block", "role", "dict subclass"],
)
def test_what_is_not_its_case_is_handed_back(message: dict[str, Any]) -> None:
    assert C.make_entry(message, 1.0, False) is None


LEAKS = """
import gc, sys, tracemalloc
sys.path.insert(0, {tests!r})
from test_history_speedups import conversation
from stenograph import _speedups as C
from stenograph.engine.history import History
response = {{"content": [{{"type": "text", "text": "x"}}], "usage": {{"input_tokens": 1000,
            "cache_creation": {{"ephemeral_5m_input_tokens": 7}}}}, "id": "m", "uuid": "u",
            "timestamp": 1.8e9}}
odd = {{"content": [{{"type": 3}}], "usage": {{"input_tokens": 2.0}}, "timestamp": 1.0}}
def work():
    for _ in range(200):
        C.response_entry(response, 1.0, False), C.response_entry(odd, 1.0, False)
        history = History()
        for message in conversation(3):
            history.add(C.make_entry(message, 1.0, False))
held = [response, response["usage"], response["usage"]["cache_creation"], odd["usage"],
        response["content"], response["content"][0], odd["content"], *conversation(3)]
work()
gc.collect()
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0], [sys.getrefcount(o) for o in held]
for _ in range(20):
    work()
gc.collect()
print(tracemalloc.get_traced_memory()[0] - before[0])
print(sum(sys.getrefcount(o) for o in held) - sum(before[1]))
"""


def test_the_c_twins_leak_nothing() -> None:
    """20 x 200 rounds of every C builder (and History.add) hold no memory afterwards (a
    reference kept by mistake would keep ~100 KB of entries, dicts and ints alive), nor a
    reference to the messages they read."""
    code = LEAKS.format(tests=os.path.dirname(__file__))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    kept, references = map(int, out.stdout.split())
    assert kept < 10_000, f"{kept:,} bytes kept"
    assert references == 0  # no reference to what the builders read kept
