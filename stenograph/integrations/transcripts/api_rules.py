"""Recorded messages made into requests the Messages API accepts: repeated tool ids renamed,
blank text left out, a missing first prompt marked. Every change is logged."""

from __future__ import annotations

from typing import Any

from .base import Log

MISSING_PROMPT = "[the first prompt of this conversation is not in the transcript]"


def follow_api_rules(messages: list[dict[str, Any]], log: Log) -> list[dict[str, Any]]:
    """``messages`` with unique tool_use ids and no blank text; run before pairing repair."""
    return _drop_blank_text(_rename_repeated_ids(messages, log), log)


def rename_label(tool_id: str, n: int) -> str:
    """The stable new name of the ``n``-th use (from 2) of a repeated tool_use id."""
    return f"{tool_id}~{n}"


def _rename_repeated_ids(messages: list[dict[str, Any]], log: Log) -> list[dict[str, Any]]:
    """A tool_use id used again gets ``<id>~<n>``, and so do the results answering it."""
    uses: dict[str, int] = {}
    current: dict[str, str] = {}
    out = []
    for number, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            out.append(message)
            continue
        if message["role"] == "assistant":
            blocks = [_renamed_use(b, uses, current) for b in content]
        else:
            blocks = [_renamed_result(b, current) for b in content]
        renamed = sum(a is not b for a, b in zip(blocks, content, strict=True))
        if renamed:
            log.warn(f"renamed {renamed} repeated tool id(s) (as <id>~<n>)", f"message {number}")
            message = {**message, "content": blocks}
        out.append(message)
    return out


def _renamed_use(block: Any, uses: dict[str, int], current: dict[str, str]) -> Any:
    tool_id = block.get("id") if block.get("type") == "tool_use" else None
    if not isinstance(tool_id, str):
        return block
    uses[tool_id] = uses.get(tool_id, 0) + 1
    current[tool_id] = tool_id if uses[tool_id] == 1 else rename_label(tool_id, uses[tool_id])
    return block if current[tool_id] == tool_id else {**block, "id": current[tool_id]}


def _renamed_result(block: Any, current: dict[str, str]) -> Any:
    tool_id = block.get("tool_use_id") if block.get("type") == "tool_result" else None
    new = current.get(tool_id) if isinstance(tool_id, str) else None
    return block if new is None or new == tool_id else {**block, "tool_use_id": new}


def _drop_blank_text(messages: list[dict[str, Any]], log: Log) -> list[dict[str, Any]]:
    """Empty or whitespace-only text (blocks or whole messages) left out: the API refuses it."""
    out = []
    for number, message in enumerate(messages):
        content = message["content"]
        if isinstance(content, str):
            if content.strip():
                out.append(message)
            else:
                log.omit("blank text message", f"message {number}", lost=False)
            continue
        kept = [b for b in content if not _blank_text(b)]
        if len(kept) < len(content):
            log.omit("blank text block", f"message {number}", False, len(content) - len(kept))
            if not kept:
                continue
            message = {**message, "content": kept}
        out.append(message)
    return out


def _blank_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not block.get("text", "").strip()


def user_first(messages: list[dict[str, Any]], log: Log) -> list[dict[str, Any]]:
    """A conversation whose first message is the model's gets a marked stand-in prompt."""
    if not messages or messages[0]["role"] == "user":
        return messages
    log.omit("first prompt not in the file (a stand-in is sent)", "message 0")
    return [{"role": "user", "content": MISSING_PROMPT}, *messages]
