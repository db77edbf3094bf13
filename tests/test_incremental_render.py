"""The request's messages are kept up to date incrementally (entries appended to the last
message, memorized entries switched to forms their counts prepared, rebuilt messages only
where something changed). Random sequences of appends, memorizes, replaced contents,
request windows, truncations and host edits check that what a session sends is always
what rendering the whole history from scratch gives."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import stenograph
from stenograph.engine.events import RequestViolation
from stenograph.engine.guard import check_request
from stenograph.engine.history import History
from stenograph.engine.rendering import merge_run, render_content

PROPERTY = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

words = st.sampled_from(["ok", "look here", "x" * 300, "done", "ünïcode"])
turns = st.tuples(st.just("turn"), st.integers(1, 3), st.booleans(), words)
memorizes = st.tuples(
    st.just("memorize"), st.integers(0, 40), st.booleans(), st.booleans(), st.booleans()
)
steps = st.lists(
    st.one_of(
        turns,
        turns,
        memorizes,
        st.tuples(st.just("user"), words),
        st.tuples(st.just("assistant"), words),
        st.tuples(st.just("calls"), st.integers(1, 3), st.sampled_from(["Read", "Bash"])),
        st.tuples(st.just("results"), st.integers(0, 3), st.booleans(), words),
        st.tuples(st.just("replace"), st.integers(0, 40)),
        st.tuples(st.just("window"), st.integers(0, 40), st.sampled_from(["user", "assistant"])),
        st.tuples(st.just("truncate"), st.integers(0, 40)),
        st.tuples(st.just("edit"), st.integers(0, 40), words),
    ),
    min_size=1,
    max_size=25,
)


class Conversation:
    """Drives one in-memory session; keeps the tool calls still unanswered."""

    def __init__(self) -> None:
        engine = stenograph.Engine.from_preset("inactivity-only")
        self.session = engine.open_session("s", state_dir=None, clock=stenograph.ManualClock(1e9))
        self.pending: list[str] = []
        self.ids = 0

    def apply(self, step: tuple[Any, ...]) -> None:
        session, history = self.session, self.session.history
        kind = step[0]
        if kind in ("user", "assistant"):
            session.append({"role": kind, "content": [{"type": "text", "text": step[1]}]})
        elif kind == "turn":  # a response calling tools, then their results
            self.apply(("calls", step[1], "Bash" if step[2] else "Read"))
            self.apply(("results", step[1], step[2], step[3]))
        elif kind == "calls":
            uses = [self._use(step[2]) for _ in range(step[1])]
            self.pending = [u["id"] for u in uses]
            text = [] if step[2] == "Bash" else [{"type": "text", "text": "calling"}]
            session.post_sampling({"content": [*text, *uses]})
        elif kind == "results":
            self._results(step[1], step[2], step[3])
        elif kind == "memorize" and history.entries:
            entries = [e for e in history.entries[: step[1] + 1] if e.has_tools]
            keep = [i for e in entries[-2:] for i in e.tool_result_ids] if step[2] else []
            session.memorize(entries[:: 2 if step[4] else 1], keep=keep, reduce_inputs=step[3])
        elif kind == "replace" and history.entries:
            entry = history[step[1] % len(history)]
            session.replace_sent_content(entry, _compacted(entry.content))
        elif kind == "window" and history.entries:
            index = step[1] % len(history)
            if history.safe_start(index):
                preamble = [{"role": step[2], "content": [{"type": "text", "text": "summary"}]}]
                session.set_window(history[index], preamble)
        elif kind == "truncate" and history.entries:
            session.truncate(after=history[step[1] % len(history)].uuid)
            self.pending = []
        elif kind == "edit" and history.entries:
            host = session.conversation()
            message = host[step[1] % len(host)]
            message["content"] = [
                *_as_blocks(message["content"]),
                {"type": "text", "text": step[2]},
            ]
            session.sync(host)

    def _use(self, name: str) -> dict[str, Any]:
        self.ids += 1
        return {
            "type": "tool_use",
            "id": f"toolu_{self.ids}",
            "name": name,
            "input": {"p": "v" * 250},
        }

    def _results(self, count: int, as_list: bool, text: str) -> None:
        answered, self.pending = self.pending[:count], self.pending[count:]
        content: Any = [{"type": "text", "text": text}] if not answered else []
        for i, tool_id in enumerate(answered):
            body: Any = [{"type": "text", "text": text}] if as_list else text * 3
            block = {"type": "tool_result", "tool_use_id": tool_id, "content": body}
            if i == 1:
                block["is_error"] = True
            content.append(block)
        if as_list and answered:
            content.insert(0, {"type": "text", "text": "here"})  # tool results move first
        self.session.append({"role": "user", "content": content})


def _compacted(content: Any) -> Any:
    """A shorter stand-in keeping the tool ids (what a compacting handler sends)."""
    out = []
    for block in _as_blocks(content):
        if block.get("type") == "tool_result":
            out.append({**block, "content": "(shortened)"})
        elif block.get("type") == "text":
            out.append({"type": "text", "text": block["text"][:5] or "."})
        else:
            out.append(block)
    return out


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def rendered_from_scratch(history: History) -> list[dict[str, Any]]:
    """Every entry rendered anew, same-role neighbours merged, then the window."""
    runs: list[list[Any]] = []
    for entry in history.entries:
        if not entry.content:
            continue
        if runs and runs[-1][0].role == entry.role:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    messages = [
        merge_run(r[0].role, [render_content(e, history.tool_name) for e in r]) for r in runs
    ]
    first = next(i for i, r in enumerate(runs) if r[0].index >= history.window_start) if runs else 0
    window, head = messages[first:], history.preamble
    if head and window and head[-1]["role"] == window[0]["role"]:
        joint = merge_run(window[0]["role"], [head[-1]["content"], window[0]["content"]])
        return [*head[:-1], joint, *window[1:]]
    return [*head, *window]


@PROPERTY
@given(steps, st.lists(st.integers(0, 7), max_size=25))
@example([("turn", 1, True, "ok"), ("memorize", 9, False, False, False), ("edit", 0, "more")], [])
@example([("calls", 1, "Read"), ("window", 0, "user")], [])  # a merged preamble, numbered as sent
@example(  # a problem before the window, kept to check when the window moves back over it
    [
        ("user", "ok"),
        ("calls", 1, "Read"),
        ("turn", 1, False, "ok"),
        ("turn", 1, False, "ok"),
        ("window", 5, "user"),
        ("window", 0, "user"),
    ],
    [],
)
@example(
    [
        ("turn", 1, True, "a"),
        ("memorize", 9, False, False, False),
        ("turn", 1, True, "b"),
        ("truncate", 2),
    ],
    [2, 0, 3, 0],
)
def test_the_kept_request_equals_a_full_rebuild(plan, hosts):
    """``hosts``: what the host does with each request (0-1: drops it, 2: holds it until
    the next, 3-7: changes its list in one of the ``HOST_EDITS`` ways, then drops it)."""
    conversation = Conversation()
    conversation.session.append({"role": "user", "content": "Start."})
    kept: tuple[list[Any], list[Any]] | None = None  # a request the host holds, and a copy
    for number, step in enumerate(plan):
        conversation.apply(step)
        history, session = conversation.session.history, conversation.session
        recorded = len(session.events)
        sent = session.pre_call(model="m")["messages"]
        assert sent == rendered_from_scratch(history), step
        if kept is not None:  # the list of a request the host held is left as it was
            assert kept[0] == kept[1]
        # the incremental guard (messages settled as they are placed) finds what a check of
        # the whole request finds, numbered as sent (a preamble merged with the window)
        found = [e for e in session.events[recorded:] if isinstance(e, RequestViolation)]
        assert {p for e in found for p in e.problems} == set(check_request(sent)), step
        conversation.session.wait_for_background()  # counted: memorizes use prepared forms
        host = hosts[number] if number < len(hosts) else 0
        kept = (sent, list(sent)) if host == 2 else None
        if host > 2:  # the host edits the list it was handed, then drops it
            HOST_EDITS[host - 3](sent)
        del sent  # what the host drops, the session may bring up to date in place


HOST_EDITS = [
    lambda sent: sent.append({"role": "user", "content": "more"}),
    lambda sent: sent.__setitem__(-1, {"role": sent[-1]["role"], "content": "changed"}),
    lambda sent: sent.pop(),
    lambda sent: sent.insert(0, {"role": "user", "content": "first"}),
    lambda sent: sent.reverse(),
]


def test_a_request_let_go_is_brought_up_to_date_in_place_and_one_held_is_left_alone():
    conversation = Conversation()
    session = conversation.session
    session.append({"role": "user", "content": "Start."})
    handed = id(session.pre_call(model="m")["messages"])  # let go at once, as a wrapper does
    conversation.apply(("turn", 2, False, "ok"))
    again = session.pre_call(model="m")
    # the same list, the new messages put at its end (a copy would be made while the old
    # list is still alive, so it could not have the old one's id)
    assert id(again["messages"]) == handed
    assert again["messages"] == rendered_from_scratch(session.history)
    kept = list(again["messages"])
    conversation.apply(("memorize", 40, False, False, False))
    conversation.apply(("turn", 1, True, "more"))
    latest = session.pre_call(model="m")
    assert latest["messages"] is not again["messages"]  # held: copied, not changed
    assert again["messages"] == kept
    assert latest["messages"] == rendered_from_scratch(session.history)
