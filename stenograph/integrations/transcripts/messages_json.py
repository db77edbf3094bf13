"""Reader for Anthropic Messages-API JSON: a list of messages or ``{"messages": [...]}``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .base import MESSAGES_JSON, Log, is_int, pick_usage, valid_content
from .formats import Document, TranscriptFormat

ROLES = ("user", "assistant")


def looks_like_messages(value: Any) -> bool:
    """True for a list (or ``{"messages": list}``) that is empty or holds a message-like dict."""
    items = value.get("messages") if isinstance(value, dict) else value
    if not isinstance(items, list):
        return False
    return not items or any(isinstance(item, dict) and "role" in item for item in items)


def parse_messages_json(value: Any, log: Log) -> list[dict[str, Any]]:
    """Validated messages; invalid entries are skipped with a warning naming their index."""
    items = value["messages"] if isinstance(value, dict) else value
    messages = []
    for index, item in enumerate(items):
        where = f"messages[{index}]"
        problem = _problem(item)
        if problem:
            log.skip(problem, where)
        else:
            messages.append(_message(item, where, log))
    return messages


def _problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return "not an object"
    if item.get("role") not in ROLES:
        return f"unsupported role {item.get('role')!r}"
    if not valid_content(item.get("content")):
        return "invalid content"
    return None


def _message(item: dict[str, Any], where: str, log: Log) -> dict[str, Any]:
    message = {"role": item["role"], "content": item["content"]}
    if "timestamp" in item:
        timestamp = iso_timestamp(item["timestamp"])
        if timestamp is None:
            log.warn(f"ignored invalid timestamp {item['timestamp']!r}", where)
        else:
            message["timestamp"] = timestamp
    if isinstance(item.get("uuid"), str):
        message["uuid"] = item["uuid"]
    usage = pick_usage(item.get("usage")) if item["role"] == "assistant" else None
    if usage is not None:
        message["usage"] = usage
    return message


def iso_timestamp(value: Any) -> str | None:
    """An ISO-8601 string kept as given, or epoch seconds/milliseconds converted to UTC."""
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return None
        return value
    if not (is_int(value) or isinstance(value, float)):
        return None
    try:
        moment = datetime.fromtimestamp(value / 1000 if abs(value) > 1e11 else value, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return moment.isoformat().replace("+00:00", "Z")


def _read(document: Document, log: Log) -> list[list[dict[str, Any]]] | None:
    if not looks_like_messages(document.value):
        return None
    return [parse_messages_json(document.value, log)]


FORMAT = TranscriptFormat(
    MESSAGES_JSON,
    'Anthropic Messages-API JSON (a list of messages, or {"messages": [...]})',
    _read,
    priority=90,  # any list of role-bearing dicts: tried after the more specific formats
)
