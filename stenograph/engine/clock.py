"""Time: the injectable clock and timestamp parsing."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], float]


def system_clock() -> float:
    """Seconds since the epoch, from the system."""
    return time.time()


class ManualClock:
    """A clock that only moves when told to (replays and tests)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = float(now)

    def __call__(self) -> float:
        return self.now

    def set(self, now: float) -> None:
        """Jump to ``now`` (epoch seconds)."""
        self.now = float(now)

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds``."""
        self.now += seconds


NUMBERS = (int, float)  # the types an epoch number may have (not bool)


def parse_timestamp(value: object) -> float | None:
    """ISO-8601 string (UTC when it names no zone) or epoch number -> epoch seconds;
    anything else -> None."""
    if isinstance(value, str):
        try:
            return _iso_seconds(value)  # the usual, as written: parsed once
        except ValueError:
            pass
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            return _iso_seconds(text) if text else None
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, NUMBERS):
        return None
    return float(value) if math.isfinite(value) else None


def _iso_seconds(text: str) -> float:
    parsed = datetime.fromisoformat(text)
    return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()


def format_timestamp(epoch: float) -> str:
    """Epoch seconds -> ISO-8601 UTC with a ``Z``."""
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")
