"""A local HTTP server that speaks Anthropic's Messages API, for tests.

Tests point the real ``anthropic`` SDK at it instead of patching the SDK::

    with MessagesServer() as server:
        server.script(Reply.text("Hello"), Reply.error(429), Reply.tool_use("edit", {"path": "/x"}))
        client = anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0)
        message = client.messages.create(model="m", max_tokens=10, messages=[...])
        assert server.requests[0].body["model"] == "m"

Every ``POST /v1/messages`` consumes one reply: the ``responder`` when one is set, otherwise the
next scripted reply, otherwise ``default`` (``None`` answers a 500 "script exhausted" error that
the SDK does not retry, so a test notices). Replies are rendered the way the API sends them: a
JSON ``Message``, or server-sent events when the request body says ``"stream": true``.
``POST /v1/messages/count_tokens`` answers a rough count; other paths answer a 404 error.

Only the standard library is used; each connection is served on its own thread.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import string
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from ..engine.guard import check_request

__all__ = ["MessagesServer", "RecordedRequest", "Reply", "rough_token_count"]

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"

ReplyKind = Literal["message", "error", "malformed", "reset"]
Responder = Callable[["RecordedRequest"], "Reply"]

#: ``error.type`` and a default message for each status the API documents.
ERROR_TYPES: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low."),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    500: ("api_error", "Internal server error."),
    504: ("timeout_error", "Request timed out."),
    529: ("overloaded_error", "Overloaded"),
}

#: Seconds a 429 asks the client to wait; short so that SDK retries stay fast in tests.
RATE_LIMIT_RETRY_AFTER = 0.01

_ALPHABET = string.ascii_letters + string.digits
_TEXT_CHUNK = 8
_JSON_CHUNK = 12
_MALFORMED_JSON = b'{"id": "msg_01'
_MALFORMED_EVENT = b'{"type": "message_start", "message": {"id": '


def new_id(prefix: str) -> str:
    """An id shaped like the API's: ``msg_01`` / ``toolu_01`` / ``req_01`` + 22 letters."""
    return f"{prefix}_01" + "".join(secrets.choice(_ALPHABET) for _ in range(22))


def rough_token_count(value: object) -> int:
    """About one token per four characters of compact JSON (strings count as themselves)."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return max(1, len(text) // 4)


def _request_tokens(body: Mapping[str, Any]) -> int:
    """A rough input-token count of a Messages request: system prompt, messages and tools."""
    parts = {key: body[key] for key in ("system", "messages", "tools") if key in body}
    return rough_token_count(parts)


def _chunks(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of ``size`` characters (one empty piece for an empty text)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a ``POST /v1/messages``; build it with the class methods.

    ``delay`` seconds pass (after the request is recorded) before the reply is sent; closing the
    server cuts a pending delay short and drops the connection.
    """

    kind: ReplyKind
    content: tuple[Mapping[str, Any], ...] = ()
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Mapping[str, Any] = field(default_factory=dict)
    status: int = 200
    error_type: str = ""
    message: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0

    @classmethod
    def blocks(
        cls,
        content: Sequence[Mapping[str, Any]],
        *,
        stop_reason: str | None = "end_turn",
        stop_sequence: str | None = None,
        usage: Mapping[str, Any] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """A message with these content blocks (API dicts; a ``tool_use`` without ``id`` gets one).

        ``usage`` overrides the defaults: input tokens roughly counted from the request, output
        tokens from the content, no cache tokens.
        """
        return cls(
            kind="message",
            content=tuple(dict(block) for block in content),
            stop_reason=stop_reason,
            stop_sequence=stop_sequence,
            usage=dict(usage or {}),
            delay=delay,
        )

    @classmethod
    def text(
        cls,
        text: str,
        *,
        stop_reason: str = "end_turn",
        stop_sequence: str | None = None,
        usage: Mapping[str, Any] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """A message with one text block, ending the turn (or as ``stop_reason`` says)."""
        block = {"type": "text", "text": text}
        return cls.blocks(
            [block], stop_reason=stop_reason, stop_sequence=stop_sequence, usage=usage, delay=delay
        )

    @classmethod
    def tool_use(
        cls,
        name: str,
        input: Mapping[str, Any],
        *,
        text: str | None = None,
        id: str | None = None,
        usage: Mapping[str, Any] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """A message calling one tool (``stop_reason: tool_use``), after an optional text block."""
        call = {"type": "tool_use", "name": name, "input": dict(input)}
        if id is not None:
            call["id"] = id
        return cls._with_calls([call], text=text, usage=usage, delay=delay)

    @classmethod
    def tool_uses(
        cls,
        calls: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        text: str | None = None,
        usage: Mapping[str, Any] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """A message calling several tools, one ``(name, input)`` pair each, in order."""
        blocks = [{"type": "tool_use", "name": name, "input": dict(args)} for name, args in calls]
        return cls._with_calls(blocks, text=text, usage=usage, delay=delay)

    @classmethod
    def _with_calls(
        cls,
        calls: list[dict[str, Any]],
        *,
        text: str | None,
        usage: Mapping[str, Any] | None,
        delay: float,
    ) -> Reply:
        """A ``tool_use`` message of these calls, after a text block when ``text`` is given."""
        lead = [{"type": "text", "text": text}] if text is not None else []
        return cls.blocks(lead + calls, stop_reason="tool_use", usage=usage, delay=delay)

    @classmethod
    def error(
        cls,
        status: int,
        message: str | None = None,
        *,
        error_type: str | None = None,
        retry_after: float | None | Literal["auto"] = "auto",
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """An API error: ``{"type": "error", "error": {"type": ..., "message": ...}}``.

        The error type follows the status (429 ``rate_limit_error``, 500 ``api_error``, 529
        ``overloaded_error``, ...). ``retry_after`` seconds become ``retry-after`` (whole seconds)
        and ``retry-after-ms`` headers; ``"auto"`` sends them for 429 only, asking for 10 ms.
        """
        default_type, default_message = ERROR_TYPES.get(status, ("api_error", f"HTTP {status}"))
        if retry_after == "auto":
            retry_after = RATE_LIMIT_RETRY_AFTER if status == 429 else None
        extra = _retry_after_headers(retry_after) | dict(headers or {})
        return cls(
            kind="error",
            status=status,
            error_type=error_type or default_type,
            message=message or default_message,
            headers=extra,
            delay=delay,
        )

    @classmethod
    def malformed(cls, body: bytes | None = None, *, delay: float = 0.0) -> Reply:
        """A 200 whose body is not valid JSON (a broken ``message_start`` event when streaming)."""
        return cls(kind="malformed", body=body or b"", delay=delay)

    @classmethod
    def reset(cls, *, delay: float = 0.0) -> Reply:
        """Close the connection without sending any response."""
        return cls(kind="reset", delay=delay)


def _retry_after_headers(seconds: float | None) -> dict[str, str]:
    """The ``retry-after`` (whole seconds, at least 1) and ``retry-after-ms`` headers."""
    if seconds is None:
        return {}
    whole = max(1, int(-(-seconds // 1)))
    return {"retry-after": str(whole), "retry-after-ms": str(round(seconds * 1000))}


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, recorded on arrival (before any reply delay).

    ``headers`` has lower-case keys; ``body`` is the parsed JSON (``None`` when the body is not
    JSON); ``time`` is ``time.monotonic()`` at arrival.
    """

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    time: float

    @property
    def stream(self) -> bool:
        """Whether the request asked for server-sent events (``"stream": true``)."""
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def api_key(self) -> str | None:
        """The key the client sent: ``x-api-key``, or the token of ``authorization: Bearer``.

        (SDK 2.x sends the ``api_key`` as a bearer token rather than as ``x-api-key``.)
        """
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" and token else None


# ---------------------------------------------------------------------------------------------
# Rendering replies into the API's wire format
# ---------------------------------------------------------------------------------------------


def render_message(reply: Reply, request: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Message`` JSON the API would send for ``reply`` to the request body ``request``."""
    content = [_render_block(block) for block in reply.content]
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "unknown-model"),
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": reply.stop_sequence,
        "usage": _render_usage(reply.usage, request, content),
    }


def _render_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a content block; a ``tool_use`` gets a fresh id when it has none."""
    copied: dict[str, Any] = json.loads(json.dumps(block))
    if copied.get("type") != "tool_use":
        return copied
    return {
        "type": "tool_use",
        "id": copied.get("id") or new_id("toolu"),
        "name": copied["name"],
        "input": copied.get("input", {}),
    }


def _render_usage(
    overrides: Mapping[str, Any], request: Mapping[str, Any], content: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``usage`` object: rough counts unless ``overrides`` names the value."""
    usage: dict[str, Any] = {
        "input_tokens": _request_tokens(request),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": rough_token_count(content),
        "service_tier": "standard",
    }
    usage.update(overrides)
    usage.setdefault(
        "cache_creation",
        {
            "ephemeral_5m_input_tokens": usage["cache_creation_input_tokens"],
            "ephemeral_1h_input_tokens": 0,
        },
    )
    return usage


def error_body(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    """The API's error JSON."""
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id,
    }


def stream_events(message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events the API streams for ``message``, as ``(event, data)`` pairs."""
    usage = dict(message["usage"])
    start_usage = usage | {"output_tokens": min(1, usage["output_tokens"])}
    start = dict(message) | {
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    events = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        events.extend(_block_events(index, block))
    # The API pings right after the first content_block_start.
    events.insert(2 if message["content"] else 1, ("ping", {"type": "ping"}))
    final_usage = {
        key: usage[key]
        for key in (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        )
    }
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]}
    events.append(
        ("message_delta", {"type": "message_delta", "delta": delta, "usage": final_usage})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``content_block_start``, the deltas and ``content_block_stop`` of one content block."""
    kind = block.get("type")
    if kind == "text":
        empty: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [
            {"type": "text_delta", "text": part} for part in _chunks(block["text"], _TEXT_CHUNK)
        ]
    elif kind == "tool_use":
        empty = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        encoded = json.dumps(block["input"], ensure_ascii=False)
        parts = [""] + _chunks(encoded, _JSON_CHUNK)
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in parts]
    elif kind == "thinking":
        empty = {"type": "thinking", "thinking": "", "signature": ""}
        thought = _chunks(block.get("thinking", ""), _TEXT_CHUNK)
        deltas = [{"type": "thinking_delta", "thinking": part} for part in thought]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    else:
        empty, deltas = dict(block), []
    start = {"type": "content_block_start", "index": index, "content_block": empty}
    events = [("content_block_start", start)]
    events.extend(
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        for delta in deltas
    )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def format_event(event: str, data: Mapping[str, Any]) -> bytes:
    """One server-sent event: ``event:`` and ``data:`` lines and a blank line."""
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event}\ndata: {payload}\n\n".encode()


def validation_error(body: Any) -> str | None:
    """What the API would reject in a Messages request body, or ``None`` when it looks fine."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    if not isinstance(body["messages"], list):
        return "messages: Input should be a valid list"
    problems = check_request(body["messages"])
    return f"messages: {problems[0]}" if problems else None


# ---------------------------------------------------------------------------------------------
# HTTP plumbing
# ---------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    """Serves one connection (HTTP/1.1 keep-alive), handing each request to the owner."""

    protocol_version = "HTTP/1.1"
    server_version = "stenograph-messages-server"
    sys_version = ""
    server: _HTTPServer

    def setup(self) -> None:
        """TCP_NODELAY when the owner says so (headers and body go out in two writes)."""
        super().setup()
        if self.server.owner.nodelay:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)

    def do_POST(self) -> None:
        """Answer a POST."""
        self.server.owner._serve(self)

    # Other methods only ever reach unknown paths: a 404.
    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean: no access log."""

    def read_body(self) -> bytes:
        """The request body (the SDK always sends a ``content-length``)."""
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def send_bytes(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        """A complete response with a ``content-length``."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, data: object, headers: Mapping[str, str]) -> None:
        """A JSON response."""
        body = json.dumps(data).encode()
        self.send_bytes(status, body, {"content-type": "application/json", **headers})

    def send_events(self, events: Iterator[bytes], headers: Mapping[str, str]) -> None:
        """A ``text/event-stream`` response, one chunk (of chunked encoding) per event."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for event in events:
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def drop(self) -> None:
        """Abort the connection: no response, and a TCP reset rather than a clean close."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()


class _HTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that keeps track of its open connections to cut them on close."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], owner: MessagesServer) -> None:
        self.owner = owner
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own, remembered until it ends."""
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name="messages-server-connection",
            daemon=True,
        )
        with self._connections_lock:
            self._connections[request] = thread
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        """Run the handler for one connection, then close and forget it."""
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.pop(request, None)
            self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore connections the client (or ``close()``) cut; keep anything else for tests."""
        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, OSError):
            self.owner._note_error(error)

    def cut_connections(self, timeout: float) -> None:
        """Shut every open connection down and wait (up to ``timeout``) for their threads."""
        with self._connections_lock:
            open_now = list(self._connections.items())
        for connection, _ in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for _, thread in open_now:
            thread.join(max(0.0, deadline - time.monotonic()))


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


class MessagesServer:
    """A Messages API on ``127.0.0.1`` (a free port), serving from construction until ``close()``.

    Thread-safe: tests may script replies, set ``default``/``responder`` and read ``requests``
    while clients are talking to it.

    ``nodelay`` (default ``True``) sets TCP_NODELAY on every connection: a response's headers
    and body go out in two writes, and with Nagle's algorithm on the body waits for the
    client's delayed ACK of the headers (~40 ms per reply on Linux). ``False`` keeps the
    operating system's default, as a plain ``socketserver`` has it.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, nodelay: bool = True) -> None:
        self.nodelay = nodelay
        """Whether connections send without Nagle's delay (TCP_NODELAY)."""
        self.default: Reply | None = None
        """The reply when the script is exhausted (``None``: a 500 "script exhausted" error)."""
        self.responder: Responder | None = None
        """When set, answers every Messages request instead of the script."""
        self._script: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._httpd = _HTTPServer((host, port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="messages-server",
            daemon=True,
        )
        self._thread.start()

    # -- public API ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to give the SDK, e.g. ``http://127.0.0.1:PORT``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies; each ``POST /v1/messages`` consumes the next one."""
        with self._changed:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been consumed yet."""
        with self._changed:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (all paths, in arrival order); a copy."""
        with self._changed:
            return list(self._requests)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by a ``responder`` or by the server itself (normally empty)."""
        with self._changed:
            return list(self._errors)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        """Block until at least ``n`` requests arrived (``True``) or ``timeout`` passed."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._requests) >= n, timeout)

    def close(self) -> None:
        """Stop serving: pending delays end at once and their connections are dropped."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.cut_connections(timeout=0.5)
        self._httpd.server_close()
        self._thread.join(timeout=1.0)

    def __enter__(self) -> MessagesServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- serving (called on connection threads) ---------------------------------------------------

    def _serve(self, handler: _Handler) -> None:
        """Record the request, pick its reply, wait out the delay and send it."""
        request = self._record(handler)
        if request.method == "POST" and request.path == COUNT_TOKENS_PATH:
            self._answer_count(handler, request)
        elif request.method == "POST" and request.path == MESSAGES_PATH:
            reply = self._reply_for(request)
            if self._interrupted(reply.delay):
                handler.drop()
            else:
                self._send(handler, reply, request)
        else:
            self._send(handler, Reply.error(404, f"Not found: {request.path}"), request)

    def _record(self, handler: _Handler) -> RecordedRequest:
        """Read the request and append it to ``requests``."""
        raw = handler.read_body()
        path, _, query = handler.path.partition("?")
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            method=handler.command,
            path=path,
            query=query,
            headers={name.lower(): value for name, value in handler.headers.items()},
            body=body,
            raw=raw,
            time=time.monotonic(),
        )
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()
        return request

    def _reply_for(self, request: RecordedRequest) -> Reply:
        """The responder's reply, else the next scripted one, else the default."""
        problem = validation_error(request.body)
        if problem is not None:
            return Reply.error(400, problem)
        responder = self.responder
        if responder is not None:
            return self._ask(responder, request)
        with self._changed:
            if self._script:
                return self._script.popleft()
            index = len(self._requests)
        if self.default is not None:
            return self.default
        message = f"script exhausted: no reply scripted for request #{index} and no default"
        return Reply.error(500, message, headers={"x-should-retry": "false"})

    def _interrupted(self, delay: float) -> bool:
        """Wait ``delay`` seconds; ``True`` when the server is closing (which cuts the wait)."""
        if delay > 0:
            return self._stopping.wait(delay)
        return self._stopping.is_set()

    def _note_error(self, error: BaseException) -> None:
        """Keep an unexpected exception for ``errors``."""
        with self._changed:
            self._errors.append(error)

    def _ask(self, responder: Responder, request: RecordedRequest) -> Reply:
        """Call the responder; its exception becomes a non-retried 500 and lands in ``errors``."""
        try:
            return responder(request)
        except Exception as error:
            self._note_error(error)
            message = f"responder raised {type(error).__name__}: {error}"
            return Reply.error(500, message, headers={"x-should-retry": "false"})

    def _answer_count(self, handler: _Handler, request: RecordedRequest) -> None:
        """``{"input_tokens": N}`` for a count_tokens request."""
        if not isinstance(request.body, dict) or "messages" not in request.body:
            self._send(handler, Reply.error(400, "messages: Field required"), request)
            return
        tokens = _request_tokens(request.body)
        handler.send_json(200, {"input_tokens": tokens}, {"request-id": new_id("req")})

    def _send(self, handler: _Handler, reply: Reply, request: RecordedRequest) -> None:
        """Write ``reply`` in the wire format the request asked for."""
        headers = {"request-id": new_id("req"), **reply.headers}
        if reply.kind == "reset":
            handler.drop()
        elif reply.kind == "error":
            body = error_body(reply.error_type, reply.message, headers["request-id"])
            handler.send_json(reply.status, body, headers)
        elif reply.kind == "malformed":
            self._send_malformed(handler, reply, request, headers)
        else:
            message = render_message(reply, request.body)
            if request.stream:
                events = (format_event(name, data) for name, data in stream_events(message))
                handler.send_events(events, headers)
            else:
                handler.send_json(200, message, headers)

    @staticmethod
    def _send_malformed(
        handler: _Handler, reply: Reply, request: RecordedRequest, headers: Mapping[str, str]
    ) -> None:
        """A 200 that cannot be parsed: truncated JSON, or a broken first event when streaming."""
        if request.stream:
            data = reply.body or _MALFORMED_EVENT
            handler.send_events(iter([b"event: message_start\ndata: " + data + b"\n\n"]), headers)
        else:
            content = {"content-type": "application/json", **headers}
            handler.send_bytes(200, reply.body or _MALFORMED_JSON, content)
