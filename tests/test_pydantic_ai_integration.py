"""A real pydantic-ai ``Agent`` on ``AnthropicModel`` (its provider pointed at the local
Messages-API server) with the ``Stenograph`` capability: sync, async, streamed."""

from __future__ import annotations

import asyncio
import json

import anthropic
import pytest
from framework_agents import (
    agent_model,
    all_handlers_preset,
    check_followed,
    check_handlers,
    check_wire,
    is_fork,
    main_requests,
    read_file_output,
    require_extra,
)

import stenograph

require_extra("pydantic_ai", "pydantic-ai")
require_extra("pydantic_ai.models.anthropic", "pydantic-ai")

from pydantic_ai import Agent, Tool  # noqa: E402
from pydantic_ai.capabilities import ProcessHistory  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402

from stenograph.integrations.pydantic_ai import (  # noqa: E402
    EXCHANGE,
    Stenograph,
    from_anthropic,
    to_anthropic,
)

SYSTEM = "You are a careful coding agent."


def build(server, *capabilities) -> Agent:
    provider = AnthropicProvider(api_key="test-key", base_url=server.url)
    model = AnthropicModel("claude-sonnet-4-6", provider=provider)
    agent = Agent(model, instructions=SYSTEM, capabilities=list(capabilities))

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the project."""
        return read_file_output(path)

    return agent


async def aturn(agent: Agent, text: str, history, mode: str, conversation: str):
    options = {"message_history": history} if history else {"conversation_id": conversation}
    if mode == "run":
        return (await agent.run(text, **options)).all_messages()
    async with agent.run_stream(text, **options) as stream:
        chunks = [c async for c in stream.stream_text(delta=True)]
        assert chunks, "nothing streamed"
    return stream.all_messages()


def run_turns(agent: Agent, mode: str, turns, conversation: str = "conv-1"):
    """Run the texts ``turns`` yields as one conversation; the final history."""
    history = None
    if mode == "run_sync":
        for text in turns:
            options = {"message_history": history} if history else {"conversation_id": conversation}
            history = agent.run_sync(text, **options).all_messages()
        return history

    async def drive():
        nonlocal history
        for text in turns:
            history = await aturn(agent, text, history, mode, conversation)
        return history

    return asyncio.run(drive())


@pytest.mark.parametrize("mode", ["run_sync", "run", "run_stream"])
def test_every_handler_works_inside_a_pydantic_ai_agent(
    messages_server, manual_clock, tmp_path, mode
):
    messages_server.responder = agent_model
    capability = Stenograph(all_handlers_preset(tmp_path), state_dir=tmp_path, clock=manual_clock)
    agent = build(messages_server, capability)

    def turns():
        for turn in range(8):
            yield f"Read the next file ({turn})."
            assert capability.session("conv-1").wait_for_background(10)
            manual_clock.advance(600 if turn == 0 else 20)

    history = run_turns(agent, mode, turns())
    session = capability.session("conv-1")
    check_handlers(messages_server, session)
    check_wire(messages_server, session)
    assert not [
        e for e in session.events if e.kind in ("NotesClientUnavailable", "HistoryNotFollowed")
    ]
    assert len(history) == len(session.history)  # the run's own history stays whole
    exchange = session.stash[EXCHANGE]  # the adapter's live values: typed, never saved
    assert exchange.fed and exchange.wire is None
    capability.close()


def test_two_conversations_keep_separate_sessions(messages_server, manual_clock):
    messages_server.responder = agent_model
    capability = Stenograph("inactivity-only", state_dir=None, clock=manual_clock)
    agent = build(messages_server, capability)
    histories = {"alpha": None, "beta": None}
    for turn in range(2):
        for name in histories:
            options = (
                {"message_history": histories[name]}
                if histories[name]
                else {"conversation_id": name}
            )
            histories[name] = agent.run_sync(f"{name} asks {turn}", **options).all_messages()
    alpha, beta = capability.session("alpha"), capability.session("beta")
    assert alpha is not beta and len(alpha.history) == len(beta.history) == 8
    assert "beta" not in json.dumps(alpha.history.messages())
    for body in main_requests(messages_server):
        text = json.dumps(body["messages"])
        assert ("alpha asks" in text) != ("beta asks" in text)


def test_the_notes_writer_sends_the_providers_own_headers(messages_server, manual_clock, tmp_path):
    messages_server.responder = agent_model
    client = anthropic.AsyncAnthropic(
        api_key="test-key", base_url=messages_server.url, default_headers={"X-Team": "notes"}
    )
    capability = Stenograph(all_handlers_preset(tmp_path), state_dir=tmp_path, clock=manual_clock)
    model = AnthropicModel("claude-sonnet-4-6", provider=AnthropicProvider(anthropic_client=client))
    agent = Agent(
        model,
        instructions=SYSTEM,
        tools=[Tool(read_file_output, name="read_file")],
        capabilities=[capability],
    )
    history = agent.run_sync("Read the first file.", conversation_id="c").all_messages()
    agent.run_sync("And the next one.", message_history=history)
    assert capability.session("c").wait_for_background(10)
    forks = [r for r in messages_server.requests if is_fork(r.body)]
    assert forks and all(r.headers.get("x-team") == "notes" for r in forks)
    assert all("async" not in r.headers.get("x-stainless-async", "") for r in forks)


def test_a_model_that_is_not_anthropic_says_so(tmp_path):
    capability = Stenograph(all_handlers_preset(tmp_path), state_dir=None)
    agent = Agent(TestModel(call_tools=[]), capabilities=[capability])
    agent.run_sync("hi", conversation_id="t")
    events = [e for e in capability.session("t").events if e.kind == "NotesClientUnavailable"]
    assert len(events) == 1 and "TestModel" in events[0].reason


# conversion -----------------------------------------------------------------------------


def conversation() -> list:
    return [
        ModelRequest(parts=[SystemPromptPart(content="sys"), UserPromptPart(content="Read a.py")]),
        ModelResponse(
            parts=[
                TextPart(content="Reading."),
                ToolCallPart(tool_name="read_file", args={"path": "a.py"}, tool_call_id="t1"),
                ToolCallPart(tool_name="read_file", args='{"path": "b.py"}', tool_call_id="t2"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart(tool_name="read_file", content="A", tool_call_id="t1"),
                ToolReturnPart(
                    tool_name="read_file",
                    content="no such file",
                    tool_call_id="t2",
                    outcome="failed",
                ),
            ]
        ),
        ModelResponse(parts=[TextPart(content="Done.")]),
    ]


def test_conversion_keeps_tool_pairing_both_ways():
    converted = to_anthropic(conversation())
    assert converted[0] == {"role": "user", "content": [{"type": "text", "text": "Read a.py"}]}
    assert converted[1]["content"][2] == {
        "type": "tool_use",
        "id": "t2",
        "name": "read_file",
        "input": {"path": "b.py"},
    }
    results = converted[2]["content"]
    assert [r["is_error"] for r in results] == [False, True]
    assert results[1]["content"][0]["text"].startswith("no such file")
    assert stenograph.check_pairing(converted) == []
    back = from_anthropic(converted, system=[SystemPromptPart(content="sys")])
    assert isinstance(back[0].parts[0], SystemPromptPart)
    assert [type(m) for m in back] == [ModelRequest, ModelResponse, ModelRequest, ModelResponse]
    assert back[2].parts[0].tool_name == "read_file" and back[2].parts[1].outcome == "failed"
    assert to_anthropic(back) == converted


def test_a_placeholder_becomes_a_tool_return_of_the_named_tool():
    rendered = to_anthropic(conversation())
    rendered[2]["content"][0] = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "[memorized: read_file result left out (1 chars)]",
    }
    part = from_anthropic(rendered)[2].parts[0]
    assert isinstance(part, ToolReturnPart) and part.tool_name == "read_file"
    assert part.content == "[memorized: read_file result left out (1 chars)]"


def test_rendered_messages_are_converted_once_and_again_when_what_they_read_changes(
    monkeypatch,
):
    import stenograph.integrations.pydantic_ai as adapter

    made: list[str] = []
    convert = adapter._message
    monkeypatch.setattr(
        adapter, "_message", lambda m, *rest: (made.append(m["role"]), convert(m, *rest))[1]
    )
    rendered, system = to_anthropic(conversation()), [SystemPromptPart(content="sys")]
    cache = adapter.Rendered()

    def same_as_a_fresh_conversion(got: list, messages: list, parts: list) -> None:
        counted = len(made)
        fresh = from_anthropic(messages, system=parts)
        del made[counted:]  # the cache's conversions alone are counted
        assert to_anthropic(got) == to_anthropic(fresh)
        names = [[getattr(p, "tool_name", None) for p in m.parts] for m in got]
        assert names == [[getattr(p, "tool_name", None) for p in m.parts] for m in fresh]
        assert [m.parts[0].content for m in got[:1]] == [fresh[0].parts[0].content]

    same_as_a_fresh_conversion(cache(rendered, system), rendered, system)
    assert len(made) == len(rendered)
    made.clear()
    first = cache(rendered, system)
    assert made == [] and cache(rendered, system)[3] is first[3]  # the same objects again
    other = [SystemPromptPart(content="another system")]
    same_as_a_fresh_conversion(cache(rendered, other), rendered, other)
    assert made == ["user"]  # the first request alone carries the system parts
    made.clear()
    # the results' message without the call before it: its tools are not known any more
    same_as_a_fresh_conversion(cache(rendered[2:], system), rendered[2:], system)
    assert made == ["user"]
    assert cache(rendered[2:], system)[0].parts[1].tool_name == "tool"


def keep_last_three_prompts(messages: list) -> list:
    """A host's own trimming: the history from the third-last user prompt on."""
    starts = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    ]
    return messages[starts[-3] :] if len(starts) > 3 else messages


@pytest.mark.parametrize("mode", ["run_sync", "run_stream"])
def test_thirty_turns_with_a_history_processor(messages_server, manual_clock, tmp_path, mode):
    """The agent's own history processor trims the history on every request; the session
    follows what the model is sent and no request breaks."""
    messages_server.responder = agent_model
    capability = Stenograph(all_handlers_preset(tmp_path), state_dir=tmp_path, clock=manual_clock)
    # listed after stenograph on purpose: stenograph places itself innermost anyway
    agent = build(messages_server, capability, ProcessHistory(keep_last_three_prompts))

    def turns():
        for turn in range(30):
            yield f"Read the next file ({turn})."
            assert capability.session("conv-1").wait_for_background(10)
            manual_clock.advance(400 if turn % 7 == 3 else 15)

    history = run_turns(agent, mode, turns())
    session = capability.session("conv-1")
    check_followed(messages_server, session, to_anthropic(keep_last_three_prompts(history)))
    capability.close()
