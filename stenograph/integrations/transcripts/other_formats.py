"""Readers for OpenHands event lists and SWE-agent ``.traj`` files (OpenAI-style messages)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from .base import OPENHANDS, SWE_AGENT, Log, as_dict, as_list, is_int
from .formats import NOT_JSON, Document, TranscriptFormat

_SILENT_OBSERVATIONS = ("agent_state_changed", "null", "recall")


def looks_like_openhands_events(value: Any) -> bool:
    """True for a list holding at least one OpenHands event (``source`` + action/observation)."""
    return isinstance(value, list) and any(_is_event(item) for item in value)


def looks_like_openhands_record(value: Any) -> bool:
    """True for an OpenHands evaluation output record: an object whose ``history`` is events."""
    return isinstance(value, dict) and looks_like_openhands_events(value.get("history"))


def looks_like_swe_agent(value: Any) -> bool:
    """True for a SWE-agent trajectory object (``trajectory`` or ``history`` list)."""
    return isinstance(value, dict) and any(
        isinstance(value.get(key), list) for key in ("trajectory", "history")
    )


def parse_openhands(events: list[Any], log: Log) -> list[dict[str, Any]]:
    """Agent actions become assistant messages, observations user tool_results or text."""
    messages: list[dict[str, Any]] = []
    responses: set[str] = set()
    for index, event in enumerate(events):
        if not _is_event(event):
            log.skip("not an OpenHands event", f"event[{index}]")
            continue
        message = _openhands_message(event, responses)
        if message is not None:
            if isinstance(event.get("timestamp"), str):
                message["timestamp"] = event["timestamp"]
            messages.append(message)
    return messages


def parse_swe_agent(value: dict[str, Any], log: Log) -> list[dict[str, Any]]:
    """Messages from ``history`` (OpenAI-style chat), else from the ``trajectory`` steps."""
    history = as_list(value.get("history"))
    if history:
        return _swe_history(history, log)
    messages = []
    for step in as_list(value.get("trajectory")):
        step = as_dict(step)
        messages.append(_text_message("assistant", _text(step.get("response"))))
        messages.append(_text_message("user", _text(step.get("observation"))))
    return messages


def _is_event(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "source" in value
        and ("action" in value or "observation" in value)
    )


def _openhands_message(event: dict[str, Any], responses: set[str]) -> dict[str, Any] | None:
    """The message an event contributes, or None (state changes, system prompt, ...)."""
    metadata = as_dict(event.get("tool_call_metadata"))
    text = event.get("content") or event.get("message")
    if "observation" in event:
        tool_use_id = metadata.get("tool_call_id")
        if isinstance(tool_use_id, str):
            result = {"type": "tool_result", "tool_use_id": tool_use_id, "content": _text(text)}
            return {"role": "user", "content": [result]}
        if event.get("observation") in _SILENT_OBSERVATIONS:
            return None
        return _text_message("user", _text(text))
    if metadata:
        return _openhands_response(event, metadata, responses)
    if event.get("action") == "message":
        role = "user" if event.get("source") == "user" else "assistant"
        args = as_dict(event.get("args"))
        return _text_message(role, _text(args.get("content", event.get("message"))))
    return None


def _openhands_response(
    event: dict[str, Any], metadata: dict[str, Any], responses: set[str]
) -> dict[str, Any] | None:
    """The assistant message of a model response, once per response id."""
    response = as_dict(metadata.get("model_response"))
    response_id = response.get("id")
    if isinstance(response_id, str):
        if response_id in responses:
            return None
        responses.add(response_id)
    choice = as_dict((as_list(response.get("choices")) or [None])[0])
    message = as_dict(choice.get("message"))
    if not message:  # no model response recorded: rebuild the call from the metadata
        message = {"tool_calls": [_call_from_metadata(event, metadata)]}
    assistant = _assistant(message.get("content"), message.get("tool_calls"))
    usage = _openai_usage(response.get("usage"))
    if usage is not None:
        assistant["usage"] = usage
    return assistant


def _call_from_metadata(event: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    function = {"name": metadata.get("function_name"), "arguments": event.get("args", {})}
    return {"id": metadata.get("tool_call_id"), "function": function}


def _swe_history(history: list[Any], log: Log) -> list[dict[str, Any]]:
    messages = []
    for index, item in enumerate(history):
        item = as_dict(item)
        role = item.get("role")
        if role == "system":
            continue
        if role == "assistant":
            messages.append(_assistant(item.get("content"), item.get("tool_calls")))
        elif role == "tool":
            messages.append(_tool_results(item))
        elif role == "user":
            messages.append(_text_message("user", _text(item.get("content"))))
        else:
            log.skip(f"unsupported history entry (role {role!r})", f"history[{index}]")
    return messages


def _tool_results(item: dict[str, Any]) -> dict[str, Any]:
    """A user message answering the tool call ids of a ``tool`` message."""
    ids = as_list(item.get("tool_call_ids")) or [item.get("tool_call_id")]
    content = _text(item.get("content"))
    results = [
        {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
        for tool_use_id in ids
        if isinstance(tool_use_id, str)
    ]
    return {"role": "user", "content": results or content}


def _assistant(content: Any, tool_calls: Any) -> dict[str, Any]:
    """An assistant message from OpenAI-style ``content`` and ``tool_calls``."""
    text = _text(content)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [block for call in as_list(tool_calls) if (block := _tool_use(call))]
    return {"role": "assistant", "content": blocks}


def _tool_use(call: Any) -> dict[str, Any] | None:
    """A tool_use block from an OpenAI tool call; unparsable arguments are kept as a string."""
    call = as_dict(call)
    function = as_dict(call.get("function"))
    if not isinstance(call.get("id"), str) or not isinstance(function.get("name"), str):
        return None
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):
            arguments = json.loads(arguments)
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    return {"type": "tool_use", "id": call["id"], "name": function["name"], "input": arguments}


def _text(content: Any) -> str:
    """Plain text of a string or of a list of OpenAI/Anthropic text parts."""
    if isinstance(content, str):
        return content
    parts = [as_dict(part).get("text") for part in as_list(content)]
    return "\n".join(part for part in parts if isinstance(part, str))


def _text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def _openai_usage(raw: Any) -> dict[str, Any] | None:
    """Anthropic usage from OpenAI/LiteLLM counters (prompt tokens include cached ones)."""
    raw = as_dict(raw)
    prompt, output = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not (is_int(prompt) and is_int(output)):
        return None
    details = as_dict(raw.get("prompt_tokens_details"))
    created = raw.get("cache_creation_input_tokens")
    read = raw.get("cache_read_input_tokens", details.get("cached_tokens"))
    created, read = (n if is_int(n) else 0 for n in (created, read))
    return {
        "input_tokens": max(prompt - created - read, 0),
        "output_tokens": output,
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
    }


def _read_openhands(document: Document, log: Log) -> list[list[dict[str, Any]]] | None:
    """An event list or one evaluation record (JSON), or records one per line: each a
    conversation."""
    value = document.value
    if value is not NOT_JSON:
        if looks_like_openhands_events(value):
            return [parse_openhands(value, log)]
        return (
            [parse_openhands(value["history"], log)] if looks_like_openhands_record(value) else None
        )
    records = [row for _, row in document.rows if looks_like_openhands_record(row)]
    if not records:
        return None
    others = len(document.rows) - len(records)
    if others:
        log.omit("line that is not an OpenHands record", None, True, others)
    return [parse_openhands(record["history"], log) for record in records]


def _read_swe_agent(document: Document, log: Log) -> list[list[dict[str, Any]]] | None:
    if not looks_like_swe_agent(document.value):
        return None
    return [parse_swe_agent(document.value, log)]


OPENHANDS_FORMAT = TranscriptFormat(
    OPENHANDS,
    "OpenHands event list or evaluation output (JSON, or one record per line)",
    _read_openhands,
    20,
)
SWE_AGENT_FORMAT = TranscriptFormat(SWE_AGENT, "SWE-agent trajectory (.traj)", _read_swe_agent, 30)
