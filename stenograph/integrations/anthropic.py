"""One line to put a session behind the official SDK:

    client = stenograph.integrations.anthropic.wrap(anthropic.Anthropic(), session)

``client.messages.create(...)`` and ``client.messages.stream(...)`` then go through the
session: the messages the host passes that the session has not seen are appended as input,
the pre-call phase shapes the request, and the response (once complete, when streamed) is
appended and the post-sampling phase runs. Everything else is the SDK's own.

SDK middleware is not used on purpose: it runs inside the retry loop (once per HTTP
attempt) and sees raw HTTP responses, so a streamed reply is not complete when it returns.
Wrapping ``messages`` runs each phase once per logical call and keeps the SDK's retries,
errors and streaming behaviour exactly as they are.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast, overload

import anthropic

from ..engine.session import Session

TRANSPORT_KEYS = ("extra_headers", "extra_query", "extra_body", "timeout")
_NOT_GIVEN = (anthropic.NotGiven, anthropic.Omit)


SyncClient = TypeVar("SyncClient", bound=anthropic.Anthropic)
AsyncClient = TypeVar("AsyncClient", bound=anthropic.AsyncAnthropic)


@overload
def wrap(client: SyncClient, session: Session) -> SyncClient: ...
@overload
def wrap(client: AsyncClient, session: Session) -> AsyncClient: ...
def wrap(client: SyncClient | AsyncClient, session: Session) -> SyncClient | AsyncClient:
    """``client`` (``Anthropic`` or ``AsyncAnthropic``) with its messages going through
    ``session``. To type checkers it is the client's own type (``max_tokens="ten"`` is an
    error there as on the plain client); at run time it is a proxy that hands everything
    but ``messages.create`` / ``messages.stream`` to the client."""
    if isinstance(client, anthropic.AsyncAnthropic):
        return cast(AsyncClient, _Client(client, _AsyncMessages(client, session)))
    return cast(SyncClient, _Client(client, _Messages(client, session)))


class _Client:
    """The SDK client, except ``messages``."""

    def __init__(self, client: Any, messages: Any) -> None:
        self._client = client
        self.messages = messages

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class _Base:
    def __init__(self, client: Any, session: Session) -> None:
        self._client = client
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client.messages, name)

    def _prepare(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Append unseen input, run pre-call; (request for the SDK, transport options)."""
        given: dict[str, Any] = {}
        transport: dict[str, Any] = {}
        for key, value in kwargs.items():
            if not isinstance(value, _NOT_GIVEN):
                (transport if key in TRANSPORT_KEYS else given)[key] = value
        try:
            take_input(self._session, given.pop("messages", []))
            keep = {k: given.pop(k) for k in ("max_tokens", "stream") if k in given}
            request = self._session.pre_call(
                model=given.pop("model"),
                system=given.pop("system", None),
                tools=given.pop("tools", None),
                **given,
            )
        except BaseException:
            self._session.release()
            raise
        return {**request, **keep}, transport  # type: ignore[dict-item]


def take_input(session: Session, messages: Any) -> None:
    """Make ``session`` hold the host's whole list (:meth:`Session.sync`): unseen messages
    appended, host edits adopted, a rewind followed; another conversation raises
    ``ConversationMismatch`` (a ``ValueError``) and changes nothing."""
    session.sync(messages if isinstance(messages, list) else list(messages))


class _Messages(_Base):
    """``client.messages`` of a sync client."""

    def create(self, **kwargs: Any) -> Any:
        """``messages.create``, through the session."""
        request, transport = self._prepare(kwargs)
        try:
            response = self._client.messages.create(**request, **transport)
        except BaseException:
            self._session.release()  # the next call, from any worker, may go ahead
            raise
        if request.get("stream"):
            return _Stream(response, self._session)
        self._session.post_sampling(response)
        return response

    def stream(self, **kwargs: Any) -> _StreamManager:
        """``messages.stream``, through the session; appended when the stream completes."""
        request, transport = self._prepare(kwargs)
        return _StreamManager(self._client.messages.stream(**request, **transport), self._session)


class _AsyncMessages(_Base):
    """``client.messages`` of an async client."""

    async def create(self, **kwargs: Any) -> Any:
        """``messages.create``, through the session."""
        request, transport = await self._session.arun_phase("pre_call", self._prepare, kwargs)
        try:
            response = await self._client.messages.create(**request, **transport)
        except BaseException:
            self._session.release()
            raise
        if request.get("stream"):
            return _AsyncStream(response, self._session)
        await self._session.apost_sampling(response)
        return response

    def stream(self, **kwargs: Any) -> _AsyncStreamManager:
        """``messages.stream``, through the session; appended when the stream completes."""
        return _AsyncStreamManager(self, kwargs)


class _StreamManager:
    """Wraps ``MessageStreamManager``: the final message is appended on a clean exit; the
    call's lease is given back when the stream cannot start or the block fails."""

    def __init__(self, manager: Any, session: Session) -> None:
        self._manager, self._session = manager, session
        session.held_by(self)  # a manager dropped unentered gives the lease back

    def __enter__(self) -> Any:
        with _released_on_failure(self._session):
            self._stream = self._manager.__enter__()
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        if exc_type is None:
            try:
                self._session.post_sampling(self._stream.get_final_message())
            except BaseException:
                self._manager.__exit__(None, None, None)
                raise
            return self._manager.__exit__(None, None, None)
        try:
            return self._manager.__exit__(exc_type, exc, tb)
        finally:
            self._session.release()


class _AsyncStreamManager:
    """Wraps ``AsyncMessageStreamManager`` likewise."""

    def __init__(self, messages: _AsyncMessages, kwargs: dict[str, Any]) -> None:
        self._messages, self._kwargs = messages, kwargs

    async def __aenter__(self) -> Any:
        messages = self._messages
        request, transport = await messages._session.arun_phase(
            "pre_call", messages._prepare, self._kwargs
        )
        with _released_on_failure(messages._session):
            self._manager = messages._client.messages.stream(**request, **transport)
            self._stream = await self._manager.__aenter__()
        return self._stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        if exc_type is None:
            try:
                final = await self._stream.get_final_message()
                await self._messages._session.apost_sampling(final)
            except BaseException:
                await self._manager.__aexit__(None, None, None)
                raise
            return await self._manager.__aexit__(None, None, None)
        try:
            return await self._manager.__aexit__(exc_type, exc, tb)
        finally:
            self._messages._session.release()


class _Accumulator:
    """Builds the final message from raw stream events (text, tool_use, thinking)."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.json: dict[int, str] = {}

    def add(self, event: Any) -> dict[str, Any] | None:
        """Feed one event; returns the complete message at ``message_stop``."""
        data = event.model_dump(mode="json") if hasattr(event, "model_dump") else dict(event)
        kind = data.get("type")
        if kind == "message_start":
            self.message = {**data["message"], "content": []}
        elif kind == "content_block_start":
            self.message["content"].append(dict(data["content_block"]))
        elif kind == "content_block_delta":
            self._delta(data["index"], data["delta"])
        elif kind == "content_block_stop" and data["index"] in self.json:
            raw = self.json.pop(data["index"])
            self.message["content"][data["index"]]["input"] = json.loads(raw) if raw else {}
        elif kind == "message_delta":
            self.message.update({k: v for k, v in data["delta"].items() if v is not None})
            self.message["usage"] = {**self.message.get("usage", {}), **_set(data.get("usage"))}
        elif kind == "message_stop":
            return self.message
        return None

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.message["content"][index]
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
        elif kind == "input_json_delta":
            self.json[index] = self.json.get(index, "") + delta.get("partial_json", "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = delta["signature"]


class _Stream:
    """Wraps ``Stream`` from ``create(stream=True)``: appended once ``message_stop`` passes;
    the call's lease is given back when the stream fails or is left before it."""

    def __init__(self, stream: Any, session: Session) -> None:
        self._stream, self._session = stream, session
        self._accumulator = _Accumulator()
        self._call = _StreamedCall(session)
        session.held_by(self)  # a stream dropped unread gives the lease back

    def __iter__(self) -> Iterator[Any]:
        try:
            for event in self._stream:
                final = self._accumulator.add(event)
                if final is not None:
                    self._call.end(final)
                yield event
        except GeneratorExit:  # maybe finalized by the garbage collector: no lock here
            self._call.leave(later=True)
            raise
        except BaseException:
            self._call.leave()
            raise
        self._call.leave()  # the stream ended before message_stop

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        try:
            self._stream.close()
        finally:
            self._call.leave()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _AsyncStream:
    """Wraps ``AsyncStream`` likewise."""

    def __init__(self, stream: Any, session: Session) -> None:
        self._stream, self._session = stream, session
        self._accumulator = _Accumulator()
        self._call = _StreamedCall(session)
        session.held_by(self)  # a stream dropped unread gives the lease back

    async def __aiter__(self) -> AsyncIterator[Any]:
        try:
            async for event in self._stream:
                final = self._accumulator.add(event)
                if final is not None:
                    await self._call.aend(final)
                yield event
        finally:
            self._call.leave()

    async def __aenter__(self) -> _AsyncStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            await self._stream.close()
        finally:
            self._call.leave()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _StreamedCall:
    """A streamed call of ``session``: ended by its final message, or left (its lease given
    back) when the stream fails or is dropped before it, unless a later call began since."""

    def __init__(self, session: Session) -> None:
        self._session, self._request = session, session.last_request
        self._open = True

    def end(self, final: dict[str, Any]) -> None:
        self._open = False
        self._session.post_sampling(final)

    async def aend(self, final: dict[str, Any]) -> None:
        self._open = False
        await self._session.apost_sampling(final)

    def leave(self, later: bool = False) -> None:
        """Give the lease back (``later``: moments later, from another thread; the call
        stays open, so that a leave after it, from the host, gives it back at once)."""
        if self._open and self._session.last_request is self._request:
            if later:
                self._session.give_back_later()
                return
            self._open = False
            self._session.release()


@contextmanager
def _released_on_failure(session: Session) -> Iterator[None]:
    """Give the call's lease back when the block fails."""
    try:
        yield
    except BaseException:
        session.release()
        raise


def _set(usage: Any) -> dict[str, Any]:
    return {k: v for k, v in (usage or {}).items() if v is not None}
