"""Reader for Claude Code session JSONL files (main sessions and ``agent-*`` sidechains)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .base import BadJson, Log, as_dict, pick_usage, tool_use_ids, valid_content

CONVERSATION = ("user", "assistant")
_OTHER_TYPES = ("system", "summary", "progress", "file-history-snapshot", "queue-operation")
SYNTHETIC_MODEL = "<synthetic>"


def looks_like_record(value: Any) -> bool:
    """True if `value` resembles a line of a Claude Code session file."""
    if not isinstance(value, dict):
        return False
    return (
        value.get("type") in CONVERSATION + _OTHER_TYPES
        or "parentUuid" in value
        or "sessionId" in value
    )


@dataclass
class _Record:
    """One JSON object of the file; `usable` marks user/assistant records with valid content."""

    index: int
    line: int
    data: dict
    usable: bool

    @property
    def type(self) -> Any:
        return self.data.get("type")

    @property
    def uuid(self) -> str | None:
        return _str(self.data.get("uuid"))

    @property
    def parent(self) -> str | None:
        """``parentUuid``, or ``logicalParentUuid`` across a compaction boundary."""
        return _str(self.data.get("parentUuid")) or _str(self.data.get("logicalParentUuid"))

    @property
    def message(self) -> dict:
        return as_dict(self.data.get("message"))

    @property
    def message_id(self) -> str | None:
        return _str(self.message.get("id"))


def parse_claude_code(rows: list[tuple[int, Any]], log: Log) -> list[dict]:
    """Messages of the newest branch of a session, with streamed chunks merged."""
    records = _load(rows, log)
    by_uuid = {record.uuid: record for record in records if record.uuid is not None}
    leaf = _newest_leaf(records)
    if leaf is None:
        return []
    chain = _chain(leaf, by_uuid, log)
    return _build(_kept(records, chain), log)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _load(rows: list[tuple[int, Any]], log: Log) -> list[_Record]:
    """Wrap every JSON object; count and report the lines that cannot be used.

    A record repeating an earlier uuid is ignored with a warning.
    """
    records: list[_Record] = []
    seen: set[str] = set()
    for line, value in rows:
        problem = _problem(value)
        if problem:
            log.skip(problem, line)
        if not isinstance(value, dict):
            continue
        uuid = _str(value.get("uuid"))
        if uuid in seen:
            log.warn(f"duplicate uuid {uuid}; kept the first record", line)
            continue
        if uuid is not None:
            seen.add(uuid)
        usable = problem is None and value["type"] in CONVERSATION
        records.append(_Record(len(records), line, value, usable))
    return records


def _problem(value: Any) -> str | None:
    """Why a parsed line cannot be used, or None."""
    if isinstance(value, BadJson):
        return value.reason
    if not isinstance(value, dict):
        return "not a JSON object"
    if not isinstance(value.get("type"), str):
        return "no record type"
    if value["type"] not in CONVERSATION:
        return None
    if not isinstance(value.get("uuid"), str):
        return f"{value['type']} record without uuid"
    if not valid_content(as_dict(value.get("message")).get("content")):
        return f"{value['type']} record without valid message content"
    return None


def _newest_leaf(records: list[_Record]) -> _Record | None:
    """The conversation record with the latest timestamp (ties: last in file).

    Main-session records win over sidechain ones when a file mixes both.
    """
    candidates = [r for r in records if r.usable]
    main = [r for r in candidates if not r.data.get("isSidechain")]
    return max(main or candidates, key=lambda r: (_when(r.data), r.index), default=None)


def _when(data: dict) -> float:
    """Seconds since the epoch of the record's timestamp; -inf when absent or invalid."""
    try:
        moment = datetime.fromisoformat(data["timestamp"])
    except (KeyError, TypeError, ValueError):
        return float("-inf")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _chain(leaf: _Record, by_uuid: dict[str, _Record], log: Log) -> set[str]:
    """Uuids on the path from `leaf` back to the root, stopping at cycles and gaps."""
    chain: set[str] = set()
    child, uuid = leaf, leaf.uuid
    while uuid is not None:
        if uuid in chain:
            log.warn(f"parentUuid cycle at {uuid}; stopped walking back", child.line)
            break
        record = by_uuid.get(uuid)
        if record is None:
            log.warn(f"parent {uuid} not found; earlier history is missing", child.line)
            break
        chain.add(uuid)
        child, uuid = record, record.parent
    return chain


def _kept(records: list[_Record], chain: set[str]) -> list[_Record]:
    """The chain plus the records of the same turns that hang off it as siblings.

    Parallel tool calls make the DAG fork without a rewind: every chunk of one response
    and every tool_result points at its own chunk, while the chain follows only one.
    """
    kept = [r for r in records if r.usable and r.uuid in chain]
    response_ids = {r.message_id for r in kept if r.type == "assistant"} - {None}
    kept += [
        r
        for r in records
        if r.usable
        and r.uuid not in chain
        and r.type == "assistant"
        and r.message_id in response_ids
    ]
    open_calls = {i for r in kept if r.type == "assistant" for i in tool_use_ids(r.message)}
    open_calls -= {i for r in kept if r.type == "user" for i in _result_ids(r)}
    for record in records:
        results = _result_ids(record) if record.usable and record.uuid not in chain else []
        if results and set(results) <= open_calls:
            kept.append(record)
            open_calls -= set(results)
    return sorted(kept, key=lambda r: r.index)


def _result_ids(record: _Record) -> list[str]:
    """tool_use_ids of a user record made only of tool_result blocks, else []."""
    content = record.message.get("content")
    if record.type != "user" or not isinstance(content, list) or not content:
        return []
    ids = [block.get("tool_use_id") for block in content if block["type"] == "tool_result"]
    if len(ids) != len(content) or not all(isinstance(i, str) for i in ids):
        return []
    return ids


def _build(kept: list[_Record], log: Log) -> list[dict]:
    """Convert records to messages, merging chunks that share ``message.id``."""
    messages: list[dict] = []
    current: dict | None = None
    current_id: str | None = None
    for record in kept:
        if record.type == "user":
            if not record.data.get("isCompactSummary"):
                messages.append(_message(record))
        elif record.message.get("model") == SYNTHETIC_MODEL:
            log.warn("dropped synthetic assistant message (a Claude Code notice)", record.line)
        elif current is not None and current_id is not None and record.message_id == current_id:
            chunk = _message(record)
            current["content"].extend(chunk.pop("content"))
            current.update(chunk)
        else:
            current, current_id = _message(record), record.message_id
            messages.append(current)
    return messages


def _message(record: _Record) -> dict:
    """One message dict from a user or assistant record."""
    content = record.message["content"]
    if record.type == "assistant":
        content = [{"type": "text", "text": content}] if isinstance(content, str) else [*content]
    message: dict = {"role": record.type, "content": content}
    timestamp = _str(record.data.get("timestamp"))
    if timestamp is not None and not record.data.get("isMeta"):
        message["timestamp"] = timestamp
    message["uuid"] = record.uuid
    if record.type == "assistant":
        usage = pick_usage(record.message.get("usage"))
        if usage is not None:
            message["usage"] = usage
        model = _str(record.message.get("model"))
        if model is not None:
            message["model"] = model
    return message
