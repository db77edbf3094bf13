"""Tests for stenograph.integrations.transcripts (hand-built fixtures + the shared real data)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stenograph
from stenograph.engine.rendering import merge_run
from stenograph.integrations.transcripts import Transcript, TranscriptError, read_transcript

DATA = Path(__file__).parent.parent.parent / "shared" / "data" / "transcripts"
NO_DATA = f"real transcripts not found at {DATA} (../shared/data is absent in a fresh clone)"
REAL_FILES = (
    sorted(p for p in DATA.rglob("*") if p.suffix in (".jsonl", ".json", ".traj"))
    if DATA.is_dir()
    else []
)
FORMATS = ("claude-code-jsonl", "anthropic-messages-json", "openhands-json", "swe-agent-traj")
USAGE_KEYS = {
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
}
TTL_KEYS = {"ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"}


# --- builders for Claude Code records ---------------------------------------------------------


def ts(seconds: float) -> str:
    moment = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def user(uuid: str, parent: str | None, t: float, content, **extra) -> dict:
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s1",
        "timestamp": ts(t),
        "message": {"role": "user", "content": content},
        **extra,
    }


def assistant(uuid: str, parent: str | None, t: float, block: dict, msg_id: str, out=1) -> dict:
    usage = {
        "input_tokens": 3,
        "output_tokens": out,
        "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 20,
        "service_tier": "standard",
    }
    message = {
        "id": msg_id,
        "role": "assistant",
        "model": "claude-test",
        "content": [block],
        "usage": usage,
    }
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s1",
        "timestamp": ts(t),
        "message": message,
    }


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def call(tool_use_id: str) -> dict:
    return {"type": "tool_use", "id": tool_use_id, "name": "Read", "input": {"path": "a.py"}}


def result(tool_use_id: str) -> list[dict]:
    return [{"type": "tool_result", "tool_use_id": tool_use_id, "content": "ok"}]


def write_lines(path: Path, lines: list) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def summary(messages: list[dict]) -> list[tuple[str, object]]:
    """(role, text or block types) per message, for compact assertions."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            out.append((m["role"], content))
        else:
            out.append(
                (m["role"], [b.get("text") or b.get("id") or b.get("tool_use_id") for b in content])
            )
    return out


# --- invariants ---------------------------------------------------------------------------------


def assert_well_formed(messages: list[dict]) -> None:
    for m in messages:
        assert m["role"] in ("user", "assistant")
        assert isinstance(m["content"], str) or all(
            isinstance(b, dict) and isinstance(b.get("type"), str) for b in m["content"]
        )
        assert m["content"], "empty content"
        assert isinstance(m.get("timestamp", ""), str)
        if "usage" in m:
            assert m["role"] == "assistant"
            assert set(m["usage"]) <= USAGE_KEYS | TTL_KEYS
            assert all(type(v) is int for v in m["usage"].values())


def blocks(message: dict, kind: str) -> list[dict]:
    content = message["content"]
    return [b for b in content if b.get("type") == kind] if isinstance(content, list) else []


def assert_pairing(messages: list[dict]) -> None:
    """Each tool_result answers a tool_use of the nearest preceding assistant message; each
    tool_use is answered before the next assistant message, except in the final message."""
    open_calls: dict[str, bool] = {}
    last_assistant = -1
    for index, m in enumerate(messages):
        if m["role"] == "assistant":
            assert all(open_calls.values()), f"unanswered tool_use before message {index}"
            open_calls = {b["id"]: False for b in blocks(m, "tool_use")}
            last_assistant = index
            continue
        for b in blocks(m, "tool_result"):
            assert open_calls.get(b["tool_use_id"]) is False, f"orphan result in message {index}"
            open_calls[b["tool_use_id"]] = True
    if last_assistant != len(messages) - 1:
        assert all(open_calls.values()), "unanswered tool_use not at the very end"


# --- Claude Code JSONL: hand-built fixtures -----------------------------------------------------


def test_chunks_merge_with_tool_result_between_them(tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "read two files"),
            assistant("a1", "u1", 1, call("t1"), "m1", out=5),
            user("r1", "a1", 2, result("t1")),
            assistant("a2", "r1", 3, call("t2"), "m1", out=9),
            user("r2", "a2", 4, result("t2")),
            assistant("a3", "r2", 5, text("done"), "m2"),
        ],
    )
    t = read_transcript(path)
    assert summary(t.messages) == [
        ("user", "read two files"),
        ("assistant", ["t1", "t2"]),
        ("user", ["t1"]),
        ("user", ["t2"]),
        ("assistant", ["done"]),
    ]
    merged = t.messages[1]
    assert merged["timestamp"] == ts(3)
    assert merged["usage"] == {
        "input_tokens": 3,
        "output_tokens": 9,
        "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 20,
    }
    assert merged["uuid"] == "a2"
    assert (t.skipped_lines, t.warnings, t.format) == (0, [], "claude-code-jsonl")


def test_parallel_tool_results_hanging_off_each_chunk_are_kept(tmp_path):
    # Each tool_result points at its own chunk; the chain continues from only one of them.
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "go"),
            assistant("a1", "u1", 1, text("two calls"), "m1"),
            assistant("a2", "a1", 2, call("t1"), "m1"),
            assistant("a3", "a2", 3, call("t2"), "m1"),
            user("r2", "a3", 4, result("t2")),
            user("r1", "a2", 5, result("t1")),
            assistant("a4", "r1", 6, text("both done"), "m2"),
        ],
    )
    t = read_transcript(path)
    assert summary(t.messages) == [
        ("user", "go"),
        ("assistant", ["two calls", "t1", "t2"]),
        ("user", ["t2"]),
        ("user", ["t1"]),
        ("assistant", ["both done"]),
    ]
    assert t.warnings == []


def test_rewind_keeps_only_the_newest_branch(tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "hello"),
            assistant("a1", "u1", 1, text("hi"), "m1"),
            user("dead-u", "a1", 2, "first try"),
            assistant("dead-a", "dead-u", 3, text("old answer"), "m2"),
            user("u2", "a1", 10, "second try"),
            assistant("a2", "u2", 11, text("new answer"), "m3"),
        ],
    )
    t = read_transcript(path)
    assert summary(t.messages) == [
        ("user", "hello"),
        ("assistant", ["hi"]),
        ("user", "second try"),
        ("assistant", ["new answer"]),
    ]


def test_newest_leaf_tie_goes_to_last_in_file(tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "hello"),
            user("b1", "u1", 5, "branch one"),
            user("b2", "u1", 5, "branch two"),
        ],
    )
    assert summary(read_transcript(path).messages) == [("user", "hello"), ("user", "branch two")]


def test_compact_boundary_is_crossed_and_summary_dropped(tmp_path):
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "cb",
        "parentUuid": None,
        "logicalParentUuid": "a1",
        "timestamp": ts(3),
        "content": "Conversation compacted",
    }
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "before"),
            assistant("a1", "u1", 1, text("reply"), "m1"),
            boundary,
            user("sum", "cb", 4, "This session is being continued...", isCompactSummary=True),
            user("u2", "sum", 5, "after"),
            assistant("a2", "u2", 6, text("reply 2"), "m2"),
        ],
    )
    t = read_transcript(path)
    assert summary(t.messages) == [
        ("user", "before"),
        ("assistant", ["reply"]),
        ("user", "after"),
        ("assistant", ["reply 2"]),
    ]


def test_progress_and_system_records_link_the_chain(tmp_path):
    progress = {"type": "progress", "uuid": "p1", "parentUuid": "a1", "timestamp": ts(2)}
    system = {"type": "system", "uuid": "s1", "parentUuid": "p1", "timestamp": ts(3)}
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "run"),
            assistant("a1", "u1", 1, call("t1"), "m1"),
            progress,
            system,
            user("r1", "s1", 4, result("t1")),
            {"type": "summary", "summary": "a title", "leafUuid": "r1"},
            {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        ],
    )
    t = read_transcript(path)
    assert summary(t.messages) == [("user", "run"), ("assistant", ["t1"]), ("user", ["t1"])]
    assert (t.skipped_lines, t.warnings) == (0, [])


def test_is_meta_user_keeps_content_but_not_timestamp(tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("m", None, 0, "Caveat: local commands below", isMeta=True),
            user("u1", "m", 100, "hi"),
        ],
    )
    first, second = read_transcript(path).messages
    assert first == {"role": "user", "content": "Caveat: local commands below", "uuid": "m"}
    assert second["timestamp"] == ts(100)


def test_synthetic_assistant_messages_are_dropped(tmp_path):
    synthetic = assistant("a1", "u1", 1, text("API Error: overloaded"), "m1")
    synthetic["message"]["model"] = "<synthetic>"
    path = write_lines(tmp_path / "s.jsonl", [user("u1", None, 0, "hi"), synthetic])
    t = read_transcript(path)
    assert summary(t.messages) == [("user", "hi")]
    (omission,) = t.omitted  # a notice, no model call: left out, nothing lost
    assert omission.reason.startswith("synthetic assistant message") and not omission.lost
    assert omission.where == [f"{path}:2"] and t.warnings == []


def test_sidechain_file_reads_like_a_session(tmp_path):
    lines = [
        user("u1", None, 0, "Warmup", isSidechain=True, agentId="abc"),
        assistant("a1", "u1", 1, text("ready"), "m1"),
    ]
    lines[1]["isSidechain"] = True
    t = read_transcript(write_lines(tmp_path / "agent-abc.jsonl", lines))
    assert summary(t.messages) == [("user", "Warmup"), ("assistant", ["ready"])]


def test_main_session_wins_over_interleaved_sidechain_records(tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "main"),
            user("side", None, 9, "agent prompt", isSidechain=True),
        ],
    )
    assert summary(read_transcript(path).messages) == [("user", "main")]


def test_duplicate_uuid_is_read_once(tmp_path):
    first = user("u1", None, 0, "hello")
    path = write_lines(tmp_path / "s.jsonl", [first, first])
    t = read_transcript(path)
    assert summary(t.messages) == [("user", "hello")]
    assert [(o.reason, o.lost, o.where) for o in t.omitted] == [
        ("record repeating an earlier uuid (the first is kept)", False, [f"{path}:2"])
    ]


def test_consecutive_user_records_stay_separate(tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "one"),
            user("u2", "u1", 1, [text("[Request interrupted by user]")]),
            user("u3", "u2", 2, "two"),
        ],
    )
    assert len(read_transcript(path).messages) == 3


def test_garbage_lines_are_skipped_with_line_numbers(tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "hello"),
            "this is not json",
            "[1, 2, 3]",
            '{"no": "type"}',
            {"type": "user", "uuid": "u9", "parentUuid": "u1"},
            {"type": "assistant", "uuid": "a9", "message": {"content": [{"no": "type"}]}},
            "",
            assistant("a1", "u1", 1, text("hi"), "m1"),
        ],
    )
    t = read_transcript(path)
    assert summary(t.messages) == [("user", "hello"), ("assistant", ["hi"])]
    assert t.skipped_lines == 5
    assert [w.split(": skipped")[0] for w in t.warnings] == [f"{path}:{n}" for n in range(2, 7)]
    assert t.warnings[0].startswith(f"{path}:2: skipped: invalid JSON")


def test_missing_parent_and_cycle_stop_with_a_warning(tmp_path):
    missing = write_lines(tmp_path / "missing.jsonl", [user("u2", "gone", 1, "orphan")])
    t = read_transcript(missing)
    assert summary(t.messages) == [("user", "orphan")]
    reason = "history before a parent record missing from the file"
    assert t.warnings == [f"{missing}:1: not replayed: {reason}"]
    assert [(o.reason, o.lost) for o in t.omitted] == [(reason, True)]

    cycle = write_lines(
        tmp_path / "cycle.jsonl",
        [
            user("u1", "u2", 0, "one"),
            user("u2", "u1", 1, "two"),
        ],
    )
    t = read_transcript(cycle)
    assert summary(t.messages) == [("user", "one"), ("user", "two")]
    assert "parentUuid cycle" in t.warnings[0]


def test_orphan_results_dropped_and_interrupted_calls_answered(tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 0, "go"),
            assistant("a1", "u1", 1, call("t1"), "m1"),
            user("u2", "a1", 2, result("elsewhere") + [text("and a note")]),
            assistant("a2", "u2", 3, call("t2"), "m2"),
        ],
    )
    t = read_transcript(path)
    assert summary(t.messages) == [
        ("user", "go"),
        ("assistant", ["t1"]),
        ("user", ["t1"]),
        ("user", ["and a note"]),
        ("assistant", ["t2"]),  # dangling final call stays as is
    ]
    synthetic = t.messages[2]["content"][0]
    assert synthetic == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "[no result recorded]",
        "is_error": True,
    }
    assert len(t.warnings) == 2
    assert_pairing(t.messages)


def test_empty_file_gives_empty_transcript(tmp_path):
    for name, body in (("empty.jsonl", ""), ("blank.json", "\n  \n")):
        path = tmp_path / name
        path.write_text(body)
        t = read_transcript(path)
        assert isinstance(t, Transcript)
        assert (t.messages, t.skipped_lines) == ([], 0)
        assert t.warnings == [f"{path}: the file is empty: nothing to replay"]


def test_unknown_format_and_unreadable_file_raise(tmp_path):
    for body in ("hello world\nsecond line\n", "42", '{"foo": 1}', "[1, 2]"):
        path = tmp_path / "x.txt"
        path.write_text(body)
        with pytest.raises(TranscriptError, match="not a recognised transcript format") as err:
            read_transcript(path)
        assert str(path) in str(err.value)
    with pytest.raises(TranscriptError, match="cannot read") as err:
        read_transcript(tmp_path / "nope.jsonl")
    assert "nope.jsonl" in str(err.value)
    with pytest.raises(TranscriptError):
        read_transcript(tmp_path)


def test_format_is_detected_by_content_not_extension(tmp_path):
    path = write_lines(tmp_path / "session.json", [user("u1", None, 0, "hi")])
    assert read_transcript(path).format == "claude-code-jsonl"
    other = tmp_path / "messages.jsonl"
    other.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert read_transcript(other).format == "anthropic-messages-json"


# --- Anthropic messages JSON --------------------------------------------------------------------


def test_messages_json_list_and_object(tmp_path):
    messages = [
        {"role": "user", "content": "hi", "timestamp": "2025-01-01T00:00:00Z", "uuid": "x"},
        {
            "role": "assistant",
            "content": [text("hello")],
            "timestamp": 1735689600,
            "usage": {"input_tokens": 5, "output_tokens": 2, "service_tier": "standard"},
        },
        {"role": "user", "content": "ms", "timestamp": 1735689600500, "extra": "dropped"},
    ]
    as_list = tmp_path / "list.json"
    as_list.write_text(json.dumps(messages, indent=2))
    as_object = tmp_path / "object.json"
    as_object.write_text(json.dumps({"system": "be brief", "messages": messages}))
    expected = [
        {"role": "user", "content": "hi", "timestamp": "2025-01-01T00:00:00Z", "uuid": "x"},
        {
            "role": "assistant",
            "content": [text("hello")],
            "timestamp": "2025-01-01T00:00:00Z",
            "usage": {"input_tokens": 5, "output_tokens": 2},
        },
        {"role": "user", "content": "ms", "timestamp": "2025-01-01T00:00:00.500000Z"},
    ]
    for path in (as_list, as_object):
        t = read_transcript(path)
        assert (t.format, t.messages, t.skipped_lines, t.warnings) == (
            "anthropic-messages-json",
            expected,
            0,
            [],
        )


def test_messages_json_invalid_entries_are_skipped_by_index(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "ok"},
                    "not a message",
                    {"role": "system", "content": "sys"},
                    {"role": "assistant", "content": [{"text": "no type"}]},
                    {
                        "role": "assistant",
                        "content": "fine",
                        "timestamp": "yesterday",
                        "usage": "many",
                    },
                ]
            }
        )
    )
    t = read_transcript(path)
    assert t.messages == [
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "fine"},
    ]
    assert t.skipped_lines == 3
    assert [w.split(": ")[1] for w in t.warnings] == [
        "messages[1]",
        "messages[2]",
        "messages[3]",
        "messages[4]",
    ]
    assert "invalid timestamp" in t.warnings[3]


def test_messages_json_empty_list(tmp_path):
    path = tmp_path / "m.json"
    path.write_text("[]")
    assert read_transcript(path).messages == []


# --- other formats: tiny hand-built fixtures ----------------------------------------------------


def test_openhands_events(tmp_path):
    response = {
        "id": "r1",
        "choices": [
            {
                "message": {
                    "content": "Listing.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'},
                        }
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7, "cache_read_input_tokens": 60},
    }
    meta = {"tool_call_id": "c1", "function_name": "execute_bash", "model_response": response}
    events = [
        {"id": 0, "source": "agent", "action": "system", "args": {"content": "prompt"}},
        {
            "id": 1,
            "timestamp": "2025-01-20T20:29:32",
            "source": "user",
            "action": "message",
            "message": "list files",
            "args": {"content": "list files"},
        },
        {"id": 2, "source": "environment", "observation": "agent_state_changed", "content": ""},
        {"id": 3, "source": "agent", "action": "run", "tool_call_metadata": meta},
        {
            "id": 4,
            "source": "agent",
            "observation": "run",
            "content": "a.py",
            "tool_call_metadata": meta,
            "cause": 3,
        },
        {"id": 5, "source": "agent", "observation": "error", "content": "bad call"},
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    t = read_transcript(path)
    assert t.format == "openhands-json"
    assert t.messages == [
        {"role": "user", "content": "list files", "timestamp": "2025-01-20T20:29:32"},
        {
            "role": "assistant",
            "content": [
                text("Listing."),
                {
                    "type": "tool_use",
                    "id": "c1",
                    "name": "execute_bash",
                    "input": {"command": "ls"},
                },
            ],
            "usage": {
                "input_tokens": 40,
                "output_tokens": 7,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 60,
            },
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a.py"}],
        },
        {"role": "user", "content": "bad call"},
    ]


def test_swe_agent_history(tmp_path):
    traj = {
        "trajectory": [],
        "history": [
            {"role": "system", "content": "You are..."},
            {"role": "user", "content": [{"type": "text", "text": "fix the bug"}]},
            {
                "role": "assistant",
                "content": "Look first.",
                "tool_calls": [
                    {"id": "call_1", "function": {"name": "bash", "arguments": "not json"}}
                ],
            },
            {"role": "tool", "content": "files", "tool_call_ids": ["call_1"]},
            {"role": "assistant", "content": "submit"},
        ],
    }
    path = tmp_path / "x.traj"
    path.write_text(json.dumps(traj))
    t = read_transcript(path)
    assert t.format == "swe-agent-traj"
    assert t.messages == [
        {"role": "user", "content": "fix the bug"},
        {
            "role": "assistant",
            "content": [
                text("Look first."),
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "bash",
                    "input": {"arguments": "not json"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "files"}],
        },
        {"role": "assistant", "content": [text("submit")]},
    ]


# --- property tests -----------------------------------------------------------------------------

BASE_SESSION = [
    user("u1", None, 0, "hello"),
    assistant("a1", "u1", 1, text("let me look"), "m1"),
    assistant("a2", "a1", 2, call("t1"), "m1"),
    user("r1", "a2", 3, result("t1")),
    assistant("a3", "r1", 4, text("done"), "m2"),
    user("u2", "a3", 5, "thanks", isMeta=False),
]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    garbage=st.lists(
        st.tuples(st.integers(0, len(BASE_SESSION)), st.binary(max_size=60)), max_size=6
    )
)
def test_garbage_mixed_into_a_session_never_breaks_it(tmp_path, garbage):
    lines = [json.dumps(r).encode() for r in BASE_SESSION]
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(b"\n".join(lines))
    for position, junk in sorted(garbage, key=lambda g: -g[0]):
        lines.insert(position, junk)
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_bytes(b"\n".join(lines))
    t = read_transcript(dirty)
    assert t.messages == read_transcript(clean).messages
    assert t.skipped_lines <= sum(junk.count(b"\n") + 1 for _, junk in garbage)
    assert all(w.startswith(f"{dirty}:") for w in t.warnings)


WORDS = st.sampled_from(
    [
        "user",
        "assistant",
        "system",
        "tool",
        "text",
        "tool_use",
        "tool_result",
        "message",
        "run",
        "agent",
        "t1",
        "t2",
    ]
)
KEYS = WORDS | st.sampled_from(
    [
        "role",
        "content",
        "type",
        "text",
        "messages",
        "timestamp",
        "uuid",
        "usage",
        "id",
        "input",
        "tool_use_id",
        "input_tokens",
        "history",
        "trajectory",
        "source",
        "action",
        "observation",
        "tool_call_metadata",
        "tool_call_id",
        "model_response",
        "choices",
        "tool_calls",
        "function",
        "arguments",
        "parentUuid",
        "isMeta",
    ]
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | WORDS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(KEYS | st.text(max_size=4), children, max_size=5)
    ),
    max_leaves=20,
)
BLOCKS = st.fixed_dictionaries(
    {"type": WORDS}, optional={"text": JSON_VALUES, "id": WORDS, "tool_use_id": WORDS}
)
MESSAGES = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]) | WORDS,
        "content": st.text(max_size=4) | st.lists(BLOCKS, max_size=3),
    },
    optional={"timestamp": JSON_VALUES, "uuid": JSON_VALUES, "usage": JSON_VALUES},
)
EVENTS = st.fixed_dictionaries(
    {"source": WORDS},
    optional={
        "action": WORDS,
        "observation": WORDS,
        "content": JSON_VALUES,
        "tool_call_metadata": JSON_VALUES,
        "args": JSON_VALUES,
    },
)
DOCUMENTS = st.one_of(
    JSON_VALUES,
    st.lists(MESSAGES | JSON_VALUES, max_size=6),
    st.builds(lambda m: {"messages": m}, st.lists(MESSAGES | JSON_VALUES, max_size=6)),
    st.lists(EVENTS | JSON_VALUES, max_size=6),
    st.builds(lambda h: {"history": h}, st.lists(EVENTS | MESSAGES, max_size=6)),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=DOCUMENTS)
def test_random_json_only_ever_raises_transcript_error(tmp_path, value):
    path = tmp_path / "random.json"
    path.write_text(json.dumps(value))
    try:
        t = read_transcript(path)
    except TranscriptError as exc:
        assert str(path) in str(exc)
        return
    assert t.format in FORMATS
    assert_well_formed(t.messages)
    assert_pairing(t.messages)


# --- the shared real transcripts ----------------------------------------------------------------


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().split("\n") if line.strip()]


def merged(messages: list[dict]) -> list[dict]:
    """The messages as a request sends them: consecutive same-role messages merged."""
    runs: list[list[dict]] = []
    for message in messages:
        if runs and runs[-1][0]["role"] == message["role"]:
            runs[-1].append(message)
        else:
            runs.append([message])
    return [merge_run(run[0]["role"], [m["content"] for m in run]) for run in runs]


def real_file(pattern: str) -> Path:
    if not DATA.is_dir():
        pytest.skip(NO_DATA)
    (path,) = DATA.glob(pattern)
    return path


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=str(p.relative_to(DATA))) for p in REAL_FILES]
    or [pytest.param(None, marks=pytest.mark.skip(reason=NO_DATA))],
)
def test_real_transcript_loads_cleanly(path):
    t = read_transcript(path)
    assert t.format in FORMATS
    assert t.skipped_lines == 0
    assert_well_formed(t.messages)
    assert_pairing(t.messages)
    request = merged(t.messages)
    while request and request[-1]["role"] == "assistant":  # the last response answers no call
        request.pop()
    assert not request or stenograph.check_request(request) == []
    if t.format != "claude-code-jsonl":
        return
    lost = {o.reason for o in t.omitted if o.lost}
    assert lost <= {"first prompt not in the file (a stand-in is sent)"}
    records = read_records(path)
    if all("usage" in r["message"] for r in records if r.get("type") == "assistant"):
        assert all(
            set(m["usage"]) - TTL_KEYS == USAGE_KEYS for m in t.messages if m["role"] == "assistant"
        )


def ancestors(records: dict[str, dict], uuid: str) -> set[str]:
    seen = set()
    while uuid and uuid not in seen:
        seen.add(uuid)
        uuid = records[uuid].get("parentUuid")
    return seen


def test_branching_session_keeps_exactly_the_latest_branch():
    path = real_file("kfischer-branching/b3edadab-*.jsonl")
    records = {r["uuid"]: r for r in read_records(path) if "uuid" in r}

    def leaf(prefix: str) -> str:  # branch endpoints as documented in the folder's README
        (uuid,) = [u for u in records if u.startswith(prefix)]
        return uuid

    latest = ancestors(records, leaf("38842167"))
    dead = (ancestors(records, leaf("51be2f36")) | ancestors(records, leaf("39a76b25"))) - latest
    t = read_transcript(path)
    kept = {m["uuid"] for m in t.messages}
    assert t.messages[-1]["uuid"] == leaf("38842167")
    assert kept <= latest
    assert not kept & dead
    wanted = {u for u in latest if records[u]["type"] == "user"}
    assert wanted <= kept


def test_session_ending_on_a_tool_call_keeps_it_dangling():
    t = read_transcript(real_file("chiphuyen-sniffly/d3ad4cdc-*.jsonl"))
    last = t.messages[-1]
    assert last["role"] == "assistant"
    assert blocks(last, "tool_use")
    assert not any(
        b.get("content") == "[no result recorded]"
        for m in t.messages
        for b in blocks(m, "tool_result")
    )
