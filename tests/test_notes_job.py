"""The notes job as a value: its JSON form shares the snapshot made for it (no deep copy of
a long history per extraction) and gives the same job back."""

from __future__ import annotations

from stenograph.handlers.forked_extraction import ForkedExtraction
from stenograph.handlers.forked_extraction.fork import ForkContext, with_breakpoint
from stenograph.handlers.forked_extraction.job import Job, job_settings


def job(**snapshot) -> Job:
    handler = ForkedExtraction(ForkedExtraction.Settings())
    return Job(
        session_id="s",
        store_url="sqlite:///x.db",
        label="session-memory.md",
        shown="/s/session-memory.md",
        upto_uuid="u2",
        upto_index=1,
        position=2,
        backend="anthropic" if "context" in snapshot else "offline",
        template=handler.template,
        prompt=handler.prompt,
        settings=job_settings(handler.settings),
        lease_seconds=30.0,
        **snapshot,
    )


def test_the_json_form_of_an_offline_job_shares_its_entries():
    entries = [{"role": "user", "content": "hello", "uuid": "u1"}]
    offline = job(entries=entries)
    data = offline.to_dict()
    assert data["entries"] is entries  # the snapshot is not copied
    assert Job.from_dict(data) == offline


def test_the_json_form_of_a_fork_job_shares_its_context():
    messages = [{"role": "user", "content": "hello"}]
    context = ForkContext("m", "system", [{"name": "Read"}], messages, {"temperature": 0})
    fork = job(context=context)
    data = fork.to_dict()
    assert data["context"]["messages"] is messages and data["context"]["model"] == "m"
    back = Job.from_dict(data)
    assert back == fork and back.context is not None and back.context.messages is messages


def test_the_fork_adds_a_breakpoint_unless_the_request_has_the_four_the_api_allows():
    mark = {"type": "ephemeral"}
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "ok", "cache_control": mark}],
    }
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": mark}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"cache_control": 1}}
            ],
        },
        {"role": "user", "content": [result]},
    ]
    system = [{"type": "text", "text": "sys", "cache_control": mark}]
    three = ForkContext("m", system, [{"name": "Read"}], messages, {})
    assert with_breakpoint(three)[-1]["content"][-1]["cache_control"] == mark  # 3 of 4: added
    assert "cache_control" not in messages[-1]["content"][-1]  # the shared message unchanged
    four = ForkContext("m", system, [{"name": "Read", "cache_control": mark}], messages, {})
    assert with_breakpoint(four) == messages  # a tool input's key is no breakpoint
