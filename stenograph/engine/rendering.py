"""From history entries to request messages: placeholders, merging, the pairing guard."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from .entries import Entry
from .tokens import collect_text, joined_length

INPUT_KEEP_CHARS = 200
ToolNameOf = Callable[[str], str]


def render_content(entry: Entry, tool_name_of: ToolNameOf) -> str | list[dict[str, Any]]:
    """What is sent for ``entry``: its base content (the override a handler set, else its
    own), reduced when the entry is memorized."""
    base = base_content(entry)
    memo = entry.memo or {}
    if not entry.memorized or (not memo.get("reduce_inputs") and not _has_results(base)):
        return base  # nothing to reduce: shared, not copied
    return reduce_content(base, memo, tool_name_of)


def _has_results(content: str | list[dict[str, Any]]) -> bool:
    return not isinstance(content, str) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def base_content(entry: Entry) -> str | list[dict[str, Any]]:
    """The entry's content as sent before any memorize: the override, else its own."""
    return entry.content if entry.sent_content is None else entry.sent_content


def reduce_content(
    content: str | list[dict[str, Any]], memo: dict[str, Any], tool_name_of: ToolNameOf
) -> str | list[dict[str, Any]]:
    """The memorized form of ``content``: tool results as placeholders, except the tool ids
    in ``memo["keep"]``; tool inputs shortened when ``memo["reduce_inputs"]``."""
    if isinstance(content, str):
        return content
    keep = set(memo.get("keep", ()))
    reduce_inputs = bool(memo.get("reduce_inputs"))
    return [_reduce(b, keep, reduce_inputs, tool_name_of) for b in content]


def _reduce(
    block: dict[str, Any], keep: set[str], reduce_inputs: bool, tool_name_of: ToolNameOf
) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "tool_result" and block.get("tool_use_id") not in keep:
        return placeholder(block, tool_name_of(str(block.get("tool_use_id"))))
    if kind == "tool_use" and reduce_inputs and block.get("id") not in keep:
        return {**block, "input": _short_input(block.get("input"))}
    return block


def placeholder(block: dict[str, Any], tool_name: str) -> dict[str, Any]:
    """The short, deterministic stand-in for a memorized tool_result (same id, same error
    flag, given or not as in the original)."""
    texts: list[str] = []
    media = collect_text(block.get("content", ""), texts)
    parts = [f"{joined_length(texts):,} chars"]
    if media:
        parts.append(f"{media} image/document block{'s' if media > 1 else ''}")
    out = {
        "type": "tool_result",
        "tool_use_id": block.get("tool_use_id"),
        "content": f"[memorized: {tool_name or 'tool'} result left out ({', '.join(parts)});"
        " call the tool again if you need it]",
    }
    if "is_error" in block:
        out["is_error"] = bool(block["is_error"])
    return out


def _short_input(value: Any) -> Any:
    if isinstance(value, str) and len(value) > INPUT_KEEP_CHARS:
        left = len(value) - INPUT_KEEP_CHARS
        return f"{value[:INPUT_KEEP_CHARS]}… [{left:,} chars left out]"
    if isinstance(value, dict):
        return {k: _short_input(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short_input(v) for v in value]
    return value


def merge_run(role: str, contents: Sequence[str | list[dict[str, Any]]]) -> dict[str, Any]:
    """One request message from consecutive same-role entries (the API merges them too).
    In a user message, tool_result blocks go first, as the API requires."""
    if len(contents) == 1:
        return {"role": role, "content": contents[0]}
    blocks: list[dict[str, Any]] = []
    for content in contents:
        if isinstance(content, str):
            blocks.append({"type": "text", "text": content})
        else:
            blocks.extend(content)
    if role == "user":
        blocks.sort(key=lambda b: b.get("type") != "tool_result")
    return {"role": role, "content": blocks}


class MessageIds(NamedTuple):
    """What the pairing guard needs of one request message."""

    role: Any
    uses: tuple[Any, ...]
    results: tuple[Any, ...]


def message_ids(message: dict[str, Any]) -> MessageIds:
    """The role, tool_use ids and tool_result ids of a request message (one pass)."""
    uses, results = [], []
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                uses.append(block.get("id"))
            elif kind == "tool_result":
                results.append(block.get("tool_use_id"))
    return MessageIds(message.get("role"), tuple(uses), tuple(results))


def check_pairs(ids: Sequence[MessageIds], indexes: Iterable[int]) -> list[str]:
    """Pairing problems around the given message indexes (each checked with its neighbours).
    A tool_use message answered in the same order, the usual case, is settled by one
    comparison."""
    problems: list[str] = []
    last = len(ids) - 1
    for j in sorted({k for i in indexes for k in (i - 1, i) if 0 <= k <= last}):
        message = ids[j]
        if message.role == "assistant":
            if message.uses and (j == last or ids[j + 1].results != message.uses):
                problems.extend(_check_one(ids, j))
        elif message.results and not _answers_in_order(ids[j - 1] if j else None, message):
            problems.extend(_check_one(ids, j))
    return problems


def _answers_in_order(previous: MessageIds | None, message: MessageIds) -> bool:
    return (
        previous is not None
        and previous.role == "assistant"
        and previous.uses == message.results
        and (len(message.results) == 1 or len(set(message.results)) == len(message.results))
    )


def check_pairing(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Every pairing problem of a whole request (empty list: valid)."""
    return check_pairs([message_ids(m) for m in messages], range(len(messages)))


def _check_one(ids: Sequence[MessageIds], i: int) -> list[str]:
    message = ids[i]
    if message.role == "assistant":
        if not message.uses:
            return []
        answered = set(ids[i + 1].results) if i + 1 < len(ids) else set()
        return [
            f"message {i}: tool_use {tool_id} has no tool_result after it"
            for tool_id in message.uses
            if tool_id not in answered
        ]
    if not message.results:
        return []
    previous = ids[i - 1] if i > 0 else None
    offered = set(previous.uses) if previous and previous.role == "assistant" else set()
    problems, seen = [], set()
    for tool_id in message.results:
        if tool_id not in offered:
            problems.append(
                f"message {i}: tool_result {tool_id} answers no tool_use of message {i - 1}"
            )
        elif tool_id in seen:
            problems.append(f"message {i}: tool_use {tool_id} answered twice")
        seen.add(tool_id)
    return problems
