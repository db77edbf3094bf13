"""``History.add`` in C (``C.history_add``) leaves the same History as its Python twin,
``History._add``: the same entries, indexes, rendered messages, guard views, pending checks
and tool tallies, the same objects shared and the same references held, on every sequence
hypothesis draws (same-role runs, empty content, repeated ids and uuids, memorized or
replaced entries, entries the guard must read itself); and it hands back what is not its
case."""

from __future__ import annotations

import os
import sys
from typing import Any

from helpers import compiled_twins, under_debug_allocator
from hypothesis import given, settings
from hypothesis import strategies as st

from stenograph.engine.entries import Entry, make_entry
from stenograph.engine.history import History

C = compiled_twins()

IDS = st.sampled_from(["t1", "t2", "t3", "t4"])
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.sampled_from(["hi", " ", ""])}),
    st.fixed_dictionaries(
        {"type": st.just("tool_use"), "id": IDS, "name": st.just("Read"), "input": st.just({})}
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_use_id": IDS, "content": st.just("ok")}
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["thinking", "server_tool_use"])}),
)
UUIDS = st.sampled_from([f"u{i}" for i in range(40)])  # some repeat
CONTENT = st.one_of(st.sampled_from(["", "hello", " ", None]), st.lists(BLOCK, max_size=4))
STEP = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": CONTENT,
        "uuid": UUIDS,
        "how": st.sampled_from(["as given"] * 6 + ["memorized", "replaced"]),
    }
)


@st.composite
def turn(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A tool call turn: an assistant's calls and then their results, in order or not."""
    ids = draw(st.lists(IDS, min_size=1, max_size=3))
    answered = draw(st.permutations(ids))
    uses = [{"type": "tool_use", "id": i, "name": "Read", "input": {}} for i in ids]
    results = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in answered]
    text = [{"type": "text", "text": "calling"}] if draw(st.booleans()) else []
    return [
        {"role": "assistant", "content": text + uses, "uuid": draw(UUIDS), "how": "as given"},
        {"role": "user", "content": results, "uuid": draw(UUIDS), "how": "as given"},
    ]


SEQUENCES = st.lists(st.one_of(STEP.map(lambda step: [step]), turn()), max_size=20).map(
    lambda parts: [step for part in parts for step in part]
)


def twins(step: dict[str, Any]) -> tuple[Entry, Entry]:
    """Two equal entries of one step, each made as a host's message becomes one."""
    message = {"role": step["role"], "content": step["content"], "uuid": step["uuid"]}
    pair = make_entry(message, 1.0), make_entry(message, 1.0)
    for entry in pair:
        if step["how"] == "memorized":
            entry.memorized = True
        elif step["how"] == "replaced":
            entry.sent_content = "replaced"
    return pair


def snapshot(history: History) -> dict[str, Any]:
    """Everything the History holds, entries named by uuid and index; shared objects and
    references as booleans and counts (the twins must hold the same)."""

    def name(value: Any) -> Any:
        if isinstance(value, Entry):
            return ("entry", value.uuid, value.index, sys.getrefcount(value))
        if isinstance(value, list):
            return [name(v) for v in value]
        return value

    refs = [sys.getrefcount(m) for m in history._messages]  # before the state holds them
    state = {key: name(value) for key, value in vars(history).items()}
    for key in ("by_uuid", "tool_use_entry", "tool_result_entry", "unmemorized_tool_entries"):
        state[key] = {k: name(v) for k, v in getattr(history, key).items()}
    state["_messages"] = [dict(m) for m in history._messages]  # not holding the dicts
    state["_message_of"] = list(history._message_of)
    state["_tool_calls"] = list(history._tool_calls)
    state["_ids"] = [name(v) if isinstance(v, Entry) else tuple(v) for v in history._ids]
    state["shared"] = [
        [message["content"] is entry.content for entry in _entries(run)]
        for message, run in zip(history._messages, history._runs, strict=True)
    ]
    state["refs"] = refs
    return state


def _entries(run: Entry | list[Entry]) -> list[Entry]:
    return [run] if isinstance(run, Entry) else run


def add_both(ours: History, theirs: History, pair: tuple[Entry, Entry]) -> str:
    """Add one twin to each History; the error each raised, which must be the same."""
    outcomes = []
    for entry, add in ((pair[0], ours.add), (pair[1], theirs._add)):
        try:
            add(entry)
            outcomes.append("added")
        except ValueError as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


@settings(max_examples=400, deadline=None)
@given(SEQUENCES)
def test_the_twins_build_the_same_history(steps: list[dict[str, Any]]) -> None:
    ours, theirs = History(), History()
    for step in steps:
        add_both(ours, theirs, twins(step))
        assert snapshot(ours) == snapshot(theirs)
    assert ours.request_problems() == theirs.request_problems()
    assert ours.messages() == theirs.messages()


def conversation(turns: int) -> list[dict[str, Any]]:
    """Alternating tool calls and their results, as a coding agent's history runs."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for i in range(turns):
        use = {"type": "tool_use", "id": f"call{i}", "name": "Read", "input": {"n": i}}
        result = {"type": "tool_result", "tool_use_id": f"call{i}", "content": "text"}
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": "reading"}, use]},
            {"role": "user", "content": [result]},
        ]
    return messages


def test_a_coding_agents_appends_take_the_c_path() -> None:
    history = History()
    taken = [C.history_add(history, make_entry(m, 1.0)) for m in conversation(20)]
    assert all(taken) and len(history) == 41
    assert history._changed == {0}  # settled as placed: the first message's role is left
    assert history.request_problems() == []


class Subclass(Entry):
    __slots__ = ()


class Odd(str):
    pass


def test_what_is_not_its_case_is_handed_back_unchanged() -> None:
    history = History()
    for message in conversation(2):
        history.add(make_entry(message, 1.0))
    before = snapshot(history)
    odd_id = {"type": "tool_result", "tool_use_id": Odd("call1"), "content": "x"}
    cases = [
        Subclass("user", "text", "s1", 1.0),  # another type: its methods may differ
        make_entry({"role": "user", "content": [odd_id]}, 1.0),  # a str subclass's hash
        make_entry({"role": "user", "content": "same role as the last message"}, 1.0),
        make_entry({"role": "assistant", "content": [{"type": "thinking"}]}, 1.0),  # not plain
        make_entry({"role": "assistant", "content": "x", "uuid": history[0].uuid}, 1.0),
    ]
    for entry in cases:
        assert C.history_add(history, entry) is False
        assert snapshot(history) == before


DEBUG_RUN = """
import random, sys
sys.path.insert(0, {tests!r})
from test_history_speedups import STEP, History, add_both, snapshot, twins
rng = random.Random(7)
ours, theirs = History(), History()
for n in range(3000):
    add_both(ours, theirs, twins(STEP.example() if n % 50 == 0 else {{
        "role": rng.choice(["user", "assistant"]),
        "content": rng.choice(["", "x", None, [{{"type": "text", "text": "t"}}],
                               [{{"type": "tool_use", "id": f"t{{n % 7}}", "name": "R"}}],
                               [{{"type": "tool_result", "tool_use_id": f"t{{n % 7}}"}}]]),
        "uuid": f"u{{rng.randrange(2500)}}",
        "how": rng.choice(["as given"] * 8 + ["memorized", "replaced"]),
    }}))
print(snapshot(ours) == snapshot(theirs), len(ours))
"""


def test_a_long_run_under_the_debug_allocator() -> None:
    """Refcount or memory errors in the C twin would show here (freed memory is poisoned)."""
    verdict, added = under_debug_allocator(
        DEBUG_RUN.format(tests=os.path.dirname(__file__))
    ).split()
    assert verdict == "True" and int(added) > 1000
