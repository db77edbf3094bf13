"""From history entries to request messages: placeholders and merging."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .entries import Entry
from .tokens import collect_text, joined_length

INPUT_KEEP_CHARS = 200
ToolNameOf = Callable[[str], str]


def render_content(entry: Entry, tool_name_of: ToolNameOf) -> str | list[dict[str, Any]]:
    """What is sent for ``entry``: its base content (the override a handler set, else its
    own), reduced when the entry is memorized."""
    if not (entry.memorized and entry.tool_result_ids) and render_content_is_base(entry):
        return base_content(entry)  # nothing to reduce: shared, not copied
    return reduce_content(base_content(entry), entry.memo or {}, tool_name_of)


def render_content_is_base(entry: Entry) -> bool:
    """Whether ``render_content`` sends the base content as it is: not memorized, or
    memorized with no tool_result to reduce and inputs left whole."""
    if not entry.memorized:
        return True
    return not (entry.memo or {}).get("reduce_inputs") and not has_results(base_content(entry))


def has_results(content: str | list[dict[str, Any]]) -> bool:
    """Whether ``content`` holds a tool_result block."""
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
    if not keep and not reduce_inputs:  # the usual memorize, in one pass
        return [
            placeholder(b, tool_name_of(str(b.get("tool_use_id"))))
            if b.get("type") == "tool_result"
            else b
            for b in content
        ]
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
    return _placeholder(block, placeholder_text(block, tool_name))


def _placeholder(block: dict[str, Any], text: str) -> dict[str, Any]:
    out = {"type": "tool_result", "tool_use_id": block.get("tool_use_id"), "content": text}
    if "is_error" in block:
        out["is_error"] = bool(block["is_error"])
    return out


def placeholder_text(block: dict[str, Any], tool_name: str) -> str:
    """What a memorized tool_result says: which tool, how much was left out."""
    content = block.get("content", "")
    if isinstance(content, str):  # the usual case, without collecting
        left_out = f"{len(content):,} chars"
    else:
        texts: list[str] = []
        media = collect_text(content, texts)
        left_out = f"{joined_length(texts):,} chars"
        if media:
            left_out += f", {media} image/document block{'s' if media > 1 else ''}"
    return (
        f"[memorized: {tool_name or 'tool'} result left out ({left_out});"
        " call the tool again if you need it]"
    )


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
