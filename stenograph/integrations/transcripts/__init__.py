"""Read recorded agent conversations as Anthropic Messages-API message dicts.

Formats are plugins (``formats.TranscriptFormat``, entry-point group
``stenograph.transcript_formats``), detected by content; built in: Claude Code session
JSONL, Anthropic messages JSON, OpenHands event lists (or evaluation output records) and
SWE-agent ``.traj`` files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .api_rules import follow_api_rules, user_first
from .base import CLAUDE_CODE, Log, Transcript, TranscriptError, repair_tool_pairing
from .formats import Document, FormatCatalog, TranscriptFormat

__all__ = [
    "Document",
    "Transcript",
    "TranscriptError",
    "TranscriptFormat",
    "format_descriptions",
    "read_transcript",
    "read_transcripts",
]


def format_descriptions() -> dict[str, str]:
    """Each readable format's name and description, in the order files are tried."""
    return {fmt.name: fmt.description for fmt in FormatCatalog().in_order()}


def read_transcript(path: str | os.PathLike[str]) -> Transcript:
    """Read a transcript file (the first conversation of a file holding several); bad
    lines are skipped and reported in ``warnings``.

    Raises TranscriptError if the file cannot be read or is not a recognised format.
    """
    return read_transcripts(path)[0]


def read_transcripts(path: str | os.PathLike[str], record: int | None = None) -> list[Transcript]:
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


def _requests(messages: list[dict[str, Any]], log: Log) -> list[dict[str, Any]]:
    """Messages made into requests the API accepts (see ``api_rules``)."""
    return user_first(repair_tool_pairing(follow_api_rules(messages, log), log), log)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read file: {exc.strerror or exc}") from exc
    return data.decode("utf-8-sig", errors="replace")


def _parse(text: str, log: Log) -> tuple[str, list[list[dict[str, Any]]]]:
    """Detect the format of `text` and convert it into one or more conversations."""
    if not text.strip():
        log.warn("the file is empty: nothing to replay")
        return CLAUDE_CODE, [[]]
    document = Document(text)
    formats = FormatCatalog().in_order()
    for fmt in formats:
        conversations = fmt.read(document, log)
        if conversations is not None:
            return fmt.name, conversations
    accepted = "; ".join(fmt.description for fmt in formats)
    raise TranscriptError(f"{log.path}: not a recognised transcript format. Accepted: {accepted}")
