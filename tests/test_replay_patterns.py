"""Small Claude Code files for each pattern replay must read exactly: the calls, the gaps,
the memorize events, what is not replayed and the guard's verdict."""

from __future__ import annotations

import json

from stenograph.integrations.transcripts import read_transcript
from stenograph.replay import replay

T0 = 1_735_689_600.0  # 2025-01-01T00:00:00Z


def at(seconds: float) -> str:
    whole, millis = divmod(round(seconds * 1000), 1000)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    return f"2025-01-01T{hours:02d}:{minutes:02d}:{secs:02d}.{millis:03d}Z"


def rec(uuid, parent, kind, content, seconds, **extra):
    """One Claude Code record at ``seconds`` after T0."""
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": extra.pop("message_id", f"msg-{uuid}"), "model": "claude-x"}
    record = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s"}
    return {**record, "timestamp": at(seconds), "message": message, **extra}


def call(tool_id):
    return [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}]


def answer(tool_id, text="ok " * 400):
    return [{"type": "tool_result", "tool_use_id": tool_id, "content": text}]


def text(words):
    return [{"type": "text", "text": words}]


def boundary(uuid, logical_parent, seconds):
    return {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": uuid,
        "parentUuid": None,
        "logicalParentUuid": logical_parent,
        "timestamp": at(seconds),
        "content": "Conversation compacted",
    }


def summary(uuid, parent, seconds, words="Summary of the earlier conversation."):
    return rec(uuid, parent, "user", words, seconds, isCompactSummary=True)


def write(tmp_path, records, name="s.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def reasons(report) -> dict[str, tuple[int, bool]]:
    return {o["reason"]: (o["count"], o["lost"]) for o in report.not_replayed}


def tool_session(start=0, prefix="", pause=0.0):
    """A prompt and two tool calls; the second response took 429 s (long thinking)."""
    p = prefix
    return [
        rec(f"{p}u1", None, "user", "fix it", start),
        rec(f"{p}a1", f"{p}u1", "assistant", call(f"{p}t1"), start + 5),
        rec(f"{p}r1", f"{p}a1", "user", answer(f"{p}t1"), start + 5.884),
        rec(f"{p}a2", f"{p}r1", "assistant", call(f"{p}t2"), start + 5.884 + 429.533),
        rec(f"{p}r2", f"{p}a2", "user", answer(f"{p}t2"), start + 436),
        rec(f"{p}a3", f"{p}r2", "assistant", text("done"), start + 440),
        rec(f"{p}u2", f"{p}a3", "user", "and now the docs", start + 440 + pause),
        rec(f"{p}a4", f"{p}u2", "assistant", text("ok"), start + 450 + pause),
    ]


def test_long_thinking_never_memorizes_by_itself(tmp_path):
    """The request of call 1 left 9 ms... here 0.884 s after its input, and 0.884 s after
    the previous response: the 429 s the response took are not a pause."""
    report = replay(write(tmp_path, tool_session()), "inactivity-only", state_dir=None)
    assert report.calls == 4 and report.memorize_events == [] and report.exit_status == 0
    assert report.request_violations == [] and report.lost == 0


def test_a_real_pause_is_measured_from_the_response_end_to_the_input(tmp_path):
    report = replay(write(tmp_path, tool_session(pause=400)), "inactivity-only", state_dir=None)
    (event,) = report.memorize_events
    assert event["before_assistant_index"] == 3 and event["gap_seconds"] == 400.0
    assert event["entries"] == 4  # the two calls and their results


def test_compaction_whose_logical_parent_is_missing_keeps_the_history(tmp_path):
    records = [
        *tool_session()[:6],
        boundary("b1", "not-in-the-file", 500),
        summary("s1", "b1", 500.1),
        rec("u3", "s1", "user", "go on", 510),
        rec("a5", "u3", "assistant", text("going on"), 515),
    ]
    path = write(tmp_path, records)
    messages = read_transcript(path).messages
    assert [m.get("uuid") for m in messages] == ["u1", "a1", "r1", "a2", "r2", "a3", "u3", "a5"]
    report = replay(path, "default", state_dir=None)
    assert report.calls == 4 and report.exit_status == 0 and report.request_violations == []
    assert reasons(report)["compact summary (the history it summarises is replayed)"] == (1, False)


def test_a_file_starting_at_a_compaction_keeps_its_summary(tmp_path):
    records = [
        boundary("b1", "earlier-file", 0),
        summary("s1", "b1", 0.1),
        rec("u3", "s1", "user", "go on", 10),
        rec("a5", "u3", "assistant", text("going on"), 15),
    ]
    messages = read_transcript(write(tmp_path, records)).messages
    assert messages[0]["content"] == "Summary of the earlier conversation."
    report = replay(write(tmp_path, records), "default", state_dir=None)
    assert report.calls == 1 and report.exit_status == 0 and report.lost == 0


def test_several_compactions_in_one_session(tmp_path):
    first, second = tool_session(0, "x"), tool_session(1000, "y")
    second[0]["parentUuid"] = "s1"
    records = [
        *first,
        boundary("b1", "gone-1", 900),
        summary("s1", "b1", 900.1),
        *second,
        boundary("b2", second[-1]["uuid"], 1900),  # this logical parent is in the file
        summary("s2", "b2", 1900.1),
        rec("u9", "s2", "user", "last one", 1910),
        rec("a9", "u9", "assistant", text("fine"), 1915),
    ]
    report = replay(write(tmp_path, records), "default", state_dir=None)
    assert report.calls == 9 and report.exit_status == 0 and report.request_violations == []
    assert reasons(report)["compact summary (the history it summarises is replayed)"] == (2, False)


def test_a_meta_record_newer_than_its_children_does_not_end_the_chain(tmp_path):
    caveat = rec("m1", "a1", "user", "Caveat: local command output.", 100, isMeta=True)
    records = [
        rec("u1", None, "user", "hi", 0),
        rec("a1", "u1", "assistant", text("hello"), 5),
        caveat,
        rec("u2", "m1", "user", "do it", 99.99),  # written a few ms before its parent
        rec("a2", "u2", "assistant", text("done"), 99.995),
    ]
    report = replay(write(tmp_path, records), "default", state_dir=None)
    assert report.calls == 2 and report.exit_status == 0


def test_a_later_branch_without_responses_does_not_hide_the_calls(tmp_path):
    """The branch holding the newest response wins over a newer one that holds none."""
    records = [
        rec("m1", None, "user", "Caveat: local command output.", 0, isMeta=True),
        rec("u1", "m1", "user", "fix it", 1),
        rec("a1", "u1", "assistant", call("t1"), 2),
        rec("r1", "a1", "user", answer("t1"), 3),
        rec("a2", "r1", "assistant", text("done"), 4),
        rec("x1", "m1", "user", "<bash-input>ls</bash-input>", 50),
        rec("x2", "x1", "user", "<bash-stdout>a b</bash-stdout>", 51),
    ]
    report = replay(write(tmp_path, records), "default", state_dir=None)
    assert report.calls == 2 and report.exit_status == 0
    assert reasons(report)["record on an abandoned branch (rewound or superseded)"] == (2, False)


def test_a_rewound_branch_is_left_out_and_its_calls_counted(tmp_path):
    records = [
        rec("u1", None, "user", "hi", 0),
        rec("a1", "u1", "assistant", text("first try"), 5),
        rec("u2", "u1", "user", "hi again", 10),  # a rewind: a sibling of the first reply
        rec("a2", "u2", "assistant", text("second try"), 15),
    ]
    report = replay(write(tmp_path, records), "default", state_dir=None)
    assert report.calls == 1 and report.exit_status == 0
    assert reasons(report)["model calls on abandoned branches"] == (1, False)


def test_queued_prompts_are_replayed_as_input_at_their_time(tmp_path):
    queued = {
        "type": "queue-operation",
        "operation": "enqueue",
        "timestamp": at(3),
        "content": [{"type": "text", "text": "also update the docs"}],
        "sessionId": "s",
    }
    delivered = {**queued, "timestamp": at(20), "content": "and the changelog"}
    records = [
        rec("u1", None, "user", "fix it", 0),
        rec("a1", "u1", "assistant", call("t1"), 1),
        queued,
        rec("r1", "a1", "user", answer("t1"), 5),
        rec("a2", "r1", "assistant", text("done, docs too"), 6),
        delivered,
        {"type": "queue-operation", "operation": "dequeue", "timestamp": at(20.001)},
        rec("u2", "a2", "user", "and the changelog", 20.01),
        rec("a3", "u2", "assistant", text("changelog done"), 25),
    ]
    path = write(tmp_path, records)
    messages = read_transcript(path).messages
    assert [m["content"] for m in messages if m["role"] == "user"][1] == queued["content"]
    report = replay(path, "default", state_dir=None)
    assert report.calls == 3 and report.exit_status == 0
    assert "also update the docs" in json.dumps(report.ledger.calls[1].sent["messages"])
    assert reasons(report)["queued prompt (replayed as the user message it became)"] == (1, False)


def test_attachments_whose_content_is_not_recorded_are_reported_lost(tmp_path):
    records = [
        rec("u1", None, "user", "fix it", 0),
        {
            "type": "attachment",
            "uuid": "h1",
            "parentUuid": "u1",
            "timestamp": at(0.5),
            "attachment": {"type": "hook_additional_context", "content": ["be careful"]},
        },
        rec("a1", "h1", "assistant", text("done"), 5),
    ]
    report = replay(write(tmp_path, records), "default", state_dir=None)
    assert report.calls == 1 and report.exit_status == 1 and report.lost == 1
    reason = (
        "attachment (hook_additional_context): sent to the model in a form the file does not hold"
    )
    assert reasons(report)[reason] == (1, True)
