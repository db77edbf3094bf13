"""stenograph inside a LangChain v1 agent: one middleware for ``create_agent``::

    agent = create_agent(ChatAnthropic(model=...), tools,
                         middleware=[StenographMiddleware(preset="default")])
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t-1"}})

Each thread id has its own session. On every model call the middleware feeds the session
what it has not seen of the agent's messages, runs pre-call, sends the rendered messages
through the agent's own model and gives the response with its usage to post-sampling; the
agent's state keeps the full messages. Needs the ``stenograph[langchain]`` extra.

The conversion between LangChain messages and Anthropic's format is this module's own
(``to_anthropic``, ``from_anthropic``, ``response_to_anthropic``): one LangChain message is
one Anthropic message, tool calls keep their ids, ``ToolMessage`` becomes a ``tool_result``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_anthropic import ChatAnthropic, convert_to_anthropic_tool
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langgraph.config import get_config
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise ImportError(
        "stenograph.integrations.langchain needs LangChain v1 and langchain-anthropic:"
        " pip install 'stenograph[langchain]'"
    ) from exc

from ..engine.clock import Clock
from ..engine.engine import Engine
from ..engine.session import Session
from ..engine.state import StateKey
from ..stores.base import Store
from .framework import Conversions, Message, ModelSettings, SessionPool, feed

__all__ = [
    "StenographMiddleware",
    "from_anthropic",
    "model_settings",
    "response_to_anthropic",
    "system_to_anthropic",
    "to_anthropic",
    "tools_to_anthropic",
]

BLOCK_FIELDS = {
    "text": {"type", "text", "citations", "cache_control"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
    "image": {"type", "source", "cache_control"},
    "document": {"type", "source", "title", "context", "citations", "cache_control"},
}
STREAM_KEYS = {"index", "partial_json"}
Handler = Callable[[ModelRequest], ModelResponse]
AsyncHandler = Callable[[ModelRequest], Awaitable[ModelResponse]]


class StenographMiddleware(AgentMiddleware):
    """Runs a stenograph session around every model call of a ``create_agent`` agent.

    :param preset: a built-in preset name, a ``.toml`` path, or a ready ``Engine``.
    :param session_key: the key of ``config["configurable"]`` naming the conversation
        (LangGraph's ``thread_id`` by default), or a callable ``(ModelRequest) -> key``.
    :param state_dir: the folder sessions are kept in (``None``: in memory).
    :param store: where sessions are kept instead: a store URL (``sqlite:///path.db``,
        ``postgresql://…``, ``redis://…``, ``file:DIR``) or a ``Store``, as for
        ``Engine.open_session``; several workers may serve one conversation.
    :param clock: the sessions' clock (``ManualClock`` in tests).
    :param services: objects for the handlers; without ``"anthropic"`` the notes writer
        gets a client built from the agent's ``ChatAnthropic`` settings.
    :param engine_options: passed to ``Engine.from_preset`` (``overrides``, ``handlers``).
    """

    def __init__(
        self,
        preset: str | Path | Engine = "default",
        *,
        session_key: str | Callable[[ModelRequest], object] = "thread_id",
        state_dir: str | Path | None = ".stenograph",
        store: str | Path | Store | None = None,
        clock: Clock | None = None,
        services: dict[str, Any] | None = None,
        **engine_options: Any,
    ) -> None:
        super().__init__()
        self.pool = SessionPool(
            preset,
            state_dir=state_dir,
            store=store,
            clock=clock,
            services=services,
            **engine_options,
        )
        self.session_key = session_key

    def session(self, key: object) -> Session:
        """The session of conversation ``key`` (e.g. a thread id)."""
        return self.pool.session(key)

    def close(self) -> None:
        """Close every session this middleware opened."""
        self.pool.close()

    def wrap_model_call(self, request: ModelRequest, handler: Handler) -> ModelResponse:
        """The model call, through the conversation's session."""
        session = self.pool.session(self._key(request), lambda: model_settings(request.model))
        sent = _before(session, request)
        if sent is None:
            return handler(request)
        try:
            response = handler(sent)
        except BaseException:
            session.release()  # the next call, from any worker, may go ahead
            raise
        _after(session, response)
        return response

    async def awrap_model_call(self, request: ModelRequest, handler: AsyncHandler) -> ModelResponse:
        """The async model call, through the conversation's session."""
        session = await self.pool.asession(
            self._key(request), lambda: model_settings(request.model)
        )
        sent = await session.arun_phase("pre_call", _before, session, request)
        if sent is None:
            return await handler(request)
        try:
            response = await handler(sent)
        except BaseException:
            await session.arun_phase("post_sampling", session.release)
            raise
        await session.arun_phase("post_sampling", _after, session, response)
        return response

    def _key(self, request: ModelRequest) -> object:
        if callable(self.session_key):
            return self.session_key(request)
        key = (get_config().get("configurable") or {}).get(self.session_key)
        if key is None:
            raise ValueError(
                f"StenographMiddleware keys sessions by config['configurable']"
                f"[{self.session_key!r}], which this run does not set: invoke the agent with"
                f" {{'configurable': {{{self.session_key!r}: ...}}}} or pass session_key="
                " a callable"
            )
        return key


def _before(session: Session, request: ModelRequest) -> ModelRequest | None:
    """Feed the unseen messages, run pre-call; the request carrying the rendered messages
    (None: the history could not be followed, send the agent's own request). Each
    message is converted once, each way (see :class:`Converted`)."""
    converted = session.stash.setdefault(CONVERTED, Converted())
    if not feed(session, converted.agent(request.messages)):
        return None
    rendered = session.pre_call(
        model=model_settings(request.model).model,
        system=system_to_anthropic(request.system_message),
        tools=tools_to_anthropic(request.tools) or None,
    )
    sent = [m for part in converted.rendered(rendered["messages"]) for m in part]
    return request.override(messages=sent)


class Converted:
    """A session's conversions, kept across calls: of the agent's messages to Anthropic's
    format (again when one of a message's fields is given a new value), and of the
    rendered messages to LangChain's (the session's own, which never change: a memorized
    or compacted message is a new one). The messages handed to the model are the same
    objects from call to call: a middleware after this one must not change them in place
    (LangChain's own copy what they edit)."""

    def __init__(self) -> None:
        self.agent = Conversions(_to_anthropic, _parts)
        self.rendered = Conversions(lambda message: from_anthropic([message]))


def _parts(message: BaseMessage) -> tuple[Any, ...]:
    """What a change to a LangChain message replaces: its fields' values (compared by
    identity; a pydantic model keeps them in its ``__dict__``)."""
    return tuple(message.__dict__.values())


CONVERTED = StateKey[Converted]("langchain:converted")


def _after(session: Session, response: Any) -> None:
    message = _ai_message(response)
    if message is None:
        session.release()  # no reply to append: the call ends here
    else:
        session.post_sampling(response_to_anthropic(message))


def _ai_message(response: Any) -> AIMessage | None:
    if isinstance(response, AIMessage):
        return response
    result = getattr(response, "result", None)
    if result is None:  # an ExtendedModelResponse
        result = getattr(getattr(response, "model_response", None), "result", None)
    return next((m for m in result or () if isinstance(m, AIMessage)), None)


# settings ------------------------------------------------------------------------------


def model_settings(model: Any) -> ModelSettings:
    """The notes writer's settings from the agent's model (``ChatAnthropic``: its model
    name, base URL, API key and default headers)."""
    name = str(getattr(model, "model", None) or getattr(model, "model_name", None) or model)
    if not isinstance(model, ChatAnthropic):
        return ModelSettings(
            name,
            problem=f"the agent's model is a {type(model).__name__}, not a ChatAnthropic, so"
            " the notes fork cannot share its prompt cache; the notes writer uses its own"
            " backend choice (ANTHROPIC_API_KEY or offline)",
        )
    return ModelSettings(
        model.model,
        base_url=model.anthropic_api_url,
        api_key=model.anthropic_api_key.get_secret_value() or None,
        headers=tuple(sorted((model.default_headers or {}).items())),
    )


def tools_to_anthropic(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """The agent's tools as Anthropic tool definitions (as ``ChatAnthropic`` sends them)."""
    return [dict(convert_to_anthropic_tool(tool)) for tool in tools]


# messages: LangChain -> Anthropic -------------------------------------------------------


def to_anthropic(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as Anthropic messages, one for one: ``AIMessage`` -> assistant
    (its ``tool_calls`` as ``tool_use`` blocks), ``ToolMessage`` -> a user ``tool_result``
    (``is_error`` from its status), anything else -> user."""
    return [_to_anthropic(m) for m in messages]


def _to_anthropic(message: BaseMessage) -> Message:
    if isinstance(message, AIMessage):
        return {"role": "assistant", "content": _assistant_content(message)}
    if isinstance(message, ToolMessage):
        block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": _clean(message.content),
            "is_error": message.status == "error",
        }
        return {"role": "user", "content": [block]}
    return {"role": "user", "content": _clean(message.content)}


def _assistant_content(message: AIMessage) -> str | list[dict[str, Any]]:
    calls = {call["id"]: call for call in message.tool_calls if call.get("id")}
    content = _clean(message.content)
    if not calls:
        return content
    given: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else content
    )
    blocks = [b for b in given if b.get("type") != "text" or b.get("text")]
    for block in blocks:
        call = calls.pop(block.get("id"), None) if block.get("type") == "tool_use" else None
        if call is not None:
            block["input"] = call["args"]
    blocks += [_tool_use(call) for call in calls.values()]
    return blocks


def _tool_use(call: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["args"]}


def _clean(content: Any) -> str | list[dict[str, Any]]:
    """LangChain content as Anthropic content: strings kept, blocks without ``None`` values,
    bare strings in a list as text blocks, standard image blocks as Anthropic images."""
    if isinstance(content, str):
        return content
    blocks = []
    for block in content:
        if isinstance(block, str):
            blocks.append({"type": "text", "text": block})
        elif isinstance(block, dict):
            blocks.append(_image(block) or _fields(block))
    return blocks


def _fields(block: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic block: the API's fields of its type, without ``None`` values (a
    streamed message's blocks carry LangChain's ``index`` and ``partial_json``)."""
    allowed = BLOCK_FIELDS.get(str(block.get("type")))
    return {
        k: v
        for k, v in block.items()
        if v is not None and (k in allowed if allowed else k not in STREAM_KEYS)
    }


def _image(block: dict[str, Any]) -> dict[str, Any] | None:
    """LangChain's standard (``base64``/``url``) and OpenAI-style image blocks."""
    kind = block.get("type")
    if kind == "image_url":
        url = (
            block["image_url"]["url"]
            if isinstance(block["image_url"], dict)
            else block["image_url"]
        )
        if url.startswith("data:"):
            media, _, data = url[5:].partition(";base64,")
            return _image_block({"type": "base64", "media_type": media, "data": data})
        return _image_block({"type": "url", "url": url})
    if kind == "image" and "source" not in block:
        if block.get("base64"):
            source = {
                "type": "base64",
                "media_type": block.get("mime_type"),
                "data": block["base64"],
            }
            return _image_block(source)
        if block.get("url"):
            return _image_block({"type": "url", "url": block["url"]})
    return None


def _image_block(source: dict[str, Any]) -> dict[str, Any]:
    return {"type": "image", "source": source}


def response_to_anthropic(message: AIMessage) -> Message:
    """A model's ``AIMessage`` as an Anthropic response for ``post_sampling``: its content,
    usage (Anthropic's split: uncached input, cache read, cache creation, output), and id,
    model and stop reason when the model reported them."""
    meta = message.response_metadata or {}
    out: Message = {"role": "assistant", "content": _assistant_content(message)}
    usage = _usage(message)
    if usage:
        out["usage"] = usage
    for key, source in (("id", "id"), ("model", "model_name"), ("stop_reason", "stop_reason")):
        if meta.get(source) is not None:
            out[key] = meta[source]
    return out


def _usage(message: AIMessage) -> dict[str, int]:
    raw = (message.response_metadata or {}).get("usage")
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    if isinstance(raw, dict) and "input_tokens" in raw and "output_tokens" in raw:
        return {k: int(raw.get(k) or 0) for k in (*keys, "output_tokens")}
    usage = message.usage_metadata
    if not usage:
        return {}
    details: dict[str, Any] = dict(usage.get("input_token_details") or {})
    read = int(details.get("cache_read") or 0)
    created = sum(
        int(details.get(k) or 0)
        for k in ("cache_creation", "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
    )
    return {
        "input_tokens": max(0, int(usage["input_tokens"]) - read - created),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": created,
        "output_tokens": int(usage["output_tokens"]),
    }


# messages: Anthropic -> LangChain -------------------------------------------------------


def from_anthropic(messages: Iterable[Mapping[str, Any]]) -> list[AnyMessage]:
    """Anthropic messages (a rendered request) as LangChain messages for the model: a user
    message's ``tool_result`` blocks become ``ToolMessage``s (first), its other blocks one
    ``HumanMessage``; an assistant message becomes an ``AIMessage`` whose ``tool_calls``
    are its ``tool_use`` blocks."""
    out: list[AnyMessage] = []
    for message in messages:
        content = message["content"]
        if message["role"] == "assistant":
            out.append(_ai(content))
            continue
        if isinstance(content, str):
            out.append(HumanMessage(content=content))
            continue
        rest = [b for b in content if b.get("type") != "tool_result"]
        out += [_tool_message(b) for b in content if b.get("type") == "tool_result"]
        if rest:
            out.append(HumanMessage(content=rest))
    return out


def _ai(content: str | list[dict[str, Any]]) -> AIMessage:
    if isinstance(content, str):
        return AIMessage(content=content)
    calls = [
        {"name": b["name"], "args": b.get("input") or {}, "id": b["id"], "type": "tool_call"}
        for b in content
        if b.get("type") == "tool_use"
    ]
    return AIMessage(content=list(content), tool_calls=calls)


def _tool_message(block: dict[str, Any]) -> ToolMessage:
    return ToolMessage(
        content=block.get("content", ""),
        tool_call_id=block["tool_use_id"],
        status="error" if block.get("is_error") else "success",
    )


def system_to_anthropic(message: SystemMessage | None) -> str | list[dict[str, Any]] | None:
    """The agent's system message as Anthropic's ``system``."""
    return None if message is None else _clean(message.content)
