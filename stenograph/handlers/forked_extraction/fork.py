"""The fork: a copy of the agent, on the main thread's cache-safe prefix, that may only
edit the notes. It loops model -> tool calls -> tool results up to ``maxTurns``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...engine.guard import check_request
from .gate import OWN_TOOL, Workspace

CACHE_BREAKPOINT = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
FENCE = re.compile(r"```(?:markdown|md)?[ \t]*\n(.*?)\n```", re.DOTALL)
USAGE_KEYS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens",
)


NOT_RUN = "[not run: this conversation is a fork that only updates the session notes]"


class ForkFailed(RuntimeError):
    """The fork ended without usable notes (no edit, malformed reply, ...)."""


@dataclass(frozen=True)
class ForkContext:
    """The main thread's request at the moment of the decision, plus the response it got:
    exactly the prefix the main thread's next request starts with."""

    model: str
    system: Any
    tools: list[Any] | None
    messages: list[dict[str, Any]]
    extra: dict[str, Any]


@dataclass
class ForkResult:
    """What the fork did."""

    turns: int = 0
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    requests: list[dict[str, Any]] = field(default_factory=list)


def with_breakpoint(context: ForkContext) -> list[dict[str, Any]]:
    """The shared messages, with a cache breakpoint on the last one (unless the request
    already uses the API's maximum of four breakpoints). Nothing else changes."""
    messages = list(context.messages)
    if not messages or _breakpoints(context) >= MAX_BREAKPOINTS:
        return messages
    last = messages[-1]
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    if not blocks:
        return messages
    blocks[-1] = {**blocks[-1], "cache_control": CACHE_BREAKPOINT}
    messages[-1] = {**last, "content": blocks}
    return messages


def _breakpoints(context: ForkContext) -> int:
    """The cache breakpoints the request already has: on tools, system blocks, message
    blocks and the blocks of tool results (read in place, not encoded)."""
    return sum(1 for block in _cacheable(context) if block.get("cache_control") is not None)


def _cacheable(context: ForkContext) -> Iterator[dict[str, Any]]:
    yield from _dicts(context.tools)
    yield from _dicts(context.system)
    for message in context.messages:
        for block in _dicts(message.get("content")):
            yield block
            if block.get("type") == "tool_result":
                yield from _dicts(block.get("content"))


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (v for v in value if isinstance(v, dict))


def run_fork(
    client: Any,
    context: ForkContext,
    workspace: Workspace,
    prompt: str,
    *,
    mode: str,
    max_turns: int,
    max_tokens: int,
) -> ForkResult:
    """Drive the fork with ``client`` (an ``anthropic.Anthropic``); edits land in
    ``workspace``. ``mode`` is ``host-tool``, ``own-tool`` or ``rewrite``."""
    tools = context.tools
    if mode == "own-tool":
        tools = [*(tools or []), OWN_TOOL]
    messages = [*with_breakpoint(context), {"role": "user", "content": _prompt(context, prompt)}]
    result = ForkResult()
    for _ in range(max_turns):
        request = {"model": context.model, "messages": list(messages), **context.extra}
        problems = check_request(request["messages"])
        if problems:
            raise ForkFailed("the API would reject the fork's request: " + "; ".join(problems))
        if context.system is not None:
            request["system"] = context.system
        if tools is not None:
            request["tools"] = tools
        result.requests.append(request)
        response = client.messages.create(**request, max_tokens=max_tokens)
        result.turns += 1
        _add_usage(result, response)
        blocks = [b.model_dump(mode="json", exclude_none=True) for b in response.content]
        messages.append({"role": "assistant", "content": blocks})
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        if not calls:
            if mode == "rewrite":
                _take_rewrite(workspace, blocks)
            break
        messages.append({"role": "user", "content": [_answer(workspace, c) for c in calls]})
    if not workspace.edits:
        raise ForkFailed(f"the fork made no edit of {workspace.path} in {result.turns} turn(s)")
    return result


def _prompt(context: ForkContext, prompt: str) -> str | list[dict[str, Any]]:
    """The fork's first message: the prompt, after a result for every tool call the shared
    response left open (the API needs them first; the fork does not run them)."""
    last = context.messages[-1] if context.messages else {}
    content = last.get("content") if last.get("role") == "assistant" else None
    calls = [b for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
    if not calls:
        return prompt
    results = [
        {"type": "tool_result", "tool_use_id": c.get("id"), "content": NOT_RUN} for c in calls
    ]
    return [*results, {"type": "text", "text": prompt}]


def _answer(workspace: Workspace, call: dict[str, Any]) -> dict[str, Any]:
    text, is_error = workspace.call(str(call.get("name")), call.get("input"))
    answer = {"type": "tool_result", "tool_use_id": call.get("id"), "content": text}
    if is_error:
        answer["is_error"] = True
    return answer


def _take_rewrite(workspace: Workspace, blocks: list[dict[str, Any]]) -> None:
    text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    found = FENCE.findall(text)
    if not found:
        raise ForkFailed("the reply holds no fenced block with the new notes")
    workspace.rewrite(found[-1].rstrip("\n") + "\n")


def _add_usage(result: ForkResult, response: Any) -> None:
    usage = getattr(response, "usage", None)
    for key in USAGE_KEYS:
        result.usage[key] += int(getattr(usage, key, 0) or 0)
