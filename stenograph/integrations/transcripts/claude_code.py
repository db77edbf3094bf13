"""Reader for Claude Code session JSONL files (main sessions and ``agent-*`` sidechains)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .base import CLAUDE_CODE, BadJson, Log, as_dict, pick_usage, tool_use_ids, valid_content
from .formats import NOT_JSON, Document, TranscriptFormat

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
    data: dict[str, Any]
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
    def message(self) -> dict[str, Any]:
        return as_dict(self.data.get("message"))

    @property
    def message_id(self) -> str | None:
        return _str(self.message.get("id"))


def parse_claude_code(rows: list[tuple[int, Any]], log: Log) -> list[dict[str, Any]]:
    """Messages of the branch holding the newest response, with streamed chunks merged,
    compactions crossed, queued prompts placed at their time; every record not replayed is
    counted by reason in ``log``."""
    records = _load(rows, log)
    scope = _scope(records)
    by_uuid = {record.uuid: record for record in records if record.uuid is not None}
    leaf = _leaf(scope, records)
    chain = _chain(leaf, records, by_uuid, log) if leaf is not None else []
    kept = _kept(records, {r.uuid for r in chain})
    messages = _build(kept, log)
    messages = _place_queued(records, messages, log)
    replayed = {id(r) for r in kept} | {id(r) for r in chain if _is_boundary(r)}
    _account(records, scope, replayed, {r.message_id for r in kept} - {None}, log)
    return messages


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
            log.omit("record repeating an earlier uuid (the first is kept)", line, False)
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


def _scope(records: list[_Record]) -> list[_Record]:
    """The records of the file's own conversation: the main session's (a sidechain file,
    all of whose records are a subagent's, is its own conversation)."""
    main = [r for r in records if not r.data.get("isSidechain")]
    return main if any(r.usable for r in main) else records


def _leaf(scope: list[_Record], records: list[_Record]) -> _Record | None:
    """The newest leaf below the newest model response (the branch the session ended
    on); with no response at all, the newest leaf. A record with conversation below it is
    no leaf, however new (a meta caveat written after its children)."""
    nodes = {r.uuid: r for r in scope if r.uuid is not None}
    children: dict[str, list[_Record]] = {}
    for record in nodes.values():
        parent = record.parent if record.parent in nodes else _joined_parent(record, records)
        if parent is not None:
            children.setdefault(parent, []).append(record)
    inner = _with_conversation_below(scope, nodes, records)
    usable = [r for r in scope if r.usable]
    responses = [r for r in usable if r.type == "assistant" and not _synthetic(r)]
    top = max(responses, key=_newest, default=None)
    below = [r for r in _descendants(top, children) if r.usable] if top else usable
    leaves = [r for r in below if r.uuid not in inner] or below
    return max(leaves, key=_newest, default=None)


def _with_conversation_below(
    scope: list[_Record], nodes: dict[str, _Record], records: list[_Record]
) -> set[str]:
    """Uuids of the records that have a conversation record below them."""
    marked: set[str] = set()
    for record in scope:
        if not record.usable:
            continue
        parent = record.parent if record.parent in nodes else _joined_parent(record, records)
        while parent is not None and parent not in marked:
            marked.add(parent)
            above = nodes.get(parent)
            if above is None:
                break
            parent = above.parent if above.parent in nodes else _joined_parent(above, records)
    return marked


def _newest(record: _Record) -> tuple[float, int]:
    return (_when(record.data), record.index)


def _descendants(top: _Record, children: dict[str, list[_Record]]) -> list[_Record]:
    found, todo = [top], [top]
    while todo:
        for child in children.get(todo.pop().uuid or "", []):
            found.append(child)
            todo.append(child)
    return found


def _synthetic(record: _Record) -> bool:
    return record.message.get("model") == SYNTHETIC_MODEL


def _is_boundary(record: _Record) -> bool:
    return record.type == "system" and record.data.get("subtype") == "compact_boundary"


def _joined_parent(record: _Record, records: list[_Record]) -> str | None:
    """A compaction boundary whose logical parent is not in the file joins the last
    conversation record before it in file order (None: the file starts there)."""
    if not _is_boundary(record):
        return None
    for earlier in reversed(records[: record.index]):
        if earlier.usable and not earlier.data.get("isSidechain"):
            return earlier.uuid
    return None


def _when(data: dict[str, Any]) -> float:
    """Seconds since the epoch of the record's timestamp; -inf when absent or invalid."""
    try:
        moment = datetime.fromisoformat(data["timestamp"])
    except (KeyError, TypeError, ValueError):
        return float("-inf")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _chain(
    leaf: _Record, records: list[_Record], by_uuid: dict[str, _Record], log: Log
) -> list[_Record]:
    """The records from the root to ``leaf`` (compaction boundaries crossed), stopping at
    cycles and missing parents (the history before is lost: counted)."""
    chain: list[_Record] = []
    seen: set[str] = set()
    record: _Record | None = leaf
    while record is not None:
        if record.uuid in seen:
            log.warn(f"parentUuid cycle at {record.uuid}; stopped walking back", record.line)
            break
        seen.add(record.uuid or "")
        chain.append(record)
        parent = record.parent
        if _is_boundary(record) and (parent is None or parent not in by_uuid):
            parent = _joined_parent(record, records)
            if parent is not None and record.data.get("logicalParentUuid"):
                log.warn(
                    "compaction boundary's logical parent is not in the file; joined the"
                    " conversation record before it",
                    record.line,
                )
        if parent is None:
            break
        record = by_uuid.get(parent)
        if record is None:
            log.omit("history before a parent record missing from the file", chain[-1].line)
    chain.reverse()
    return chain


def _kept(records: list[_Record], chain: set[str | None]) -> list[_Record]:
    """The chain plus the records of the same turns that hang off it as siblings.

    Parallel tool calls make the DAG fork without a rewind: every chunk of one response
    and every tool_result points at its own chunk, while the chain follows only one.
    """
    kept = [r for r in records if (r.usable or r.type == "attachment") and r.uuid in chain]
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


def _build(kept: list[_Record], log: Log) -> list[dict[str, Any]]:
    """Convert records to messages, merging chunks that share ``message.id``. A compact
    summary is left out when the history it summarises comes before it."""
    messages: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    current_id: str | None = None
    for record in kept:
        if record.type == "attachment":
            message = _attachment(record, log)
            if message is not None:
                messages.append(message)
        elif record.type == "user":
            if not record.data.get("isCompactSummary") or not messages:
                messages.append(_message(record))
            else:
                log.omit(
                    "compact summary (the history it summarises is replayed)", record.line, False
                )
        elif _synthetic(record):
            log.omit(
                "synthetic assistant message (a Claude Code notice, no model call)",
                record.line,
                False,
            )
        elif current is not None and current_id is not None and record.message_id == current_id:
            chunk = _message(record)
            current["content"].extend(chunk.pop("content"))
            current.update(chunk)
        else:
            current, current_id = _message(record), record.message_id
            messages.append(current)
    return messages


def _attachment(record: _Record, log: Log) -> dict[str, Any] | None:
    """A queued prompt delivered as an attachment is user input; other attachments were
    sent in a form the file does not record (counted as not replayed)."""
    attachment = as_dict(record.data.get("attachment"))
    prompt = attachment.get("prompt")
    if attachment.get("type") == "queued_command" and valid_content(prompt) and prompt:
        message = {"role": "user", "content": prompt, "uuid": record.uuid}
        if _str(record.data.get("timestamp")):
            message["timestamp"] = record.data["timestamp"]
        return message
    kind = attachment.get("type") or "unknown"
    log.omit(
        f"attachment ({kind}): sent to the model in a form the file does not hold", record.line
    )
    return None


def _place_queued(
    records: list[_Record], messages: list[dict[str, Any]], log: Log
) -> list[dict[str, Any]]:
    """Prompts typed while the agent worked, held only as ``queue-operation`` records, are
    replayed as user input at their time; one that became a user message is left out."""
    out = list(messages)
    for record in records:
        content = record.data.get("content")
        if record.type != "queue-operation" or record.data.get("operation") != "enqueue":
            continue
        if not content or not valid_content(content):
            continue
        at = _when(record.data)
        if _delivered(content, at, out):
            log.omit("queued prompt (replayed as the user message it became)", record.line, False)
            continue
        position = len(out)
        while position and _when(out[position - 1]) > at:
            position -= 1
        message = {"role": "user", "content": content, "timestamp": record.data["timestamp"]}
        out.insert(position, message)
        log.warn("queued prompt delivered mid-turn: replayed as input at its time", record.line)
    return out


def _delivered(content: Any, at: float, messages: list[dict[str, Any]]) -> bool:
    """Whether a user message at or after ``at`` holds the queued text."""
    texts = (
        [content]
        if isinstance(content, str)
        else [b.get("text", "") for b in content if b.get("type") == "text"]
    )
    needle = max(texts, key=len, default="").strip()
    if not needle:
        return True
    return any(
        m["role"] == "user" and _when(m) >= at - 1 and needle in _text_of(m["content"])
        for m in messages
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


def _account(
    records: list[_Record], scope: list[_Record], replayed: set[int], ids: set[str | None], log: Log
) -> None:
    """Count every record that is neither replayed nor counted already, by reason (``ids``:
    the message ids replayed)."""
    in_scope = set(map(id, scope))
    calls: set[str] = set()
    for record in records:
        if id(record) in replayed or not isinstance(record.type, str):
            continue
        if record.type in ("queue-operation", "attachment") and id(record) in in_scope:
            if record.type == "attachment":
                log.omit("attachment on an abandoned branch", record.line, False)
            continue
        if id(record) not in in_scope:
            log.omit("subagent record (its conversation is in its own file)", record.line, False)
        elif record.usable:
            if record.type == "assistant" and not _synthetic(record) and record.message_id:
                calls.add(record.message_id)
            if record.message_id in ids:
                continue  # a chunk of a replayed response
            log.omit("record on an abandoned branch (rewound or superseded)", record.line, False)
        elif record.type not in CONVERSATION:
            log.omit(f"{record.type} record (not sent to the model)", record.line, False)
    if calls - ids:
        log.omit("model calls on abandoned branches", None, False, len(calls - ids))


def _message(record: _Record) -> dict[str, Any]:
    """One message dict from a user or assistant record."""
    content = record.message["content"]
    if record.type == "assistant":
        content = [{"type": "text", "text": content}] if isinstance(content, str) else [*content]
    message: dict[str, Any] = {"role": record.type, "content": content}
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


def _read(document: Document, log: Log) -> list[list[dict[str, Any]]] | None:
    """One conversation, when the file is one record or JSON Lines holding records."""
    value = document.value
    if not (value is NOT_JSON or looks_like_record(value)):
        return None
    if not any(looks_like_record(row) for _, row in document.rows):
        return None
    return [parse_claude_code(document.rows, log)]


FORMAT = TranscriptFormat(
    CLAUDE_CODE, "Claude Code session JSONL (main sessions and agent-* sidechains)", _read, 10
)
