"""Transcript formats as plugins: each is a ``TranscriptFormat`` registered under its name
in the ``stenograph.transcript_formats`` entry-point group (the built-ins the same way)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ...engine.discovery import Catalog
from ...engine.errors import PluginError
from .base import Log, json_lines

ENTRY_POINT_GROUP = "stenograph.transcript_formats"
NOT_JSON = object()


@dataclass
class Document:
    """A transcript file's text, parsed on demand: as one JSON value, or line by line."""

    text: str

    @cached_property
    def value(self) -> Any:
        """The file as one JSON value, or ``NOT_JSON``."""
        try:
            return json.loads(self.text)
        except (ValueError, RecursionError):
            return NOT_JSON

    @cached_property
    def rows(self) -> list[tuple[int, Any]]:
        """Each non-blank line parsed as JSON (``BadJson`` where it is not), numbered from 1."""
        return json_lines(self.text)


@dataclass(frozen=True)
class TranscriptFormat:
    """A readable transcript format. ``read(document, log)`` returns the file's
    conversations as Messages-API message lists, or None when the file is not in this
    format (it may then warn and skip through ``log``). Formats are tried by ascending
    ``priority``, then name: a format accepting broad input (a plain list of messages)
    declares a high one."""

    name: str
    description: str
    read: Callable[[Document, Log], list[list[dict[str, Any]]] | None]
    priority: int = 50


class FormatCatalog(Catalog[TranscriptFormat]):
    """Every transcript format: the built-ins and the ``stenograph.transcript_formats``
    entry points."""

    kind = "transcript format"
    group = ENTRY_POINT_GROUP
    builtins = {
        "claude-code-jsonl": "stenograph.integrations.transcripts.claude_code:FORMAT",
        "anthropic-messages-json": "stenograph.integrations.transcripts.messages_json:FORMAT",
        "openhands-json": "stenograph.integrations.transcripts.other_formats:OPENHANDS_FORMAT",
        "swe-agent-traj": "stenograph.integrations.transcripts.other_formats:SWE_AGENT_FORMAT",
    }

    def check(self, obj: object, name: str, origin: str) -> None:
        if not isinstance(obj, TranscriptFormat):
            raise PluginError(
                f"Transcript format '{name}' from {origin} is {obj!r}, not a"
                " stenograph TranscriptFormat."
            )
        if obj.name != name:
            raise PluginError(
                f"Transcript format '{name}' from {origin} calls itself '{obj.name}':"
                " the entry point's name and the format's name must be the same."
            )

    def in_order(self) -> list[TranscriptFormat]:
        """Every format, in the order files are tried against them."""
        return sorted((self.get(name) for name in self.names()), key=_order)


def _order(fmt: TranscriptFormat) -> tuple[int, str]:
    return fmt.priority, fmt.name
