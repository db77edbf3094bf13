"""The pydantic-ai-harness lane, in an interpreter that has ``pydantic-ai-harness`` (it pins its
own ``pydantic-ai-slim``, so it may not share stenograph's environment).

Run by ``clearing_peers.py`` as ``python -m benchlib.harness_worker`` (from ``benchmarks/``);
one JSON command per stdin line, one JSON answer per stdout line, so the two processes take
turns call by call:

* ``{"build": size, "seed": s}``: the house synthetic history of that size and seed, as
  pydantic-ai messages; answers the history's digest (the parent checks it is its own);
* ``{"stream": k, "index": i}``: the same turn the parent's lanes get, converted untimed, then
  one timed call; answers ``{"ns": ...}``.

One call is what pydantic-ai's agent graph does around a request with
``ClearToolResults(max_tokens=..., keep_pairs=3)`` among its capabilities: append the tool
returns to the message history, build the ``ModelRequestContext`` (a copy of the list), run
the capability's ``before_model_request`` (its check: the token estimate anchored on the last
response's usage; above ``max_tokens`` nothing is cleared), append the response.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Coroutine
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.usage import RequestUsage, RunUsage
from pydantic_ai_harness.compaction import ClearToolResults

from .history import MODEL, TOOLS, Synth, digest, stream_seed, synthetic_history

CHECK_ONLY_TOKENS = 10**12  # far above any history here: the check runs, nothing is cleared


def to_pydantic_ai(message: dict[str, Any], names: dict[str, str]) -> ModelMessage:
    """An Anthropic-format message as one pydantic-ai message (``names``: tool ids to names)."""
    blocks = message["content"]
    if message["role"] == "assistant":
        usage = message["usage"]
        parts: list[Any] = [TextPart(b["text"]) for b in blocks if b["type"] == "text"]
        for block in blocks:
            if block["type"] == "tool_use":
                names[block["id"]] = block["name"]
                parts.append(ToolCallPart(block["name"], block["input"], block["id"]))
        return ModelResponse(
            parts=parts,
            usage=RequestUsage(
                input_tokens=usage["input_tokens"],
                cache_write_tokens=usage["cache_creation_input_tokens"],
                cache_read_tokens=usage["cache_read_input_tokens"],
                output_tokens=usage["output_tokens"],
            ),
            model_name=MODEL,
        )
    request: list[Any] = []
    for block in blocks:
        if block["type"] == "tool_result":
            content = block["content"]
            text = content if isinstance(content, str) else "".join(c["text"] for c in content)
            use_id = block["tool_use_id"]
            request.append(ToolReturnPart(names[use_id], text, use_id))
        else:
            request.append(UserPromptPart(block["text"]))
    return ModelRequest(parts=request)


def finished(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The value of a coroutine that never awaits (the check path): run without a loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the capability awaited: not the check-only path")


class HarnessLane:
    """A pydantic-ai message history and one ``ClearToolResults``, driven as the agent graph
    drives ``before_model_request`` on every model request."""

    def __init__(self) -> None:
        self.capability: ClearToolResults[None] = ClearToolResults(
            max_tokens=CHECK_ONLY_TOKENS, keep_pairs=3
        )
        self.model = TestModel()
        tools = [
            ToolDefinition(
                name=t["name"],
                parameters_json_schema=t["input_schema"],
                description=t["description"],
            )
            for t in TOOLS
        ]
        self.parameters = ModelRequestParameters(function_tools=tools)
        self.names: dict[str, str] = {}
        self.history: list[ModelMessage] = []
        self.synth = Synth(0)

    def build(self, size: int, seed: int) -> dict[str, Any]:
        """A fresh history (untimed)."""
        messages, self.synth = synthetic_history(size, seed)
        self.names = {}
        self.history = [to_pydantic_ai(m, self.names) for m in messages]
        return {"digest": digest(messages), "messages": len(self.history)}

    def call(self, stream: int, index: int) -> dict[str, Any]:
        """One turn converted (untimed), then one timed call."""
        self.synth.reseed(stream_seed(stream, index))
        user, assistant = self.synth.turn(tools_only=True)
        request = to_pydantic_ai(user, self.names)
        response = to_pydantic_ai(assistant, self.names)
        ctx = RunContext(deps=None, model=self.model, usage=RunUsage(), messages=self.history)
        start = time.perf_counter_ns()
        self.history.append(request)
        context = ModelRequestContext(
            model=self.model,
            messages=list(self.history),
            model_settings=None,
            model_request_parameters=self.parameters,
        )
        sent = finished(self.capability.before_model_request(ctx, context))
        self.history.append(response)
        elapsed = time.perf_counter_ns() - start
        if len(sent.messages) != len(self.history) - 1:
            raise RuntimeError("the request does not hold the history")
        return {"ns": elapsed}


def main() -> int:
    """Answer commands until stdin closes."""
    lane = HarnessLane()
    for line in sys.stdin:
        command = json.loads(line)
        if "build" in command:
            answer = lane.build(command["build"], command["seed"])
        else:
            answer = lane.call(command["stream"], command["index"])
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
