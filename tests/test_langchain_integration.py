"""A real LangChain v1 ``create_agent`` agent, its ``ChatAnthropic`` pointed at the local
Messages-API server, with ``StenographMiddleware``: sync, async, streamed."""

from __future__ import annotations

import asyncio
import json

import pytest
from framework_agents import (
    SUMMARY,
    agent_model,
    all_handlers_preset,
    check_followed,
    check_handlers,
    check_wire,
    main_requests,
    read_file_output,
    require_extra,
)

import stenograph

require_extra("langchain.agents", "langchain")
require_extra("langchain_anthropic", "langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_anthropic import ChatAnthropic  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from stenograph.integrations.langchain import (  # noqa: E402
    StenographMiddleware,
    from_anthropic,
    response_to_anthropic,
    system_to_anthropic,
    to_anthropic,
)

SYSTEM = "You are a careful coding agent."


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return read_file_output(path)


def build(server, middleware, **model_options):
    model = ChatAnthropic(
        model="claude-sonnet-4-6",
        base_url=server.url,
        api_key="test-key",
        max_retries=0,
        **model_options,
    )
    return create_agent(
        model,
        [read_file],
        system_prompt=SYSTEM,
        middleware=middleware,
        checkpointer=InMemorySaver(),
    )


def run_turn(agent, text: str, thread: str, mode: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    state = {"messages": [{"role": "user", "content": text}]}
    if mode == "invoke":
        agent.invoke(state, config)
    else:
        assert list(agent.stream(state, config, stream_mode="messages")), "nothing streamed"


async def arun_turn(agent, text: str, thread: str, mode: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    state = {"messages": [{"role": "user", "content": text}]}
    if mode == "ainvoke":
        await agent.ainvoke(state, config)
    else:
        chunks = [c async for c in agent.astream(state, config, stream_mode="messages")]
        assert chunks, "nothing streamed"


def run_turns(agent, mode: str, turns, thread: str = "thread-1") -> None:
    """``turns`` yields the texts; sync modes call the agent directly, async ones on one
    event loop (the model's async client belongs to the loop it was first used on)."""
    if not mode.startswith("a"):
        for text in turns:
            run_turn(agent, text, thread, mode)
        return

    async def drive() -> None:
        for text in turns:
            await arun_turn(agent, text, thread, mode)

    asyncio.run(drive())


@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke", "astream"])
def test_every_handler_works_inside_a_langchain_agent(
    messages_server, manual_clock, tmp_path, mode
):
    messages_server.responder = agent_model
    middleware = StenographMiddleware(
        all_handlers_preset(tmp_path), state_dir=tmp_path, clock=manual_clock
    )
    agent = build(messages_server, [middleware], streaming=mode.endswith("stream"))

    def turns():
        for turn in range(8):
            yield f"Read the next file ({turn})."
            assert middleware.session("thread-1").wait_for_background(10)
            manual_clock.advance(600 if turn == 0 else 20)

    run_turns(agent, mode, turns())
    session = middleware.session("thread-1")
    check_handlers(messages_server, session)
    check_wire(messages_server, session)
    assert not [e for e in session.events if e.kind == "NotesClientUnavailable"]
    middleware.close()


def test_two_threads_keep_separate_sessions(messages_server, manual_clock):
    messages_server.responder = agent_model
    middleware = StenographMiddleware("inactivity-only", state_dir=None, clock=manual_clock)
    agent = build(messages_server, [middleware])
    for turn in range(2):
        for thread in ("alpha", "beta"):
            run_turn(agent, f"{thread} asks {turn}", thread, "invoke")
    alpha, beta = middleware.session("alpha"), middleware.session("beta")
    assert alpha is not beta and len(alpha.history) == len(beta.history) == 8
    assert "beta" not in json.dumps(alpha.history.messages())
    for body in main_requests(messages_server):
        text = json.dumps(body["messages"])
        assert ("alpha asks" in text) != ("beta asks" in text)
    assert set(middleware.pool.sessions) == {"alpha", "beta"}


def test_a_run_without_the_thread_id_is_a_clear_error(messages_server):
    messages_server.responder = agent_model
    middleware = StenographMiddleware("inactivity-only", state_dir=None)
    agent = create_agent(
        ChatAnthropic(model="m", base_url=messages_server.url, api_key="k", max_retries=0),
        [read_file],
        middleware=[middleware],
    )
    with pytest.raises(ValueError, match=r"config\['configurable'\]\['thread_id'\]"):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})


def test_a_model_that_is_not_chat_anthropic_says_so(messages_server, tmp_path):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    middleware = StenographMiddleware(all_handlers_preset(tmp_path), state_dir=None)
    model = GenericFakeChatModel(messages=iter([AIMessage(content="hello")]))
    agent = create_agent(model, [], middleware=[middleware], checkpointer=InMemorySaver())
    agent.invoke(
        {"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "t"}}
    )
    events = [e for e in middleware.session("t").events if e.kind == "NotesClientUnavailable"]
    assert len(events) == 1 and "GenericFakeChatModel" in events[0].reason


# conversion -----------------------------------------------------------------------------


def test_conversion_round_trips_a_tool_loop():
    messages = [
        HumanMessage(content="Read a.py"),
        AIMessage(
            content=[{"type": "text", "text": "Reading."}],
            tool_calls=[
                {
                    "name": "read_file",
                    "args": {"path": "a.py"},
                    "id": "toolu_1",
                    "type": "tool_call",
                },
                {
                    "name": "read_file",
                    "args": {"path": "b.py"},
                    "id": "toolu_2",
                    "type": "tool_call",
                },
            ],
        ),
        ToolMessage(content="A", tool_call_id="toolu_1"),
        ToolMessage(content="boom", tool_call_id="toolu_2", status="error"),
        AIMessage(content="Both read."),
    ]
    converted = to_anthropic(messages)
    assert converted[1]["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "b.py"}},
    ]
    assert converted[3]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": True}
    ]
    session = stenograph.Engine.from_preset("inactivity-only").open_session("c", state_dir=None)
    for message in converted:
        session.append(message)
    assert stenograph.check_pairing(session.pre_call(model="m")["messages"]) == []
    back = from_anthropic(converted)
    assert [type(m) for m in back] == [type(m) for m in messages]
    assert [c["id"] for c in back[1].tool_calls] == ["toolu_1", "toolu_2"]
    assert back[3].status == "error" and back[2].status == "success"
    assert to_anthropic(back) == converted


def test_each_message_is_converted_once_each_way_and_again_when_a_field_changes(monkeypatch):
    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    import stenograph.integrations.langchain as adapter

    converted: list[str] = []
    into, back = adapter._to_anthropic, adapter.from_anthropic
    monkeypatch.setattr(adapter, "_to_anthropic", lambda m: (converted.append("in"), into(m))[1])
    monkeypatch.setattr(
        adapter, "from_anthropic", lambda ms: (converted.append("out"), back(ms))[1]
    )
    middleware = StenographMiddleware("inactivity-only", state_dir=None, session_key=lambda r: "k")
    model, system = FakeListChatModel(responses=["unused"]), SystemMessage(content=SYSTEM)
    messages: list = [HumanMessage(content="Read a.py")]
    sent: list = []

    def call(reply: AIMessage) -> None:
        request = ModelRequest(
            model=model, messages=messages, system_message=system, tools=[], state={}
        )
        handler = lambda r: (sent.append(r.messages), ModelResponse(result=[reply]))[1]  # noqa: E731
        messages.extend(middleware.wrap_model_call(request, handler).result)

    use = {"name": "read_file", "args": {"path": "a.py"}, "id": "toolu_1", "type": "tool_call"}
    call(AIMessage(content="", tool_calls=[use]))
    messages.append(ToolMessage(content="A" * 50, tool_call_id="toolu_1"))
    call(AIMessage(content="Read it."))
    messages.append(HumanMessage(content="Thanks"))
    converted.clear()
    call(AIMessage(content="Welcome."))
    # the two messages new since the last call (its reply, the question), each way once
    assert converted == ["in", "in", "out", "out"]
    session = middleware.session("k")
    assert sent[-1] == back(session.last_request["messages"])
    converted.clear()
    messages[2].content = "redacted"  # the agent's state edited: a field given a new value
    call(AIMessage(content="Noted."))
    assert converted.count("in") == 2  # that message again, and the reply before
    assert session.history[2].content[0]["content"] == "redacted"
    assert any(isinstance(e, stenograph.HistoryEdited) for e in session.events)
    assert sent[-1] == back(session.last_request["messages"])
    middleware.close()


def test_a_merged_user_message_splits_into_tool_messages_then_the_text():
    merged = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
            {"type": "text", "text": "and now?"},
        ],
    }
    tool_message, human = from_anthropic([merged])
    assert isinstance(tool_message, ToolMessage) and tool_message.tool_call_id == "toolu_1"
    assert isinstance(human, HumanMessage) and human.content == [
        {"type": "text", "text": "and now?"}
    ]


def test_standard_image_blocks_become_anthropic_images():
    message = HumanMessage(
        content=[
            "Look:",
            {"type": "image", "base64": "AAAA", "mime_type": "image/png"},
            {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
        ]
    )
    assert to_anthropic([message])[0]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.org/a.png"}},
    ]


def test_a_response_keeps_its_usage_in_anthropic_terms():
    message = AIMessage(
        content="ok",
        usage_metadata={
            "input_tokens": 130,
            "output_tokens": 7,
            "total_tokens": 137,
            "input_token_details": {"cache_read": 100, "cache_creation": 20},
        },
        response_metadata={"id": "msg_1", "model_name": "claude-x", "stop_reason": "end_turn"},
    )
    assert response_to_anthropic(message) == {
        "role": "assistant",
        "content": "ok",
        "usage": {
            "input_tokens": 10,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
            "output_tokens": 7,
        },
        "id": "msg_1",
        "model": "claude-x",
        "stop_reason": "end_turn",
    }
    assert system_to_anthropic(SystemMessage(content="be brief")) == "be brief"


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_thirty_turns_with_summarization_middleware(messages_server, manual_clock, tmp_path, mode):
    """LangChain's SummarizationMiddleware replaces old messages with a summary; the
    session follows the agent's list and no request breaks."""
    from langchain.agents.middleware import SummarizationMiddleware

    messages_server.responder = agent_model
    summarizer = ChatAnthropic(
        model="claude-haiku-4-5", base_url=messages_server.url, api_key="k", max_retries=0
    )
    middleware = StenographMiddleware(
        all_handlers_preset(tmp_path), state_dir=tmp_path, clock=manual_clock
    )
    summarize = SummarizationMiddleware(summarizer, trigger=("messages", 12), keep=("messages", 4))
    agent = build(messages_server, [summarize, middleware], streaming=mode == "astream")

    def turns():
        for turn in range(30):
            yield f"Read the next file ({turn})."
            assert middleware.session("thread-1").wait_for_background(10)
            manual_clock.advance(400 if turn % 7 == 3 else 15)

    run_turns(agent, mode, turns())
    state = agent.get_state({"configurable": {"thread_id": "thread-1"}}).values
    session = middleware.session("thread-1")
    assert any(SUMMARY in json.dumps(b["messages"]) for b in main_requests(messages_server))
    check_followed(messages_server, session, to_anthropic(state["messages"]))
    middleware.close()
