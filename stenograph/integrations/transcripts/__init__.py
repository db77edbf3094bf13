"""Read recorded agent conversations as Anthropic Messages-API message dicts.

Supported formats, detected by content: Claude Code session JSONL, Anthropic messages JSON,
OpenHands event lists (or evaluation output records) and SWE-agent ``.traj`` files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .api_rules import follow_api_rules, user_first
from .base import (
    CLAUDE_CODE,
    MESSAGES_JSON,
    OPENHANDS,
    SWE_AGENT,
    Log,
    Transcript,
    TranscriptError,
    json_lines,
    repair_tool_pairing,
)
from .claude_code import looks_like_record, parse_claude_code
from .messages_json import looks_like_messages, parse_messages_json
from .other_formats import (
    looks_like_openhands_events,
    looks_like_openhands_record,
    looks_like_swe_agent,
    parse_openhands,
    parse_swe_agent,
)

__all__ = ["FORMATS", "Transcript", "TranscriptError", "read_transcript", "read_transcripts"]

FORMATS = {
    CLAUDE_CODE: "Claude Code session JSONL (main sessions and agent-* sidechains)",
    MESSAGES_JSON: 'Anthropic Messages-API JSON (a list of messages, or {"messages": [...]})',
    OPENHANDS: "OpenHands event list or evaluation output (JSON, or one record per line)",
    SWE_AGENT: "SWE-agent trajectory (.traj)",
}


def read_transcript(path: str | os.PathLike) -> Transcript:
    """Read a transcript file (the first conversation of a file holding several); bad
    lines are skipped and reported in ``warnings``.

    Raises TranscriptError if the file cannot be read or is not a recognised format.
    """
    return read_transcripts(path)[0]


def read_transcripts(path: str | os.PathLike, record: int | None = None) -> list[Transcript]:
    """Every conversation of a transcript file (``record``: only that one, counted from 1),
    as Messages-API messages; what is not replayed is counted in ``omitted``."""
    path = Path(path)
    log = Log(path)
    kind, conversations = _parse(_read_text(path), log)
    several = len(conversations) > 1
    if record is not None:
        if not 1 <= record <= len(conversations):
            raise TranscriptError(
                f"{path}: no record {record}; the file holds {len(conversations)} conversation(s)"
            )
        chosen = [(record, conversations[record - 1])]
        log.omit("conversation not chosen with --record", None, False, len(conversations) - 1)
    else:
        chosen = list(enumerate(conversations, 1))
    fixed = [(n, _requests(messages, log)) for n, messages in chosen]
    omitted = list(log.omitted.values())
    return [
        Transcript(path, kind, messages, log.skipped, log.warnings, omitted, n if several else None)
        for n, messages in fixed
    ]


def _requests(messages: list[dict], log: Log) -> list[dict]:
    """Messages made into requests the API accepts (see ``api_rules``)."""
    return user_first(repair_tool_pairing(follow_api_rules(messages, log), log), log)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read file: {exc.strerror or exc}") from exc
    return data.decode("utf-8-sig", errors="replace")


def _parse(text: str, log: Log) -> tuple[str, list[list[dict]]]:
    """Detect the format of `text` and convert it into one or more conversations."""
    if not text.strip():
        log.warn("the file is empty: nothing to replay")
        return CLAUDE_CODE, [[]]
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return _parse_rows(json_lines(text), log)
    if looks_like_record(value):
        return _parse_rows(json_lines(text), log)
    kind, messages = _parse_value(value, log)
    return kind, [messages]


def _parse_rows(rows: list[tuple[int, Any]], log: Log) -> tuple[str, list[list[dict]]]:
    """A JSON Lines file: Claude Code records, or OpenHands evaluation output records."""
    if any(looks_like_record(value) for _, value in rows):
        return CLAUDE_CODE, [parse_claude_code(rows, log)]
    records = [(line, value) for line, value in rows if looks_like_openhands_record(value)]
    if not records:
        raise _unrecognised(log)
    others = len(rows) - len(records)
    if others:
        log.omit("line that is not an OpenHands record", None, True, others)
    return OPENHANDS, [parse_openhands(value["history"], log) for _, value in records]


def _parse_value(value: Any, log: Log) -> tuple[str, list[dict]]:
    """A file holding one JSON value."""
    if looks_like_openhands_events(value):
        return OPENHANDS, parse_openhands(value, log)
    if looks_like_openhands_record(value):
        return OPENHANDS, parse_openhands(value["history"], log)
    if looks_like_swe_agent(value):
        return SWE_AGENT, parse_swe_agent(value, log)
    if looks_like_messages(value):
        return MESSAGES_JSON, parse_messages_json(value, log)
    raise _unrecognised(log)


def _unrecognised(log: Log) -> TranscriptError:
    accepted = "; ".join(FORMATS.values())
    return TranscriptError(f"{log.path}: not a recognised transcript format. Accepted: {accepted}")
