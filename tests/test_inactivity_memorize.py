"""inactivity-memorize: when it acts, what it marks, how marked entries are sent."""

from __future__ import annotations

import json
import logging

import pytest
from helpers import open_session, run_tool_calls, text_reply, tool_result, tool_turn

import stenograph


def _results(request: dict) -> list[dict]:
    return [
        block
        for message in request["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]


def _pause_then_ask(session, clock, seconds: float) -> dict:
    session.pre_call(model="m")
    session.post_sampling(text_reply())
    clock.advance(seconds)
    session.append({"role": "user", "content": "And now?"})
    return session.pre_call(model="m")


def test_below_threshold_nothing_is_marked():
    session, clock = open_session()
    run_tool_calls(session, clock, 3)
    request = _pause_then_ask(session, clock, 299)
    assert not any(e.memorized for e in session.history)
    assert all(r["content"] == "x" * 4000 for r in _results(request))


def test_at_threshold_earlier_tool_entries_are_memorized():
    session, clock = open_session()
    ids = run_tool_calls(session, clock, 3)
    request = _pause_then_ask(session, clock, 300)
    marked = [e for e in session.history if e.memorized]
    assert len(marked) == 6 and all(e.has_tools for e in marked)
    results = _results(request)
    assert [r["tool_use_id"] for r in results] == ids
    assert all(
        r["content"].startswith("[memorized: Read result left out (4,000 chars") for r in results
    )
    assert not stenograph.check_request(request["messages"])
    event = next(e for e in session.events if isinstance(e, stenograph.EntriesMemorized))
    assert event.gap_seconds == 300 and len(event.uuids) == 6 and event.tokens_saved > 1000
    assert event.handler == "inactivity-memorize" and event.slot == 0


def test_user_text_and_history_stay_whole():
    session, clock = open_session()
    run_tool_calls(session, clock, 2)
    request = _pause_then_ask(session, clock, 600)
    assert request["messages"][0] == {"role": "user", "content": "Fix the failing test."}
    full = [e for e in session.history if e.tool_result_ids]
    assert all(e.content[0]["content"] == "x" * 4000 for e in full)


def test_new_input_after_the_pause_is_not_memorized():
    session, clock = open_session()
    session.pre_call(model="m")
    message, tool_id = tool_turn()
    session.post_sampling(message)
    clock.advance(900)  # the tool ran for 15 minutes
    session.append(tool_result(tool_id, "fresh result"))
    request = session.pre_call(model="m")
    assert _results(request)[0]["content"] == "fresh result"


def test_same_bytes_on_every_call_and_idempotent():
    session, clock = open_session()
    run_tool_calls(session, clock, 2)
    first = _pause_then_ask(session, clock, 400)
    again = session.pre_call(model="m")
    assert json.dumps(first["messages"]) == json.dumps(again["messages"])
    session.post_sampling(text_reply())
    run_tool_calls(session, clock, 1)
    second = _pause_then_ask(session, clock, 400)
    events = [e for e in session.events if isinstance(e, stenograph.EntriesMemorized)]
    assert [len(e.uuids) for e in events] == [4, 2]
    assert json.dumps(second["messages"][: len(first["messages"]) - 1]) == json.dumps(
        first["messages"][:-1]
    )


@pytest.mark.parametrize(
    "prepare",
    [
        lambda s: None,  # no assistant entry yet
        lambda s: s.append({"role": "assistant", "content": "hi", "timestamp": "not a time"}),
        lambda s: s.append({"role": "assistant", "content": "hi", "timestamp": None}),
    ],
)
def test_skips_silently_without_a_valid_timestamp(prepare):
    session, clock = open_session()
    prepare(session)
    clock.advance(10_000)
    session.append({"role": "user", "content": "?"})
    session.pre_call(model="m")
    assert session.events == []


def test_empty_history_is_skipped():
    engine = stenograph.Engine.from_preset("default")
    session = engine.open_session("empty", state_dir=None)
    assert session.pre_call(model="m")["messages"] == []
    assert [e.kind for e in session.events] == ["RequestViolation"]  # the guard, not memorize


def test_keep_recent_keeps_the_newest_results_whole():
    session, clock = open_session(overrides={"inactivity-memorize": {"keepRecent": 2}})
    ids = run_tool_calls(session, clock, 4)
    request = _pause_then_ask(session, clock, 301)
    whole = [r["tool_use_id"] for r in _results(request) if r["content"] == "x" * 4000]
    assert whole == ids[-2:]


def test_exclude_tools_are_never_reduced():
    session, clock = open_session(overrides={"inactivity-memorize": {"excludeTools": ["Bash"]}})
    run_tool_calls(session, clock, 2, name="Read")
    bash = run_tool_calls(session, clock, 1, name="Bash")
    request = _pause_then_ask(session, clock, 301)
    contents = {r["tool_use_id"]: r["content"] for r in _results(request)}
    assert contents[bash[0]] == "x" * 4000
    assert sum(c.startswith("[memorized") for c in contents.values()) == 2


def test_min_tokens_saved_skips_small_savings():
    session, clock = open_session(overrides={"inactivity-memorize": {"minTokensSaved": 50_000}})
    run_tool_calls(session, clock, 2)
    _pause_then_ask(session, clock, 301)
    assert not any(e.memorized for e in session.history)
    skipped = [e for e in session.events if isinstance(e, stenograph.MemorizeSkipped)]
    assert len(skipped) == 1 and "minTokensSaved 50,000" in skipped[0].reason


def test_reduce_tool_inputs_shortens_long_inputs_only():
    session, clock = open_session(overrides={"inactivity-memorize": {"reduceToolInputs": True}})
    session.pre_call(model="m")
    message, tool_id = tool_turn("Write", file_path="/a.py", content="y" * 1000)
    session.post_sampling(message)
    session.append(tool_result(tool_id, "ok"))
    request = _pause_then_ask(session, clock, 301)
    tool_use = request["messages"][1]["content"][1]
    assert tool_use["input"]["file_path"] == "/a.py"
    assert tool_use["input"]["content"].endswith("… [800 chars left out]")
    assert session.history[1].content[1]["input"]["content"] == "y" * 1000


def test_error_flag_and_images_survive_in_the_placeholder():
    session, clock = open_session()
    session.pre_call(model="m")
    message, tool_id = tool_turn("Screenshot")
    session.post_sampling(message)
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    }
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": [image], "is_error": True}
    session.append({"role": "user", "content": [block]})
    result = _results(_pause_then_ask(session, clock, 301))[0]
    assert result["is_error"] is True
    assert "1 image/document block" in result["content"] and "Screenshot" in result["content"]


def test_logs_start_each_entry_and_summary(caplog):
    caplog.set_level(logging.DEBUG, logger="stenograph.handlers.inactivity_memorize")
    session, clock = open_session()
    run_tool_calls(session, clock, 2)
    _pause_then_ask(session, clock, 301)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("acting: gap 301s >= threshold 300s") for m in messages)
    assert sum(m.startswith("memorized entry") for m in messages) == 4
    assert any(m.startswith("memorized 4 entries") for m in messages)
