"""A model call that fails, or a stream the host leaves, gives the session's lease back at
once, through every way in: ``wrap()`` (create, ``stream=True``, ``messages.stream``, sync
and async), LangChain's middleware and pydantic-ai's capability. The lease is kept alive
while a model call runs, so one not given back would hold other workers off for up to
``call_seconds``."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import anthropic
import pytest
from framework_agents import require_extra
from store_fixtures import taken_elsewhere

import stenograph
from stenograph.integrations.anthropic import wrap
from stenograph.testing import Reply

ASK = [{"role": "user", "content": "hello"}]
FAILS = Reply.error(500, "the model is down")


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"file:{tmp_path / 'store'}"


@pytest.fixture
def session(store):
    engine = stenograph.Engine.from_preset("inactivity-only")
    with engine.open_session("s", store=store) as opened:
        yield opened


def test_a_failed_create_gives_the_lease_back(session, store, messages_server, anthropic_client):
    messages_server.default = FAILS
    with pytest.raises(anthropic.InternalServerError):
        wrap(anthropic_client, session).messages.create(model="m", max_tokens=9, messages=ASK)
    assert taken_elsewhere(store, "s")


def test_a_stream_left_early_gives_the_lease_back(
    session, store, messages_server, anthropic_client
):
    messages_server.default = Reply.text("a long answer")
    client = wrap(anthropic_client, session)
    with client.messages.create(model="m", max_tokens=9, messages=ASK, stream=True) as events:
        for _ in events:
            break  # the host stops reading before message_stop
    assert taken_elsewhere(store, "s")
    assert [e.role for e in session.history] == ["user"]


def test_a_stream_read_to_its_end_is_appended(session, store, messages_server, anthropic_client):
    messages_server.default = Reply.text("the answer")
    client = wrap(anthropic_client, session)
    with client.messages.create(model="m", max_tokens=9, messages=ASK, stream=True) as events:
        for _ in events:
            pass
    assert taken_elsewhere(store, "s")
    assert [e.role for e in session.history] == ["user", "assistant"]


def test_a_failure_inside_messages_stream_gives_the_lease_back(
    session, store, messages_server, anthropic_client
):
    messages_server.default = Reply.text("an answer")
    client = wrap(anthropic_client, session)
    with (
        pytest.raises(RuntimeError, match="the host failed"),
        client.messages.stream(model="m", max_tokens=9, messages=ASK),
    ):
        raise RuntimeError("the host failed")
    assert taken_elsewhere(store, "s")


def test_a_messages_stream_that_cannot_start_gives_the_lease_back(
    session, store, messages_server, anthropic_client
):
    messages_server.default = FAILS
    client = wrap(anthropic_client, session)
    with (
        pytest.raises(anthropic.InternalServerError),
        client.messages.stream(model="m", max_tokens=9, messages=ASK) as stream,
    ):
        stream.get_final_message()
    assert taken_elsewhere(store, "s")


def test_async_failures_give_the_lease_back(session, store, messages_server):
    client = wrap(
        anthropic.AsyncAnthropic(api_key="k", base_url=messages_server.url, max_retries=0),
        session,
    )

    async def calls() -> None:
        messages_server.default = FAILS
        with pytest.raises(anthropic.InternalServerError):
            await client.messages.create(model="m", max_tokens=9, messages=ASK)
        assert taken_elsewhere(store, "s")
        with pytest.raises(anthropic.InternalServerError):
            async with client.messages.stream(model="m", max_tokens=9, messages=ASK) as s:
                await s.get_final_message()
        assert taken_elsewhere(store, "s")
        messages_server.default = Reply.text("an answer")
        with pytest.raises(RuntimeError, match="the host failed"):
            async with client.messages.stream(model="m", max_tokens=9, messages=ASK):
                raise RuntimeError("the host failed")
        assert taken_elsewhere(store, "s")
        events = await client.messages.create(model="m", max_tokens=9, messages=ASK, stream=True)
        async with events:
            async for _ in events:
                break
        assert taken_elsewhere(store, "s")

    asyncio.run(calls())


@pytest.mark.parametrize("way", ["invoke", "ainvoke"])
def test_a_failed_model_call_in_a_langchain_agent_gives_the_lease_back(store, messages_server, way):
    require_extra("langchain", "langchain")
    from langchain.agents import create_agent
    from langchain_anthropic import ChatAnthropic

    from stenograph.integrations.langchain import StenographMiddleware

    messages_server.default = FAILS
    middleware = StenographMiddleware("inactivity-only", store=store)
    model = ChatAnthropic(model="m", base_url=messages_server.url, api_key="k", max_retries=0)
    agent = create_agent(model, [], middleware=[middleware])
    run, config = ({"messages": ASK}, {"configurable": {"thread_id": "s"}})
    with pytest.raises(anthropic.InternalServerError):
        if way == "invoke":
            agent.invoke(run, config)
        else:
            asyncio.run(agent.ainvoke(run, config))
    assert taken_elsewhere(store, "s")
    middleware.close()


def test_a_failed_model_call_in_a_pydantic_ai_agent_gives_the_lease_back(store, messages_server):
    require_extra("pydantic_ai", "pydantic-ai")
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    from stenograph.integrations.pydantic_ai import Stenograph

    messages_server.default = FAILS
    capability = Stenograph("inactivity-only", store=store)
    client = anthropic.AsyncAnthropic(api_key="k", base_url=messages_server.url, max_retries=0)
    model = AnthropicModel("m", provider=AnthropicProvider(anthropic_client=client))
    agent = Agent(model, capabilities=[capability])
    with pytest.raises(ModelHTTPError):
        agent.run_sync("hello", conversation_id="s")
    assert taken_elsewhere(store, "s")
    capability.close()


def _given_back_soon(store: str, seconds: float = 5.0) -> bool:
    """Whether another worker gets the session within ``seconds`` (the give-back of an
    abandoned call runs on a thread of its own, moments later)."""
    deadline = time.monotonic() + seconds
    while not taken_elsewhere(store, "s"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_stream_dropped_unread_gives_the_lease_back(
    session, store, messages_server, anthropic_client
):
    messages_server.default = Reply.text("never read")
    client = wrap(anthropic_client, session)
    events = client.messages.create(model="m", max_tokens=9, messages=ASK, stream=True)
    assert not taken_elsewhere(store, "s")  # the call holds the session
    del events
    assert _given_back_soon(store)
    assert [e.role for e in session.history] == ["user"]


def test_a_stream_dropped_half_read_gives_the_lease_back(
    session, store, messages_server, anthropic_client
):
    messages_server.default = Reply.text("a long answer")
    client = wrap(anthropic_client, session)
    events = client.messages.create(model="m", max_tokens=9, messages=ASK, stream=True)
    reading = iter(events)
    next(reading)
    assert not taken_elsewhere(store, "s")
    del events, reading
    gc.collect()  # the half-read generator and its stream may sit in a cycle
    assert _given_back_soon(store)


def test_a_messages_stream_never_entered_gives_the_lease_back(
    session, store, messages_server, anthropic_client
):
    messages_server.default = Reply.text("an answer")
    manager = wrap(anthropic_client, session).messages.stream(model="m", max_tokens=9, messages=ASK)
    assert not taken_elsewhere(store, "s")
    del manager
    assert _given_back_soon(store)


def test_a_dropped_stream_does_not_give_back_a_later_call(
    session, store, messages_server, anthropic_client
):
    messages_server.default = Reply.text("the answer")
    client = wrap(anthropic_client, session)
    with client.messages.create(model="m", max_tokens=9, messages=ASK, stream=True) as events:
        for _ in events:
            pass  # read to its end: appended, the lease given back
    session.append({"role": "user", "content": "next"})  # a new call takes the lease
    del events
    gc.collect()
    time.sleep(0.2)  # what a wrong give-back would need to run
    assert not taken_elsewhere(store, "s")
    session.release()


def test_an_async_stream_dropped_unread_gives_the_lease_back(session, store, messages_server):
    messages_server.default = Reply.text("never read")
    client = wrap(
        anthropic.AsyncAnthropic(api_key="k", base_url=messages_server.url, max_retries=0),
        session,
    )

    async def call() -> None:
        events = await client.messages.create(model="m", max_tokens=9, messages=ASK, stream=True)
        assert not taken_elsewhere(store, "s")
        del events

    asyncio.run(call())
    assert _given_back_soon(store)
