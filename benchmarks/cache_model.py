"""The prompt-cache simulator against what the development Claude Code sessions recorded:
misses call by call (precision / recall) and cache writes per session (within 20 %).

    .venv/bin/python benchmarks/cache_model.py [TRANSCRIPTS_DIR]
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from stenograph.economics.validation import Fit
from stenograph.integrations.transcripts import TranscriptError, read_transcript
from stenograph.replay import replay

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"


def usage_sessions(folder: Path) -> list[Path]:
    """Claude Code session files of ``folder`` whose calls recorded usage."""
    found = []
    for path in sorted(folder.rglob("*.jsonl")):
        try:
            transcript = read_transcript(path)
        except TranscriptError:
            continue
        if transcript.format == "claude-code-jsonl" and any(
            m.get("usage") for m in transcript.messages
        ):
            found.append(path)
    return found


def fit_sessions(folder: Path) -> Fit:
    """Replay every session "as recorded" and compare with its recorded usage."""
    fit = Fit()
    for path in usage_sessions(folder):
        report = replay(path, "inactivity-only", state_dir=None)
        assert report.economics is not None
        fit.add(str(path.relative_to(folder)), report.economics)
    return fit


def describe(fit: Fit) -> str:
    """The figures, then every session outside 20 % and every disagreeing call."""
    lines = [
        f"sessions {len(fit.sessions)}, calls {sum(s.calls for s in fit.sessions)}, "
        f"recorded misses {sum(len(s.recorded_misses) for s in fit.sessions)}",
        f"misses: precision {fit.precision:.1%}, recall {fit.recall:.1%}",
        f"cache writes within 20 %: {fit.within_share():.1%} of sessions",
    ]
    for s in fit.sessions:
        off = sorted(s.simulated_misses ^ s.recorded_misses)
        if s.writes_within > 0.2 or off:
            lines.append(
                f"  {s.name}: writes {s.simulated_writes:,} simulated vs "
                f"{s.recorded_writes:,} recorded; calls disagreeing on a miss: {off or '-'}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    logging.disable(logging.WARNING)
    print(describe(fit_sessions(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)))
