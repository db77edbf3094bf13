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

__all__ = ["Transcript", "TranscriptError", "read_transcript"]


def read_transcript(path: str | os.PathLike) -> Transcript:
    """Read a transcript file; bad lines are skipped and reported in ``warnings``.

    Raises TranscriptError if the file cannot be read or is not a recognised format.
    """
    path = Path(path)
    log = Log(path)
    kind, messages = _parse(_read_text(path), log)
    messages = follow_api_rules(messages, log)
    messages = user_first(repair_tool_pairing(messages, log), log)
    return Transcript(path, kind, messages, log.skipped, log.warnings, list(log.omitted.values()))


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read file: {exc.strerror or exc}") from exc
    return data.decode("utf-8-sig", errors="replace")


def _parse(text: str, log: Log) -> tuple[str, list[dict]]:
    """Detect the format of `text` and convert it."""
    if not text.strip():
        return CLAUDE_CODE, []
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return _parse_rows(json_lines(text), log)
    if looks_like_record(value):
        return _parse_rows(json_lines(text), log)
    return _parse_value(value, log)


def _parse_rows(rows: list[tuple[int, Any]], log: Log) -> tuple[str, list[dict]]:
    """A JSON Lines file: Claude Code records, or OpenHands evaluation output records."""
    if any(looks_like_record(value) for _, value in rows):
        return CLAUDE_CODE, parse_claude_code(rows, log)
    records = [(line, value) for line, value in rows if looks_like_openhands_record(value)]
    if not records:
        raise _unrecognised(log)
    if len(records) > 1:
        log.warn(f"{len(records)} OpenHands records; read only the first", records[0][0])
    return OPENHANDS, parse_openhands(records[0][1]["history"], log)


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
    return TranscriptError(f"{log.path}: not a recognised transcript format")
