"""The request list brought up to date in C (``C.request_reuse``) gives the requests its
Python twin gives (``sole_messages``, ``History.request_messages`` and the guard's first
test), on every sequence of host calls hypothesis draws: requests let go or held, lists a
host changed, memorized entries, windows with a preamble, truncations, tool calls left
unanswered. The same messages, the same list reused or copied, the same history state
and the same violations; and it hands back what is not its case before any change."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from helpers import compiled_twins, session_twins, under_debug_allocator
from hypothesis import given, settings
from hypothesis import strategies as st

import stenograph
from stenograph.engine import session as session_module
from stenograph.engine.request import RequestMessages

C = compiled_twins()

ENGINE = stenograph.Engine.from_preset("inactivity-only")
IDS = itertools.count()
OPS = st.sampled_from(
    ["ask"] * 3
    + ["answer tools", "answer text", "call and let go", "call and let go", "call and hold"]
    + ["touch the list", "memorize", "window", "truncate", "leave a call unanswered"]
)


class Host:
    """One session driven as a host drives it, holding what a host would hold."""

    def __init__(self, twin: bool) -> None:
        self.twin = twin
        self.session = ENGINE.open_session(
            f"request-{next(IDS)}", state_dir=None, clock=stenograph.ManualClock(1_000.0)
        )
        self.held: Any = None
        self.held_as_sent: list[Any] | None = None
        self.held_kept: list[bool] = []
        self.turn = 0
        self.refused: list[str] = []
        self.step("ask")  # a conversation starts with the user

    def step(self, op: str) -> None:
        with session_twins(None if self.twin else C):
            self._step(op)

    def _step(self, op: str) -> None:
        session, self.turn = self.session, self.turn + 1
        n, last = self.turn, session.history[-1] if len(session.history) else None
        if op == "ask":
            session.append({"role": "user", "content": f"do {n}"})
        elif op in ("answer tools", "leave a call unanswered"):
            calls = [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}}]
            session.post_sampling({"role": "assistant", "content": calls})
            if op == "answer tools":
                result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok"}
                session.append({"role": "user", "content": [result]})
        elif op == "answer text":
            session.post_sampling({"role": "assistant", "content": f"done {n}"})
        elif op.startswith("call"):  # a held request is let go once the next one is out
            try:
                request = session.pre_call(model="m")
            except stenograph.RequestError as exc:
                self.refused.append(str(exc))
                return
            if self.held is not None:  # what the host held is as it was sent
                self.held_kept.append(self.held["messages"] == self.held_as_sent)
            self.held = request if op == "call and hold" else None
            self.held_as_sent = None if self.held is None else list(request["messages"])
        elif op == "touch the list" and session.last_request is not None:
            session.last_request["messages"].append({"role": "user", "content": "x"})
            session.last_request["messages"].pop()
        elif op == "memorize":
            session.memorize(e for e in session.history if e.tool_use_ids or e.tool_result_ids)
        elif op == "window" and last is not None:
            try:
                session.set_window(last, [{"role": "user", "content": "earlier, in short"}])
            except ValueError as exc:  # not a safe place to start: the same in both
                self.refused.append(str(exc))
        elif op == "truncate":  # back to the middle of the host's questions (no call cut)
            asked = [e for e in session.history if isinstance(e.content, str) and e.role == "user"]
            session.truncate(asked[len(asked) // 2].uuid)

    def state(self) -> dict[str, Any]:
        history = self.session.history
        request = self.session.last_request
        return {
            "messages": None if request is None else list(request["messages"]),
            "refused": self.refused,
            "held kept": self.held_kept,
            "handed": (history._handed, history._handed_start),
            "replaced": set(history._replaced),
            "changed": set(history._changed),
            "violations": [e.problems for e in self.session.events if e.kind == "RequestViolation"],
        }


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=30))
def test_the_twins_give_the_same_requests(ops: list[str]) -> None:
    ours, theirs = Host(twin=False), Host(twin=True)
    for op in ops:
        ours.step(op)
        theirs.step(op)
        assert ours.state() == theirs.state(), op


def test_a_coding_agents_calls_take_the_c_path(monkeypatch: pytest.MonkeyPatch) -> None:
    python_path = []
    twin = session_module.History.request_messages
    monkeypatch.setattr(
        session_module.History,
        "request_messages",
        lambda history, reuse=None: python_path.append(1) or twin(history, reuse),
    )
    host = Host(twin=False)
    for op in ["call and let go", "answer tools"] * 20:
        host.step(op)
    assert len(python_path) == 1  # the first call's list is new; every later one brought up
    assert len(host.session.last_request["messages"]) == 39


def session_after_two_calls() -> stenograph.Session:
    host = Host(twin=False)
    for op in ["call and let go", "answer tools"]:
        host.step(op)
    return host.session


def test_what_is_not_its_case_is_handed_back_unchanged() -> None:
    session = session_after_two_calls()
    history = session.history

    def handed_back(why: str) -> None:
        before = (list(session.last_request["messages"]), history._handed)
        assert C.request_reuse(session) is None, why
        assert (list(session.last_request["messages"]), history._handed) == before, why

    session.last_request = {"messages": RequestMessages(history._messages[: history._handed])}
    held = session.last_request
    handed_back("the request held elsewhere")
    held = session.last_request["messages"]
    handed_back("its list held elsewhere")
    del held
    session.last_request["messages"].touched = True
    handed_back("the list changed by its host")
    session.last_request["messages"].touched = False
    session.last_request = {"messages": list(history._messages[: history._handed])}
    handed_back("a plain list")
    session.last_request = {"messages": RequestMessages(history._messages[: history._handed])}
    history._changed.add(len(history._messages) - 1)
    handed_back("a message pending for the guard")
    history._changed.clear()
    history._repeated_uses = 1
    handed_back("a repeated tool_use id")
    history._repeated_uses = 0
    history._replaced.add(0)
    handed_back("a message replaced")
    history._replaced.clear()
    history._handed += 1
    handed_back("another list handed out since")
    history._handed -= 1
    history._handed_start = 1
    handed_back("the window moved")
    history._handed_start = 0
    session.last_request = None
    assert C.request_reuse(session) is None
    session.last_request = {"messages": RequestMessages(history._messages[: history._handed])}
    assert C.request_reuse(session) is session.last_request["messages"]  # its case, at last
    assert history._handed == len(history._messages)


DEBUG_RUN = """
import random, sys
sys.path.insert(0, {tests!r})
from test_request_speedups import C, Host
twin, taken = C.request_reuse, []
def counted(session):
    out = twin(session)
    taken.append(out is not None)
    return out
C.request_reuse = counted
rng = random.Random(3)
ops = ["ask", "answer tools", "answer tools", "answer text", "call and let go",
       "call and let go", "call and let go", "call and hold", "touch the list", "memorize",
       "truncate"]
ours, theirs = Host(twin=False), Host(twin=True)
for n in range(1500):  # a window, or a call never answered, kept from then on: near the end
    op = rng.choice(ops + ["window", "leave a call unanswered"] * (n > 1400))
    ours.step(op)
    theirs.step(op)
print(ours.state() == theirs.state(), sum(taken))
"""


def test_a_long_run_under_the_debug_allocator() -> None:
    """Refcount or memory errors in the C twin would show here (freed memory is poisoned)."""
    code = DEBUG_RUN.format(tests=os.path.dirname(__file__))
    verdict, taken = under_debug_allocator(code).split()
    assert verdict == "True" and int(taken) > 20  # the C path taken, not only handed back
