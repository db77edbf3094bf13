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


def repeated_demo(calls: int, path: Path) -> Path:
    """A Claude Code JSONL file at ``path`` of about ``calls`` model calls: the demo's turns
    (after its ``/clear``) again and again, as one long session. Each repetition gets fresh
    uuids, message and tool ids, and comes a minute after the one before, keeping the demo's
    own gaps (its seven-minute pause included, so memorize acts in every repetition)."""
    import json
    import re
    from datetime import datetime, timedelta

    records = [json.loads(line) for line in DEMO.read_text("utf-8").splitlines()[1:]]
    times = [datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")) for r in records]
    span = times[-1] - times[0] + timedelta(minutes=1)
    per_round = len({r["message"]["id"] for r in records if r["type"] == "assistant"})
    lines, parent = [], None
    ids = re.compile(r'"((?:toolu|msg)_[A-Za-z0-9]+)"')
    for round_index in range((calls + per_round - 1) // per_round):
        suffix = f'r{round_index}"'
        for record, moment in zip(records, times, strict=True):
            text = ids.sub(lambda m, end=suffix: f'"{m.group(1)}{end}', json.dumps(record))
            copy = json.loads(text)
            copy["uuid"] = f"{round_index:08x}-{record['uuid'][9:]}"
            copy["parentUuid"], parent = parent, copy["uuid"]
            stamp = moment + span * round_index
            copy["timestamp"] = (
                stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"
            )
            lines.append(json.dumps(copy))
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path
