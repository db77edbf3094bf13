"""Real conversations for the lanes that replay them: the largest Claude Code sessions of the
shared transcripts folder (read, never copied), the bundled demo, and a synthetic fall-back.
``STENOGRAPH_BENCH_TRANSCRIPTS`` points elsewhere (a missing folder exercises the fall-back).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stenograph.engine.tokens import collect_text

from . import REPO
from .history import synthetic_history

TRANSCRIPTS = Path(
    os.environ.get("STENOGRAPH_BENCH_TRANSCRIPTS", REPO.parent / "shared" / "data" / "transcripts")
)
DEMO = REPO / "examples" / "demo-session.jsonl"


def claude_code_files() -> list[Path]:
    """Claude Code JSONL files under the shared transcripts folder (empty when absent)."""
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(TRANSCRIPTS.rglob("*.jsonl"), key=lambda p: p.stat().st_size, reverse=True)


def countable_chars(messages: Iterable[dict[str, Any]]) -> int:
    """Characters stenograph would count in these messages (media excluded)."""
    return sum(len(text) for message in messages for text in message_texts(message))


def message_texts(message: dict[str, Any]) -> list[str]:
    """The text stenograph's token estimate counts for one message, block by block: text,
    thinking, tool name and JSON input, tool result content; media blocks are skipped (they
    count a flat rate). Mirrors ``stenograph.engine.tokens.content_tokens``."""
    out: list[str] = []
    collect_text(message.get("content"), out)
    return out


@dataclass
class Conversation:
    """A recorded (or synthetic) conversation as Anthropic message dicts."""

    name: str
    messages: list[dict[str, Any]]
    source: str  # "real", "demo" or "synthetic"

    @property
    def calls(self) -> int:
        """Assistant messages (model calls)."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")


def largest_real_sessions(count: int, candidates: int = 12) -> list[Conversation]:
    """The ``count`` Claude Code sessions with the most countable text, among the
    ``candidates`` largest files (empty when the transcripts folder is absent)."""
    from stenograph.integrations.transcripts import TranscriptError, read_transcript

    found = []
    for path in claude_code_files()[:candidates]:
        try:
            transcript = read_transcript(path)
        except TranscriptError:
            continue
        if transcript.format != "claude-code-jsonl" or not transcript.messages:
            continue
        found.append(
            (
                countable_chars(transcript.messages),
                Conversation(path.name, transcript.messages, "real"),
            )
        )
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [conversation for _, conversation in found[:count]]


def demo_conversation() -> Conversation:
    """The bundled demo transcript ``examples/demo-session.jsonl``."""
    from stenograph.integrations.transcripts import read_transcript

    return Conversation(DEMO.name, read_transcript(DEMO).messages, "demo")


def synthetic_conversation(size: int, seed: int) -> Conversation:
    """A synthetic stand-in for a real session (used when the transcripts are absent)."""
    messages, _ = synthetic_history(size, seed)
    return Conversation(f"synthetic-{size}", messages, "synthetic")


def no_transcripts_note() -> str:
    """The note printed when the real transcripts are absent."""
    return (
        f"note: {TRANSCRIPTS} is absent; using synthetic sessions instead of real ones"
        " (figures are not comparable with the README's)"
    )
