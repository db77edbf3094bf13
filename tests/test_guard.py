"""The outgoing-request guard: every Messages-API rule on ``messages``, live and in replay."""

import json

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stenograph
from stenograph.engine.entries import make_entry
from stenograph.engine.guard import MessageIds, message_ids
from stenograph.integrations.transcripts import read_transcript
from stenograph.replay import replay

Q = {"role": "user", "content": "q"}
A = {"role": "assistant", "content": "a"}


def use(*ids):
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "R", "input": {}} for i in ids],
    }


def answer(*ids):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i} for i in ids]}


THINKING = {"type": "thinking", "thinking": "hm", "signature": "sig"}

BROKEN = {
    "empty request": ([], "messages is empty"),
    "assistant first": ([A, Q], "the first message must be from the user"),
    "roles repeat": ([Q, Q], "second user message in a row"),
    "unknown role": ([Q, {"role": "system", "content": "x"}], "role 'system' is not one of"),
    "empty content": ([Q, {"role": "assistant", "content": []}], "content is empty"),
    "blank string": ([{"role": "user", "content": " \n"}], "text is empty or whitespace only"),
    "blank block": (
        [Q, {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}]}],
        "block 0: text block is empty or whitespace only",
    ),
    "repeated tool id": (
        [Q, use("t"), answer("t"), use("t"), answer("t")],
        "tool_use id t already used in message 1",
    ),
    "unanswered call": ([Q, use("t"), Q], "tool_use t has no tool_result after it"),
    "stray result": ([answer("zz")], "tool_result zz answers no tool_use"),
    "thinking from the user": (
        [{"role": "user", "content": [THINKING]}],
        "thinking block in a user message",
    ),
    "unsigned thinking": (
        [Q, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}],
        "thinking block without signature",
    ),
}


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_each_rule_is_reported(case):
    messages, expected = BROKEN[case]
    problems = stenograph.check_request(messages)
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_valid_request_passes():
    good = [Q, {"role": "assistant", "content": [THINKING, *use("t")["content"]]}, answer("t")]
    assert stenograph.check_request(good) == []
    assert stenograph.check_request([Q, A, Q]) == []


def open_session(strict: bool, tmp_path):
    path = tmp_path / "p.toml"
    flag = "true" if strict else "false"
    path.write_text(f'strict = {flag}\n[[handlers]]\nuse = "inactivity-memorize"\n')
    return stenograph.Engine.from_preset(path).open_session("s", None)


@pytest.mark.parametrize(
    "case", ["blank string", "roles repeat", "repeated tool id", "unanswered call"], ids=str
)
def test_the_session_checks_every_request(case, tmp_path):
    """What a host appends is checked as it is sent: a RequestViolation event, or a
    RequestError in a strict preset, saying what the API would reject."""
    messages, expected = BROKEN[case]
    if case == "roles repeat":  # appended entries of one role are merged: the request is fine
        session = open_session(True, tmp_path)
        for m in messages:
            session.append(m)
        assert session.pre_call(model="m")["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "q"}] * 2}
        ]
        return
    lax = open_session(False, tmp_path)
    for m in messages:
        lax.append(m)
    lax.pre_call(model="m")
    (event,) = [e for e in lax.events if isinstance(e, stenograph.RequestViolation)]
    assert any(expected in p for p in event.problems), event.problems
    strict = open_session(True, tmp_path)
    for m in messages:
        strict.append(m)
    with pytest.raises(stenograph.RequestError, match=expected) as raised:
        strict.pre_call(model="m")
    assert raised.value.problems == list(event.problems)


def test_the_guard_checks_only_what_changed_but_misses_nothing(tmp_path):
    """A problem is reported on the request that brings it, and a later problem is found
    after many clean calls (the incremental check covers every new message)."""
    session = open_session(False, tmp_path)
    session.append(Q)
    for n in range(30):
        session.pre_call(model="m")
        session.post_sampling({"role": "assistant", "content": [*use(f"t{n}")["content"]]})
        session.append(answer(f"t{n}"))
    session.pre_call(model="m")
    assert not [e for e in session.events if isinstance(e, stenograph.RequestViolation)]
    session.post_sampling(use("t3"))  # an id used 27 calls ago
    session.append(answer("t3"))
    session.pre_call(model="m")
    (event,) = [e for e in session.events if isinstance(e, stenograph.RequestViolation)]
    assert event.problems == (
        "message 61: tool_use id t3 already used in message 7 (ids must be unique)",
    )


@pytest.mark.parametrize(
    "reply, expected",
    [
        (answer("b", "a"), ()),  # answered out of order: the API takes it
        (
            answer("a", "old"),
            (
                "message 61: tool_use b has no tool_result after it",
                "message 62: tool_result old answers no tool_use of message 61",
            ),
        ),
        (
            Q,
            (
                "message 61: tool_use a has no tool_result after it",
                "message 61: tool_use b has no tool_result after it",
            ),
        ),
        (answer("a", "a", "b"), ("message 62: tool_use a answered twice",)),
    ],
    ids=["out of order", "an older call's id", "left unanswered", "answered twice"],
)
def test_the_incremental_guard_finds_exactly_what_the_whole_check_does(tmp_path, reply, expected):
    """After many clean calls (each checked only where it changed), a reply that breaks
    the pairing is found, and one that only looks unusual is not refused."""
    session = open_session(False, tmp_path)
    session.append(Q)
    for n in range(30):
        session.pre_call(model="m")
        session.post_sampling(use(f"t{n}"))
        session.append(answer(f"t{n}"))
    session.post_sampling(use("a", "b"))
    session.append(reply)
    request = session.pre_call(model="m")
    violations = [e for e in session.events if isinstance(e, stenograph.RequestViolation)]
    assert tuple(p for e in violations for p in e.problems) == expected
    assert tuple(stenograph.check_request(request["messages"])) == expected


def test_the_local_api_server_refuses_what_the_guard_reports(messages_server, anthropic_client):
    """The test server answers 400 like the API for a request the guard reports."""
    messages_server.script()
    with pytest.raises(anthropic.BadRequestError, match="second user message in a row"):
        anthropic_client.messages.create(model="m", max_tokens=5, messages=[Q, Q])


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def cc(uuid, parent, kind, content, at, **extra):
    """One Claude Code record."""
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": extra.pop("message_id", f"msg-{uuid}"), "model": "claude-x"}
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s",
        "timestamp": f"2025-01-01T00:{at // 60:02d}:{at % 60:02d}.000Z",
        "message": message,
        **extra,
    }


def tool_call(tool_id):
    return [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}]


def tool_answer(tool_id):
    return [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}]


def test_replay_renames_repeated_tool_ids_on_both_sides(tmp_path):
    path = write_jsonl(
        tmp_path / "dup.jsonl",
        [
            cc("u1", None, "user", "go", 0),
            cc("a1", "u1", "assistant", tool_call("t"), 1),
            cc("r1", "a1", "user", tool_answer("t"), 2),
            cc("a2", "r1", "assistant", tool_call("t"), 3),
            cc("r2", "a2", "user", tool_answer("t"), 4),
            cc("a3", "r2", "assistant", [{"type": "text", "text": "done"}], 5),
        ],
    )
    messages = read_transcript(path).messages
    assert messages[3]["content"][0]["id"] == "t~2" == messages[4]["content"][0]["tool_use_id"]
    assert messages[1]["content"][0]["id"] == "t" == messages[2]["content"][0]["tool_use_id"]
    report = replay(path, state_dir=None)
    assert report.calls == 3 and report.request_violations == []


def test_replay_leaves_out_blank_text_blocks(tmp_path):
    path = write_jsonl(
        tmp_path / "blank.jsonl",
        [
            cc("u1", None, "user", "go", 0),
            cc("a1", "u1", "assistant", [{"type": "text", "text": "\n\n"}], 1, message_id="m1"),
            cc("a2", "a1", "assistant", tool_call("t"), 1, message_id="m1"),
            cc("r1", "a2", "user", tool_answer("t"), 2),
            cc("a3", "r1", "assistant", [{"type": "text", "text": "done"}], 5),
        ],
    )
    transcript = read_transcript(path)
    assert transcript.messages[1]["content"] == tool_call("t")
    (omission,) = transcript.omitted
    assert (omission.reason, omission.lost, omission.count) == ("blank text block", False, 1)
    report = replay(path, state_dir=None)
    assert report.calls == 2 and report.request_violations == []


def test_a_request_of_a_preamble_alone_is_checked_as_sent():
    """A window starting past every message sends the preamble alone: its messages are the
    request, checked as such (not an empty request)."""
    from stenograph.engine.history import History

    history = History()
    history.set_window(0, [{"role": "user", "content": "the notes so far"}])
    assert history.messages() == [{"role": "user", "content": "the notes so far"}]
    assert history.request_problems() == stenograph.check_request(history.messages()) == []


BLOCKS = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": st.sampled_from(["ok", "", " \n", "\u3000", "x y"])}
    ),
    st.fixed_dictionaries({"type": st.just("text"), "text": st.sampled_from([None, 3])}),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["tool_use", "server_tool_use"]),
            "id": st.sampled_from(["t1", "t2", 7]),
            "name": st.just("Read"),
            "input": st.just({}),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_use_id": st.sampled_from(["t1", "t2", None])}
    ),
    st.just(THINKING),
    st.just({"type": "thinking", "thinking": "hm"}),
    st.just({"type": "image", "source": {"type": "base64", "data": "AA=="}}),
)


@given(
    role=st.sampled_from(["user", "assistant"]),
    content=st.one_of(st.sampled_from(["", " ", "hi"]), st.lists(BLOCKS, max_size=4)),
)
@settings(max_examples=300, deadline=None)
def test_an_entry_read_as_its_own_guard_view_says_what_the_message_does(role, content):
    """The guard reads a plain entry (``Entry.plain``) instead of scanning its message: only
    when the scan would find the entry's own tool ids and no problem."""
    entry = make_entry({"role": role, "content": content}, 0.0)
    seen = message_ids({"role": role, "content": entry.content})
    if entry.plain:
        assert seen == MessageIds(role, entry.tool_use_ids, entry.tool_result_ids, ())
        return
    kinds = {"text"} if isinstance(content, str) else {b["type"] for b in content}
    if content and kinds <= {"text", "tool_use", "tool_result"}:  # not plain: the scan differs
        assert seen.content_problems or seen[1:3] != (entry.tool_use_ids, entry.tool_result_ids)
