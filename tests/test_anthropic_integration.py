"""stenograph.integrations.anthropic.wrap: sync, async and streaming, through the real SDK."""

from __future__ import annotations

import asyncio
import json
import threading

import anthropic
import pytest

import stenograph
from stenograph import ThresholdDecision
from stenograph.integrations.anthropic import wrap
from stenograph.stores.folder import FolderStorage, FolderStore
from stenograph.testing import Reply, single_handler_session

SYSTEM = "You are a coding agent."
TOOLS = [
    {
        "name": "Read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    }
]


def open_session(tmp_path, clock=None, session_id="s"):
    engine = stenograph.Engine.from_preset(
        "default", overrides={"forked-extraction": {"backend": "offline"}}
    )
    return engine.open_session(
        session_id, state_dir=tmp_path, clock=clock or stenograph.ManualClock(1_000_000)
    )


def async_client(server, session):
    """``wrap`` around an ``AsyncAnthropic`` talking to the local server."""
    return wrap(anthropic.AsyncAnthropic(api_key="k", base_url=server.url, max_retries=0), session)


def script_tool_loop(server, turns: int) -> None:
    replies = [
        Reply.tool_use("Read", {"file_path": f"/src/f{i}.py"}, text=f"Step {i}.")
        for i in range(turns - 1)
    ]
    server.script(*replies, Reply.text("All done."))


def run_tool_loop(client, messages, clock=None):
    """The host's own loop, exactly as with the plain SDK."""
    while True:
        response = client.messages.create(
            model="claude-test", max_tokens=500, system=SYSTEM, tools=TOOLS, messages=messages
        )
        messages.append({"role": "assistant", "content": response.content})
        if response.stop_reason != "tool_use":
            return response
        if clock is not None:
            clock.advance(400)
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": "source " * 300}
            for b in response.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})


def test_sync_tool_loop(tmp_path, messages_server, anthropic_client):
    clock = stenograph.ManualClock(1_000_000)
    session = open_session(tmp_path, clock)
    client = wrap(anthropic_client, session)
    script_tool_loop(messages_server, 4)
    messages = [{"role": "user", "content": "Fix the bug."}]
    final = run_tool_loop(client, messages, clock)
    assert final.content[0].text == "All done."
    assert [e.role for e in session.history] == [m["role"] for m in messages]
    assert len(session.history) == 8
    assert sum(isinstance(e, ThresholdDecision) for e in session.events) == 4
    sent = [r.body for r in messages_server.requests]
    assert all(b["system"] == SYSTEM and b["tools"] == TOOLS for b in sent)
    assert "[memorized: Read result" in json.dumps(sent[-1]["messages"])  # 400 s pauses
    assert session.last_request["system"] == SYSTEM
    usage = session.history[1].usage
    assert usage and usage["input_tokens"] > 0


def test_async_tool_loop(tmp_path, messages_server):
    session = open_session(tmp_path)
    script_tool_loop(messages_server, 3)

    async def main():
        client = async_client(messages_server, session)
        messages = [{"role": "user", "content": "Go."}]
        while True:
            response = await client.messages.create(
                model="m", max_tokens=100, tools=TOOLS, messages=messages
            )
            messages.append({"role": "assistant", "content": response.content})
            if response.stop_reason != "tool_use":
                return messages
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": response.content[-1].id,
                            "content": "x",
                        }
                    ],
                }
            )

    messages = asyncio.run(main())
    assert [e.role for e in session.history] == [m["role"] for m in messages]


def test_streaming_with_messages_stream(tmp_path, messages_server, anthropic_client):
    session = open_session(tmp_path)
    client = wrap(anthropic_client, session)
    messages_server.script(Reply.tool_use("Read", {"file_path": "/a.py"}, text="Reading."))
    messages = [{"role": "user", "content": "Go."}]
    with client.messages.stream(
        model="m", max_tokens=100, tools=TOOLS, messages=messages
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == "Reading."
    entry = session.history[-1]
    assert entry.role == "assistant" and entry.content[1]["input"] == {"file_path": "/a.py"}
    assert entry.usage["output_tokens"] > 0
    assert messages_server.requests[0].body["stream"] is True


def test_streaming_with_create_stream_true(tmp_path, messages_server, anthropic_client):
    session = open_session(tmp_path)
    client = wrap(anthropic_client, session)
    messages_server.script(
        Reply.tool_uses(
            [("Read", {"file_path": "/a"}), ("Read", {"file_path": "/b"})], text="Two reads."
        )
    )
    events = list(
        client.messages.create(
            model="m",
            max_tokens=100,
            stream=True,
            tools=TOOLS,
            messages=[{"role": "user", "content": "Go."}],
        )
    )
    assert events[-1].type == "message_stop"
    entry = session.history[-1]
    assert [b["type"] for b in entry.content] == ["text", "tool_use", "tool_use"]
    assert entry.content[0]["text"] == "Two reads."
    assert [b["input"] for b in entry.content[1:]] == [{"file_path": "/a"}, {"file_path": "/b"}]
    assert entry.meta["stop_reason"] == "tool_use" and entry.usage["output_tokens"] > 0


def test_async_streaming(tmp_path, messages_server):
    session = open_session(tmp_path)
    messages_server.script(Reply.text("Streamed."), Reply.text("Again."))

    async def main():
        client = async_client(messages_server, session)
        messages = [{"role": "user", "content": "Go."}]
        async with client.messages.stream(model="m", max_tokens=100, messages=messages) as stream:
            first = await stream.get_final_message()
        messages += [
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": "More."},
        ]
        stream = await client.messages.create(
            model="m", max_tokens=100, stream=True, messages=messages
        )
        return [event.type async for event in stream]

    kinds = asyncio.run(main())
    assert kinds[-1] == "message_stop"
    assert [e.content[0]["text"] for e in session.history if e.role == "assistant"] == [
        "Streamed.",
        "Again.",
    ]


def test_api_error_mid_session_then_retry(tmp_path, messages_server, anthropic_client):
    session = open_session(tmp_path)
    client = wrap(anthropic_client, session)
    messages_server.script(
        Reply.tool_use("Read", {"file_path": "/a"}), Reply.error(500), Reply.text("Recovered.")
    )
    messages = [{"role": "user", "content": "Go."}]
    first = client.messages.create(model="m", max_tokens=100, tools=TOOLS, messages=messages)
    messages += [
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": first.content[-1].id, "content": "data"}
            ],
        },
    ]
    with pytest.raises(anthropic.InternalServerError):
        client.messages.create(model="m", max_tokens=100, tools=TOOLS, messages=messages)
    assert [e.role for e in session.history] == ["user", "assistant", "user"]
    final = client.messages.create(model="m", max_tokens=100, tools=TOOLS, messages=messages)
    assert final.content[0].text == "Recovered."
    assert [e.role for e in session.history] == ["user", "assistant", "user", "assistant"]
    bodies = [r.body["messages"] for r in messages_server.requests]
    assert json.dumps(bodies[1]) == json.dumps(bodies[2])


def test_sdk_retries_are_untouched(tmp_path, messages_server):
    session = open_session(tmp_path)
    retrying = anthropic.Anthropic(api_key="k", base_url=messages_server.url, max_retries=2)
    messages_server.script(Reply.error(429), Reply.text("ok"))
    wrap(retrying, session).messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert len(messages_server.requests) == 2 and len(session.history) == 2


def test_resume_after_restart(tmp_path, messages_server, anthropic_client):
    clock = stenograph.ManualClock(1_000_000)
    session = open_session(tmp_path, clock)
    script_tool_loop(messages_server, 3)
    messages = [{"role": "user", "content": "Fix it. " + "context " * 8000}]
    run_tool_loop(wrap(anthropic_client, session), messages, clock)
    memorized = [e.memorized for e in session.history]
    session.close()
    threshold = dict(session.handler_state("update-threshold"))
    assert any(memorized) and threshold.get("initialized")
    notes = tmp_path / "s" / "session-memory.md"
    assert notes.exists()

    resumed = open_session(tmp_path, clock)  # the host restarted
    assert [e.memorized for e in resumed.history] == memorized
    assert resumed.handler_state("update-threshold") == threshold
    messages_server.script(Reply.text("Welcome back."))
    messages.append({"role": "user", "content": "Where were we?"})
    reply = wrap(anthropic_client, resumed).messages.create(
        model="m", max_tokens=10, messages=messages
    )
    assert reply.content[0].text == "Welcome back." and len(resumed.history) == len(messages) + 1


def test_a_list_that_parts_from_the_session_rewinds_it(tmp_path, messages_server, anthropic_client):
    session = open_session(tmp_path)
    client = wrap(anthropic_client, session)
    messages_server.script(Reply.text("a"), Reply.text("b"))
    client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert len(session.history) == 2
    client.messages.create(
        model="m",
        max_tokens=10,
        messages=[{"role": "user", "content": "x"}, {"role": "user", "content": "y"}],
    )
    assert [e.content for e in session.history][:2] == ["x", "y"]
    assert messages_server.requests[-1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}
    ]
    assert (
        client.messages.count_tokens(
            model="m", messages=[{"role": "user", "content": "x"}]
        ).input_tokens
        > 0
    )


class ThreadProbe(stenograph.Handler):
    """Records the thread each phase runs on."""

    name = "thread-probe"
    threads: list[tuple[str, int]] = []

    @stenograph.hookimpl
    def pre_call(self, session, call):
        self.threads.append(("pre_call", threading.get_ident()))

    @stenograph.hookimpl
    def post_sampling(self, session, call):
        self.threads.append(("post_sampling", threading.get_ident()))


class BlockingProbe(ThreadProbe):
    name = "blocking-probe"
    blocking = True


class NonBlockingStorage(FolderStorage):
    """A folder whose writes are declared not to block (as a RAM-backed store's would)."""

    blocks = False


class NonBlockingStore(FolderStore):
    def session(self, session_id):
        return NonBlockingStorage(self.root / session_id, session_id)


@pytest.mark.parametrize(
    ("probe", "storage", "on_the_loop"),
    [
        (ThreadProbe, None, True),
        (ThreadProbe, FolderStore, False),
        (ThreadProbe, NonBlockingStore, True),
        (BlockingProbe, None, False),
    ],
    ids=["in-memory", "on-disk", "storage-that-does-not-block", "blocking-handler"],
)
def test_async_phases_run_on_the_loop_unless_they_may_block(
    tmp_path, messages_server, probe, storage, on_the_loop
):
    """A session whose handlers and storage cannot block runs its phases on the event loop
    (no thread hop); a session on disk (fsyncs) or a blocking handler gets a worker thread:
    the storage says whether its writes block."""
    probe.threads = []
    session = single_handler_session(probe).engine.open_session(
        "t", store=storage(tmp_path) if storage else None, state_dir=None
    )
    messages_server.script(Reply.text("One."), Reply.text("Two."))

    async def main():
        client = async_client(messages_server, session)
        messages = [{"role": "user", "content": "Go."}]
        response = await client.messages.create(model="m", max_tokens=100, messages=messages)
        messages += [
            {"role": "assistant", "content": response.content},
            {"role": "user", "content": "Again."},
        ]
        async with client.messages.stream(model="m", max_tokens=100, messages=messages) as s:
            await s.get_final_message()
        await client.close()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert [phase for phase, _ in probe.threads] == ["pre_call", "post_sampling"] * 2
    assert all((thread == loop_thread) is on_the_loop for _, thread in probe.threads)
    assert len(session.history) == 4
