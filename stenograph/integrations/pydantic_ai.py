"""stenograph inside a pydantic-ai agent: one capability for ``Agent(...)``::

    agent = Agent(AnthropicModel("claude-sonnet-4-6", provider=AnthropicProvider(...)),
                  capabilities=[Stenograph(preset="default")])
    agent.run_sync("Fix the failing test", conversation_id="c-1")

Each conversation id has its own session. Before every model request the capability feeds
the session what it has not seen of the request's messages, runs pre-call and puts the
rendered messages in the request (for that request only: the run's history stays whole);
after the response, post-sampling gets it with its usage. It sits innermost, so history
processors and other capabilities run first, and pydantic-ai's retries, streaming and tool
calls stay as they are. Needs the ``stenograph[pydantic-ai]`` extra.

The conversion between pydantic-ai messages and Anthropic's format is this module's own
(``to_anthropic``, ``from_anthropic``, ``response_to_anthropic``): one ``ModelRequest`` or
``ModelResponse`` is one Anthropic message; tool calls keep their ids.
"""

from __future__ import annotations

import base64
import contextvars
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.capabilities.abstract import CapabilityOrdering
    from pydantic_ai.messages import (
        ERROR_OUTCOMES,
        BinaryContent,
        ImageUrl,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import Model, ModelRequestContext
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise ImportError(
        "stenograph.integrations.pydantic_ai needs pydantic-ai with Anthropic support:"
        " pip install 'stenograph[pydantic-ai]'"
    ) from exc

from ..engine.clock import Clock
from ..engine.engine import Engine
from ..engine.session import Session
from ..engine.state import StateKey
from ..stores.base import Store
from .framework import (
    Message,
    ModelSettings,
    SessionPool,
    custom_headers,
    feed,
    latest_only,
    session_id_for,
)

__all__ = [
    "Stenograph",
    "from_anthropic",
    "model_settings",
    "response_to_anthropic",
    "to_anthropic",
]

#: Request fields of the wire request that the notes fork repeats (its prefix).
WIRE_PREFIX = ("model", "system", "tools", "tool_choice")
_CURRENT: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "stenograph_pydantic_ai_session", default=None
)


@dataclass
class Stenograph(AbstractCapability[Any]):
    """Runs a stenograph session around every model request of a pydantic-ai ``Agent``.

    :param preset: a built-in preset name, a ``.toml`` path, or a ready ``Engine``.
    :param state_dir: the folder sessions are kept in (``None``: in memory).
    :param store: where sessions are kept instead: a store URL (``sqlite:///path.db``,
        ``postgresql://…``, ``redis://…``, ``file:DIR``) or a ``Store``, as for
        ``Engine.open_session``; several workers may serve one conversation.
    :param clock: the sessions' clock (``ManualClock`` in tests).
    :param services: objects for the handlers; without ``"anthropic"`` the notes writer
        gets a client built from the agent's ``AnthropicModel`` (its provider's key and URL).
    :param engine_options: passed to ``Engine.from_preset`` (``overrides``, ``handlers``).

    The session of a run is that of ``ctx.conversation_id``: the ``conversation_id=`` the
    host passes to ``run``/``run_sync``/``run_stream``, else the one its
    ``message_history`` carries.
    """

    preset: str | Path | Engine = "default"
    state_dir: str | Path | None = ".stenograph"
    store: str | Path | Store | None = None
    clock: Clock | None = None
    services: dict[str, Any] | None = None
    engine_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pool = SessionPool(
            self.preset,
            state_dir=self.state_dir,
            store=self.store,
            clock=self.clock,
            services=self.services,
            **self.engine_options,
        )
        self._models: dict[int, AnthropicModel] = {}
        self._lock = threading.Lock()

    def session(self, conversation_id: str) -> Session:
        """The session of ``conversation_id``."""
        return self.pool.session(conversation_id)

    def close(self) -> None:
        """Close every session this capability opened."""
        self.pool.close()

    def get_ordering(self) -> CapabilityOrdering:
        """Innermost: what other capabilities and history processors did is what is fed."""
        return CapabilityOrdering(position="innermost")

    def get_wrapper_model(self, model: Model) -> Model | None:
        """The same ``AnthropicModel`` on a client that records each request as it goes on
        the wire (its system, tools and tool choice are the notes fork's prefix)."""
        if not isinstance(model, AnthropicModel) or any(m is model for m in self._models.values()):
            return None
        with self._lock:
            if id(model) not in self._models:
                client = model.client.with_options(
                    http_client=anthropic.DefaultAsyncHttpxClient(
                        event_hooks={"request": [_record_wire_request]}
                    )
                )
                self._models[id(model)] = AnthropicModel(
                    model.model_name,
                    provider=AnthropicProvider(anthropic_client=client),
                    profile=model.profile,
                    settings=model.settings,
                )
            return self._models[id(model)]

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Feed, pre-call; the request carries the rendered messages."""
        model = request_context.model
        key = ctx.conversation_id or "default"
        session = await self.pool.asession(key, lambda: model_settings(model))
        _CURRENT.set(session)
        messages = request_context.messages
        rendered = await session.arun_phase("pre_call", _before, session, messages, request_context)
        if rendered is not None:
            request_context.messages = rendered
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        """Post-sampling with the response and its usage."""
        session = _CURRENT.get()
        if session is not None and exchange_of(session).fed:
            await session.arun_phase("post_sampling", _after, session, response)
        return response

    async def on_run_error(self, ctx: RunContext[Any], *, error: BaseException) -> Any:
        """The run failed (its model call, say) or was cancelled: the call's lease is given
        back (the next call, from any worker, may go ahead), and the error goes on. (Not
        ``on_model_request_error``: a capability having it makes the agent open streamed
        requests early.)"""
        session = self.pool.sessions.get(session_id_for(ctx.conversation_id or "default"))
        if session is not None:
            await session.arun_phase("post_sampling", session.release)
        raise error


@dataclass
class Exchange:
    """The adapter's live values in one session between the two halves of a model request
    (never saved): whether the session took the framework's list, and the request body
    the model client sent."""

    fed: bool = False
    wire: dict[str, Any] | None = None


EXCHANGE = StateKey[Exchange]("pydantic-ai")


def exchange_of(session: Session) -> Exchange:
    """The adapter's :class:`Exchange` in ``session`` (made on first use)."""
    return session.stash.setdefault(EXCHANGE, Exchange())


def _before(
    session: Session, messages: list[ModelMessage], request_context: ModelRequestContext
) -> list[ModelMessage] | None:
    exchange = exchange_of(session)
    exchange.fed = feed(session, to_anthropic(messages))
    if not exchange.fed:
        return None
    params = request_context.model_request_parameters
    tools = [
        {
            "name": t.name,
            "description": t.description or "",
            "input_schema": t.parameters_json_schema,
        }
        for t in [*params.function_tools, *params.output_tools]
    ]
    request = session.pre_call(
        model=model_settings(request_context.model).model,
        system=system_of(messages, params) or None,
        tools=tools or None,
    )
    rendered = session.stash.setdefault(RENDERED, Rendered())
    return rendered(request["messages"], _system_parts(messages))


def _after(session: Session, response: ModelResponse) -> None:
    exchange = exchange_of(session)
    wire, exchange.wire = exchange.wire, None
    if wire is not None and session.last_request is not None:
        prefix = {k: wire[k] for k in WIRE_PREFIX if k in wire}
        session.last_request = {**session.last_request, **prefix}
    session.post_sampling(response_to_anthropic(response))


async def _record_wire_request(request: Any) -> None:
    """httpx request hook: keep the body of a Messages request for the session at hand."""
    session = _CURRENT.get()
    if session is None or request.method != "POST" or not request.url.path.endswith("/messages"):
        return
    try:
        body = json.loads(request.content)
    except (ValueError, TypeError):
        return
    exchange_of(session).wire = body


# settings ------------------------------------------------------------------------------


def model_settings(model: Any) -> ModelSettings:
    """The notes writer's settings from the agent's model (``AnthropicModel``: its model
    name and its provider client's API key, base URL and custom headers)."""
    if isinstance(model, AnthropicModel):
        client = model.client
        return ModelSettings(
            model.model_name,
            base_url=str(client.base_url),
            api_key=getattr(client, "api_key", None),
            headers=custom_headers(client),
        )
    name = str(getattr(model, "model_name", None) or model)
    return ModelSettings(
        name,
        problem=f"the agent's model is a {type(model).__name__}, not an AnthropicModel, so the"
        " notes fork cannot share its prompt cache; the notes writer uses its own backend"
        " choice (ANTHROPIC_API_KEY or offline)",
    )


def system_of(messages: Sequence[ModelMessage], params: Any) -> str:
    """The system text: system prompt parts of the first request, then the instructions
    (the wire request's exact system, pydantic-ai's framing included, replaces it for the
    notes fork once the request has been sent)."""
    parts = [p.content for p in _system_parts(messages)]
    parts += [
        str(getattr(p, "content", p)) for p in getattr(params, "instruction_parts", None) or ()
    ]
    return "\n\n".join(p for p in parts if p)


def _system_parts(messages: Sequence[ModelMessage]) -> list[SystemPromptPart]:
    first = messages[0] if messages else None
    if not isinstance(first, ModelRequest):
        return []
    return [p for p in first.parts if isinstance(p, SystemPromptPart)]


# messages: pydantic-ai -> Anthropic -----------------------------------------------------


def to_anthropic(messages: Sequence[ModelMessage]) -> list[Message]:
    """pydantic-ai messages as Anthropic messages, one for one, in the form the Anthropic
    model sends them: a ``ModelRequest`` is a user message (text blocks, ``tool_result``
    blocks with text content; the first request's system prompt parts go to ``system``), a
    ``ModelResponse`` an assistant message (text, ``tool_use``, signed thinking)."""
    return [
        _request(m, first=i == 0) if isinstance(m, ModelRequest) else _response(m)
        for i, m in enumerate(messages)
    ]


def _request(message: ModelRequest, *, first: bool) -> Message:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart):
            text = part.model_response_str(wrap_if_error=False)
            blocks.append(_tool_result(part.tool_call_id, text, part.outcome in ERROR_OUTCOMES))
        elif isinstance(part, RetryPromptPart):
            text = part.model_response()
            if part.tool_name is None:
                blocks.append(_text(text))
            else:
                blocks.append(_tool_result(part.tool_call_id, text, True))
        elif isinstance(part, UserPromptPart):
            blocks += _user_content(part.content)
        elif isinstance(part, SystemPromptPart) and not first:
            blocks.append(_text(part.content))
    return {"role": "user", "content": blocks}


def _tool_result(tool_id: str, text: str, is_error: bool) -> dict[str, Any]:
    content = [_text(text)] if text else []
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, "is_error": is_error}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _user_content(content: Any) -> list[dict[str, Any]]:
    items = [content] if isinstance(content, str) else list(content)
    blocks = []
    for item in items:
        if isinstance(item, str):
            blocks.append(_text(item))
        elif isinstance(item, ImageUrl):
            blocks.append({"type": "image", "source": {"type": "url", "url": item.url}})
        elif isinstance(item, BinaryContent) and item.is_image:
            data = base64.b64encode(item.data).decode("ascii")
            source = {"type": "base64", "media_type": item.media_type, "data": data}
            blocks.append({"type": "image", "source": source})
        else:
            blocks.append(_text(str(item)))
    return blocks


def _response(message: ModelResponse) -> Message:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.content:
            blocks.append(_text(part.content))
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.tool_call_id,
                    "name": part.tool_name,
                    "input": part.args_as_dict(),
                }
            )
        elif isinstance(part, ThinkingPart) and part.signature:
            blocks.append(
                {"type": "thinking", "thinking": part.content, "signature": part.signature}
            )
    return {"role": "assistant", "content": blocks}


def response_to_anthropic(response: ModelResponse) -> Message:
    """A ``ModelResponse`` as an Anthropic response for ``post_sampling``: its content,
    usage in Anthropic's split, id, model and stop reason."""
    out = _response(response)
    usage = response.usage
    details = usage.details or {}
    if "input_tokens" in details:
        keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        out["usage"] = {k: int(details.get(k) or 0) for k in keys}
        out["usage"]["output_tokens"] = int(usage.output_tokens)
    else:
        read, written = usage.cache_read_tokens, usage.cache_write_tokens
        out["usage"] = {
            "input_tokens": max(0, usage.input_tokens - read - written),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": usage.output_tokens,
        }
    stop = (response.provider_details or {}).get("finish_reason")
    for key, value in (
        ("id", response.provider_response_id),
        ("model", response.model_name),
        ("stop_reason", stop),
    ):
        if value is not None:
            out[key] = value
    return out


# messages: Anthropic -> pydantic-ai -----------------------------------------------------


def from_anthropic(
    messages: Iterable[Mapping[str, Any]], *, system: Sequence[SystemPromptPart] = ()
) -> list[ModelMessage]:
    """Anthropic messages (a rendered request) as pydantic-ai messages for the model: a user
    message is a ``ModelRequest`` (``tool_result`` -> ``ToolReturnPart``, failed when
    ``is_error``; text -> ``UserPromptPart``), an assistant message a ``ModelResponse``.
    ``system`` parts go first in the first request."""
    out: list[ModelMessage] = []
    names: dict[str, str] = {}
    for message in messages:
        out.append(_message(message, names, () if out else system))
    return out


def _message(
    message: Mapping[str, Any], names: dict[str, str], system: Sequence[SystemPromptPart]
) -> ModelMessage:
    """One message of :func:`from_anthropic`: ``names`` (tool_use id -> tool name) says
    what the tool results answer, and gains the tool calls of an assistant message;
    ``system`` goes first in a request."""
    content = message["content"]
    blocks = [_text(content)] if isinstance(content, str) else content
    if message["role"] == "assistant":
        return ModelResponse(parts=[p for b in blocks if (p := _part(b, names))])
    parts: list[Any] = list(system)
    for block in blocks:
        if block.get("type") == "tool_result":
            parts.append(_tool_return(block, names))
        elif block.get("type") == "text":
            parts.append(UserPromptPart(content=block["text"]))
        else:
            parts.append(UserPromptPart(content=[_user_item(block)]))
    return ModelRequest(parts=parts)


class Rendered:
    """A session's rendered messages as pydantic-ai's, kept across calls: a rendered message
    is the session's own and never changes (a memorized or compacted one is a new one), so
    it is converted again only when what its conversion read beside it changed: the system
    parts a first request carries, or the names of the tools its results answer. The
    messages handed to the model are the same objects from call to call (pydantic-ai's own
    passes over a history make new ones)."""

    def __init__(self) -> None:
        # id(message) -> (message, what it read, its conversion, the tool calls it names)
        self._kept: dict[int, tuple[Any, tuple[Any, ...], ModelMessage, dict[str, str]]] = {}

    def __call__(
        self, messages: Sequence[Mapping[str, Any]], system: Sequence[SystemPromptPart]
    ) -> list[ModelMessage]:
        """:func:`from_anthropic` of ``messages``, each converted once."""
        kept, out, names = self._kept, list[ModelMessage](), dict[str, str]()
        for message in messages:
            read = _read(message, names, () if out else system)
            hit = kept.get(id(message))
            if hit is None or hit[0] is not message or hit[1] != read:
                calls: dict[str, str] = {}  # what an assistant message names; a request reads
                source = calls if message["role"] == "assistant" else names
                converted = _message(message, source, () if out else system)
                hit = kept[id(message)] = (message, read, converted, calls)
            names.update(hit[3])
            out.append(hit[2])
        self._kept = latest_only(kept, messages)
        return out


def _read(
    message: Mapping[str, Any], names: dict[str, str], system: Sequence[SystemPromptPart]
) -> tuple[Any, ...]:
    """What converting ``message`` reads beside it (see :class:`Rendered`)."""
    content = message["content"]
    if message["role"] == "assistant" or isinstance(content, str):
        return (*system,)
    answered = (names.get(b["tool_use_id"]) for b in content if b.get("type") == "tool_result")
    return (*system, *answered)


RENDERED = StateKey[Rendered]("pydantic-ai:rendered")


def _part(block: dict[str, Any], names: dict[str, str]) -> Any:
    kind = block.get("type")
    if kind == "text":
        return TextPart(content=block["text"])
    if kind == "tool_use":
        names[block["id"]] = block["name"]
        return ToolCallPart(
            tool_name=block["name"], args=block.get("input") or {}, tool_call_id=block["id"]
        )
    if kind == "thinking":
        return ThinkingPart(
            content=block.get("thinking", ""),
            signature=block.get("signature"),
            provider_name="anthropic",
        )
    return None


def _tool_return(block: dict[str, Any], names: dict[str, str]) -> ToolReturnPart:
    content = block.get("content", "")
    if not isinstance(content, str):
        content = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    tool_id = block["tool_use_id"]
    return ToolReturnPart(
        tool_name=names.get(tool_id, "tool"),
        content=content,
        tool_call_id=tool_id,
        outcome="failed" if block.get("is_error") else "success",
    )


def _user_item(block: dict[str, Any]) -> Any:
    source = block.get("source") or {}
    if block.get("type") == "image" and source.get("type") == "url":
        return ImageUrl(url=source["url"])
    if block.get("type") == "image" and source.get("type") == "base64":
        return BinaryContent(data=base64.b64decode(source["data"]), media_type=source["media_type"])
    return json.dumps(block)
