"""Shared types and helpers of the transcript readers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLAUDE_CODE = "claude-code-jsonl"
MESSAGES_JSON = "anthropic-messages-json"
OPENHANDS = "openhands-json"
SWE_AGENT = "swe-agent-traj"

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
# The cache-write split by TTL (``usage.cache_creation``), kept flat beside them.
TTL_USAGE_KEYS = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
NO_RESULT = "[no result recorded]"
_REQUIRED: dict[str, dict[str, type]] = {
    "text": {"text": str},
    "tool_use": {"id": str, "name": str, "input": dict},
    "tool_result": {"tool_use_id": str},
}


class TranscriptError(ValueError):
    """The file cannot be read or is not a recognised transcript format."""


@dataclass
class Omission:
    """Records of one kind that are not replayed as they were: ``lost`` when the model saw
    them (the replay then differs from the session), else left out on purpose."""

    reason: str
    lost: bool
    count: int = 0
    where: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The JSON form used in replay reports."""
        return {"reason": self.reason, "lost": self.lost, "count": self.count, "where": self.where}


@dataclass
class Transcript:
    """A recorded conversation as Anthropic Messages-API message dicts."""

    path: Path
    format: str
    messages: list[dict[str, Any]]
    skipped_lines: int
    warnings: list[str]
    omitted: list[Omission] = field(default_factory=list)
    record: int | None = None  # which conversation of a file holding several (from 1)


WHERE_KEPT = 5  # locations kept per omission reason


@dataclass
class Log:
    """Warnings, skipped records and omissions (by reason) gathered while reading one file."""

    path: Path
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)
    omitted: dict[str, Omission] = field(default_factory=dict)

    def omit(
        self, reason: str, where: int | str | None = None, lost: bool = True, count: int = 1
    ) -> None:
        """Count ``count`` records not replayed for ``reason``; a lost one is also warned."""
        omission = self.omitted.setdefault(reason, Omission(reason, lost))
        omission.count += count
        label = self._where(where)
        if len(omission.where) < WHERE_KEPT:
            omission.where.append(label)
        if lost:
            self.warnings.append(f"{label}: not replayed: {reason}")

    def warn(self, message: str, where: int | str | None = None) -> None:
        """Record a warning; `where` is a line number or a label such as ``messages[3]``."""
        self.warnings.append(f"{self._where(where)}: {message}")

    def skip(self, reason: str, where: int | str | None = None) -> None:
        """Count a record that could not be used and say why (a lost record)."""
        self.skipped += 1
        omission = self.omitted.setdefault("unreadable record", Omission("unreadable record", True))
        omission.count += 1
        if len(omission.where) < WHERE_KEPT:
            omission.where.append(self._where(where))
        self.warn(f"skipped: {reason}", where)

    def _where(self, where: int | str | None) -> str:
        if where is None:
            return f"{self.path}"
        if isinstance(where, int):
            return f"{self.path}:{where}"
        return f"{self.path}: {where}"


@dataclass(frozen=True)
class BadJson:
    """Placeholder for a line that is not valid JSON."""

    reason: str


def json_lines(text: str) -> list[tuple[int, Any]]:
    """Parse each non-blank line; invalid lines become `BadJson`. Line numbers start at 1."""
    rows: list[tuple[int, Any]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except (ValueError, RecursionError) as exc:
            rows.append((number, BadJson(f"invalid JSON ({getattr(exc, 'msg', exc)})")))
    return rows


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a dict, else an empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def is_int(value: Any) -> bool:
    """True for real ints (not bools)."""
    return isinstance(value, int) and not isinstance(value, bool)


def pick_usage(raw: Any) -> dict[str, Any] | None:
    """The Anthropic usage counters present in `raw` (ints only), or None; the cache-write
    split by TTL (``cache_creation``) is kept flat, under its own key names."""
    usage = {key: raw[key] for key in USAGE_KEYS if is_int(as_dict(raw).get(key))}
    split = as_dict(as_dict(raw).get("cache_creation"))
    usage.update({key: split[key] for key in TTL_USAGE_KEYS if is_int(split.get(key))})
    return usage or None


def valid_content(content: Any) -> bool:
    """True for a string or a list of well-formed content blocks."""
    return isinstance(content, str) or (
        isinstance(content, list) and all(_valid_block(block) for block in content)
    )


def _valid_block(block: Any) -> bool:
    """A dict with a string ``type``; text, tool_use and tool_result blocks keep their keys."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return False
    required = _REQUIRED.get(block["type"], {})
    return all(isinstance(block.get(key), kind) for key, kind in required.items())


def tool_use_ids(message: dict[str, Any]) -> list[str]:
    """Ids of the ``tool_use`` blocks of a message."""
    return [
        block["id"]
        for block in _blocks(message)
        if block.get("type") == "tool_use" and isinstance(block.get("id"), str)
    ]


def repair_tool_pairing(messages: list[dict[str, Any]], log: Log) -> list[dict[str, Any]]:
    """Make every tool_result answer a tool_use of the nearest preceding assistant message.

    Orphan or duplicate results are dropped. A tool_use still unanswered when the next
    assistant message starts gets a synthetic error result right after its own message;
    a dangling call in the final message of the transcript stays as it is. Messages left
    with empty content are dropped.
    """
    out: list[dict[str, Any]] = []
    anchor = -1
    pending: dict[str, bool] = {}
    for message in messages:
        if message["role"] == "assistant":
            if not message["content"]:
                log.warn("dropped assistant message with empty content", _label(message))
                continue
            _close(out, anchor, pending, log)
            anchor, pending = len(out), dict.fromkeys(tool_use_ids(message), False)
            out.append(message)
            continue
        kept = _answer(message, pending, log)
        if kept is not None:
            out.append(kept)
    if anchor != len(out) - 1:
        _close(out, anchor, pending, log)
    return out


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _label(message: dict[str, Any]) -> str | None:
    """Where a warning about a converted message points: its source uuid, if known."""
    uuid = message.get("uuid")
    return f"message {uuid}" if uuid else None


def _answer(message: dict[str, Any], pending: dict[str, bool], log: Log) -> dict[str, Any] | None:
    """The user message without tool_results that answer no pending tool_use."""
    content = message["content"]
    kept = content
    if isinstance(content, list):
        kept = [block for block in content if _answers(block, pending, message, log)]
    if not kept:
        log.warn("dropped user message with empty content", _label(message))
        return None
    return message if len(kept) == len(content) else {**message, "content": kept}


def _answers(
    block: dict[str, Any], pending: dict[str, bool], message: dict[str, Any], log: Log
) -> bool:
    """True for non-result blocks and for the first result to each pending tool_use."""
    if block.get("type") != "tool_result":
        return True
    tool_use_id = block.get("tool_use_id")
    if isinstance(tool_use_id, str) and pending.get(tool_use_id) is False:
        pending[tool_use_id] = True
        return True
    log.warn(
        f"dropped tool_result for {tool_use_id!r}: it answers no pending tool_use "
        "of the preceding assistant message",
        _label(message),
    )
    return False


def _close(out: list[dict[str, Any]], anchor: int, pending: dict[str, bool], log: Log) -> None:
    """Insert synthetic error results for unanswered tool_uses right after `out[anchor]`."""
    missing = [tool_use_id for tool_use_id, done in pending.items() if not done]
    if not missing:
        return
    for tool_use_id in missing:
        log.warn(
            f"tool_use {tool_use_id} has no recorded result; added a synthetic error result",
            _label(out[anchor]),
        )
    results = [
        {"type": "tool_result", "tool_use_id": tool_use_id, "content": NO_RESULT, "is_error": True}
        for tool_use_id in missing
    ]
    out.insert(anchor + 1, {"role": "user", "content": results})
