"""The local Messages API server, driven through the real ``anthropic`` SDK."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types import Message

from stenograph.testing import MessagesServer, Reply
from stenograph.testing.messages_server import RecordedRequest

MODEL = "claude-test-model"
REQUEST: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Please edit the file."}],
}
EDIT = {"command": "str_replace", "path": "/x", "old_str": "a", "new_str": "b"}


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    """A running server, closed after the test."""
    with MessagesServer() as running:
        yield running


@pytest.fixture
def client(server: MessagesServer) -> Iterator[anthropic.Anthropic]:
    """The real SDK pointed at the server, without retries."""
    with anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0) as sdk:
        yield sdk


def comparable(message: Any) -> dict[str, Any]:
    """A message as a dict without ids (fresh per response) and without unset fields."""
    dumped = message.model_dump(exclude_none=True)
    dumped.pop("id")
    for block in dumped["content"]:
        block.pop("id", None)
    return dumped


# -- non-streaming ---------------------------------------------------------------------------------


def test_text_reply_parses_into_a_message(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.text("Hello"))
    message = client.messages.create(**REQUEST)
    assert isinstance(message, Message)
    assert message.id.startswith("msg_")
    assert (message.type, message.role, message.model) == ("message", "assistant", MODEL)
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Hello"
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    assert message.usage.input_tokens > 0
    assert message.usage.output_tokens > 0
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens == 0


def test_usage_can_be_scripted(server: MessagesServer, client: anthropic.Anthropic):
    usage = {"input_tokens": 10, "cache_read_input_tokens": 900, "output_tokens": 5}
    server.script(Reply.text("x", usage=usage))
    message = client.messages.create(**REQUEST)
    assert message.usage.input_tokens == 10
    assert message.usage.cache_read_input_tokens == 900
    assert message.usage.cache_creation_input_tokens == 0
    assert message.usage.output_tokens == 5


def test_stop_sequence_reply(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.text("up to", stop_reason="stop_sequence", stop_sequence="END"))
    message = client.messages.create(**REQUEST, stop_sequences=["END"])
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")


def test_tool_use_reply(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.tool_use("str_replace_based_edit_tool", EDIT, text="Editing."))
    message = client.messages.create(**REQUEST)
    assert message.stop_reason == "tool_use"
    text, call = message.content
    assert text.type == "text" and text.text == "Editing."
    assert call.type == "tool_use"
    assert call.id.startswith("toolu_")
    assert call.name == "str_replace_based_edit_tool"
    assert call.input == EDIT


def test_several_tool_calls_get_distinct_ids(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.tool_uses([("read", {"path": "/a"}), ("read", {"path": "/b"})]))
    message = client.messages.create(**REQUEST)
    calls = [block for block in message.content if block.type == "tool_use"]
    assert [call.input for call in calls] == [{"path": "/a"}, {"path": "/b"}]
    assert len({call.id for call in calls}) == 2


# -- streaming -------------------------------------------------------------------------------------

STREAMED_REPLIES = {
    "text": Reply.text("A longer answer, streamed in several text deltas."),
    "tool_use": Reply.tool_use(
        "str_replace_based_edit_tool", EDIT, text="Editing.", id="toolu_01x"
    ),
    "tool_uses": Reply.tool_uses([("read", {"path": "/a"}), ("write", {"path": "/b", "n": [1]})]),
    "thinking": Reply.blocks(
        [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
            {"type": "text", "text": "Done."},
        ]
    ),
    "cached usage": Reply.text("x", usage={"input_tokens": 10, "cache_read_input_tokens": 900}),
}


@pytest.mark.parametrize("reply", STREAMED_REPLIES.values(), ids=STREAMED_REPLIES.keys())
def test_streamed_message_equals_the_plain_one(
    server: MessagesServer, client: anthropic.Anthropic, reply: Reply
):
    server.script(reply, reply)
    plain = client.messages.create(**REQUEST)
    with client.messages.stream(**REQUEST) as stream:
        streamed = stream.get_final_message()
    assert comparable(streamed) == comparable(plain)
    assert [r.stream for r in server.requests] == [False, True]


def test_create_stream_yields_the_api_events(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.tool_use("edit", {"path": "/a/long/path/to/edit.py"}, text="Hi"))
    events = list(client.messages.create(**REQUEST, stream=True))
    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    deltas = [event.delta for event in events if event.type == "content_block_delta"]
    partial = "".join(d.partial_json for d in deltas if d.type == "input_json_delta")
    assert json.loads(partial) == {"path": "/a/long/path/to/edit.py"}
    assert sum(d.type == "input_json_delta" for d in deltas) > 2
    assert "".join(d.text for d in deltas if d.type == "text_delta") == "Hi"
    assert events[-2].delta.stop_reason == "tool_use"


def test_stream_wire_format(server: MessagesServer):
    server.script(Reply.text("Hello"))
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    connection.request("POST", "/v1/messages", json.dumps({**REQUEST, "stream": True}))
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    assert response.status == 200
    assert response.getheader("content-type").startswith("text/event-stream")
    names = [
        line.removeprefix("event: ") for line in body.splitlines() if line.startswith("event:")
    ]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


# -- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error", "error_type"),
    [
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (529, anthropic.OverloadedError, "overloaded_error"),
    ],
)
def test_errors_map_to_sdk_exceptions(
    server: MessagesServer,
    client: anthropic.Anthropic,
    status: int,
    error: type[anthropic.APIStatusError],
    error_type: str,
):
    server.script(Reply.error(status))
    with pytest.raises(error) as raised:
        client.messages.create(**REQUEST)
    assert raised.value.status_code == status
    assert raised.value.type == error_type
    assert raised.value.request_id.startswith("req_")
    assert isinstance(raised.value.body, dict) and raised.value.body["type"] == "error"


def test_rate_limit_sends_retry_after(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.error(429))
    with pytest.raises(anthropic.RateLimitError) as raised:
        client.messages.create(**REQUEST)
    headers = raised.value.response.headers
    assert (headers["retry-after"], headers["retry-after-ms"]) == ("1", "10")


def test_overloaded_is_an_internal_server_error(
    server: MessagesServer, client: anthropic.Anthropic
):
    server.script(Reply.error(529))
    with pytest.raises(anthropic.InternalServerError) as raised:
        client.messages.create(**REQUEST)
    assert type(raised.value) is anthropic.OverloadedError


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_malformed_body_raises_a_json_error(
    server: MessagesServer, client: anthropic.Anthropic, stream: bool
):
    # The SDK does not wrap this: the JSON decoder's own error reaches the caller.
    server.script(Reply.malformed())
    with pytest.raises(json.JSONDecodeError):
        if stream:
            with client.messages.stream(**REQUEST) as events:
                events.get_final_message()
        else:
            client.messages.create(**REQUEST)


def test_reset_raises_a_connection_error(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.reset(), Reply.text("after"))
    with pytest.raises(anthropic.APIConnectionError) as raised:
        client.messages.create(**REQUEST)
    assert not isinstance(raised.value, anthropic.APITimeoutError)
    assert client.messages.create(**REQUEST).content[0].text == "after"


def test_delay_beyond_the_client_timeout(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.text("slow", delay=3.0))
    started = time.monotonic()
    with pytest.raises(anthropic.APITimeoutError):
        client.messages.create(**REQUEST, timeout=0.5)
    assert time.monotonic() - started < 2.0


def test_close_cuts_a_pending_delay_short():
    outcome: list[object] = []
    with MessagesServer() as server:
        server.script(Reply.text("never", delay=30.0))
        sdk = anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0)

        def call() -> None:
            try:
                outcome.append(sdk.messages.create(**REQUEST))
            except anthropic.APIError as error:
                outcome.append(error)

        caller = threading.Thread(target=call)
        caller.start()
        assert server.wait_for_requests(1, timeout=5)  # recorded while the reply is held
        assert outcome == []
        started = time.monotonic()
    assert time.monotonic() - started < 1.0
    caller.join(timeout=5)
    sdk.close()
    assert len(outcome) == 1 and isinstance(outcome[0], anthropic.APIConnectionError)


def test_script_exhausted_without_default(server: MessagesServer):
    sdk = anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=2)
    with sdk, pytest.raises(anthropic.InternalServerError, match="script exhausted"):
        sdk.messages.create(**REQUEST)
    assert len(server.requests) == 1  # x-should-retry: false stops the SDK's retries


def test_default_reply_after_the_script(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.text("first"))
    server.default = Reply.text("ok")
    texts = [client.messages.create(**REQUEST).content[0].text for _ in range(3)]
    assert texts == ["first", "ok", "ok"]
    assert server.remaining == 0


def test_responder_takes_precedence(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.text("scripted"))

    def echo(request: RecordedRequest) -> Reply:
        return Reply.text(request.body["messages"][-1]["content"].upper())

    server.responder = echo
    assert client.messages.create(**REQUEST).content[0].text == "PLEASE EDIT THE FILE."
    assert server.remaining == 1


def test_sdk_retries_a_rate_limit(server: MessagesServer):
    server.script(Reply.error(429), Reply.text("ok"))
    with anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=2) as sdk:
        assert sdk.messages.create(**REQUEST).content[0].text == "ok"
    first, second = server.requests
    assert [r.headers["x-stainless-retry-count"] for r in (first, second)] == ["0", "1"]
    assert second.time - first.time < 1.0


# -- recording and other endpoints -----------------------------------------------------------------


def test_requests_are_recorded(server: MessagesServer, client: anthropic.Anthropic):
    server.script(Reply.text("Hello"))
    client.messages.create(**REQUEST, system="Be brief.")
    (request,) = server.requests
    assert (request.method, request.path, request.stream) == ("POST", "/v1/messages", False)
    assert request.body == {**REQUEST, "system": "Be brief."}
    # SDK 2.x sends the key as "authorization: Bearer test"; older ones as "x-api-key: test".
    assert request.api_key == "test"
    assert "x-api-key" in request.headers or request.headers["authorization"] == "Bearer test"
    assert request.headers["anthropic-version"]
    assert request.headers["content-type"] == "application/json"
    assert request.time <= time.monotonic()


@pytest.mark.parametrize(("options", "nodelay"), [({}, True), ({"nodelay": False}, False)])
def test_nodelay_sets_tcp_nodelay_on_each_connection(options: dict[str, bool], nodelay: bool):
    """``nodelay`` (on by default) sends a reply's headers and body without Nagle's delay."""
    with MessagesServer(**options) as server:
        server.script(Reply.text("Hello"))
        connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
        connection.request("POST", "/v1/messages", json.dumps(REQUEST))
        connection.getresponse().read()
        (served,) = list(server._httpd._connections)  # the keep-alive connection, still open
        flag = served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        connection.close()
    assert bool(flag) is nodelay


def test_wait_for_requests_times_out(server: MessagesServer):
    started = time.monotonic()
    assert server.wait_for_requests(1, timeout=0.1) is False
    assert time.monotonic() - started < 1.0


def test_concurrent_requests(server: MessagesServer, client: anthropic.Anthropic):
    server.default = Reply.text("ok", delay=0.1)
    results: list[str] = []

    def call() -> None:
        results.append(client.messages.create(**REQUEST).content[0].text)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    assert results == ["ok"] * 8
    assert len(server.requests) == 8


def test_count_tokens(server: MessagesServer, client: anthropic.Anthropic):
    counted = client.messages.count_tokens(model=MODEL, messages=REQUEST["messages"])
    assert counted.input_tokens > 0
    assert server.requests[0].path == "/v1/messages/count_tokens"
    assert server.remaining == 0


def test_unknown_path_is_a_404(server: MessagesServer, client: anthropic.Anthropic):
    with pytest.raises(anthropic.NotFoundError) as raised:
        client.models.list()
    assert raised.value.type == "not_found_error"


def test_async_client():
    async def talk(server: MessagesServer) -> tuple[Message, Any]:
        sdk = anthropic.AsyncAnthropic(api_key="test", base_url=server.url, max_retries=0)
        async with sdk:
            plain = await sdk.messages.create(**REQUEST)
            async with sdk.messages.stream(**REQUEST) as stream:
                streamed = await stream.get_final_message()
        return plain, streamed

    with MessagesServer() as server:
        reply = Reply.tool_use("edit", EDIT, text="Editing.", id="toolu_01a")
        server.script(reply, reply)
        plain, streamed = asyncio.run(talk(server))
    assert plain.content[1].input == EDIT
    assert comparable(streamed) == comparable(plain)
