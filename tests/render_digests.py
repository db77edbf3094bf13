"""Digests of every request rendered while real transcripts replay through memorizing
presets: ``tests/data/render_digests.json`` holds the renderer's figures from before the
incremental, prepared-in-the-background rendering; ``test_render_stability`` compares.

``python tests/render_digests.py`` rewrites the file (only when a rendering change is meant).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import stenograph
from stenograph.engine.clock import parse_timestamp
from stenograph.integrations.transcripts import read_transcript

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "transcripts"
GOLDEN = Path(__file__).resolve().parent / "data" / "render_digests.json"
PRESETS = {  # inactivity-memorize settings: the usual memorize, kept results, shortened inputs
    "usual": {"inactivity_threshold_seconds": 30},
    "keep": {"inactivity_threshold_seconds": 30, "keep_recent": 2, "exclude_tools": ["Bash"]},
    "inputs": {"inactivity_threshold_seconds": 30, "reduce_tool_inputs": True},
}
MAX_FILES = 12


def transcripts() -> list[Path]:
    """The Claude Code transcripts (the largest ``MAX_FILES``), by path relative to DATA."""
    files = sorted(DATA.rglob("*.jsonl"), key=lambda p: (-p.stat().st_size, str(p)))
    return sorted(files[:MAX_FILES])


def digest(path: Path, settings: dict) -> tuple[str, int]:
    """(sha256 of every request's messages (JSON, keys sorted) over one replay, entries
    memorized)."""
    engine = stenograph.Engine.from_preset(
        "inactivity-only", overrides={"inactivity-memorize": settings}
    )
    messages = read_transcript(path).messages
    clock = stenograph.ManualClock(0.0)
    session = engine.open_session("digest", state_dir=None, clock=clock)
    seen: set[str] = set()
    sha = hashlib.sha256()
    for message in messages:
        moment = parse_timestamp(message.get("timestamp"))
        if moment is not None and moment > clock.now:
            clock.set(moment)
        if message.get("uuid") in seen:
            message = {k: v for k, v in message.items() if k != "uuid"}
        seen.add(str(message.get("uuid")))
        if message.get("role") == "assistant":
            request = session.pre_call(model="m")
            session.wait_for_background()
            sha.update(json.dumps(request["messages"], sort_keys=True).encode())
            session.post_sampling(message)
        else:
            session.append(message)
    session.close()
    return sha.hexdigest(), sum(1 for entry in session.history if entry.memorized)


def all_digests() -> dict[str, dict[str, str]]:
    """{transcript: {preset: digest}}."""
    return {
        str(path.relative_to(DATA)): {name: digest(path, s)[0] for name, s in PRESETS.items()}
        for path in transcripts()
    }


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(all_digests(), indent=1, sort_keys=True) + "\n")
    sys.exit(0)
