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
    """ISO-8601 string or epoch number -> epoch seconds; anything else -> None."""
    if type(value) is str:  # the usual, as written: taken whole when it names its zone
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if parsed.tzinfo is not None:
                return parsed.timestamp()
    if isinstance(value, bool):
        return None
    if isinstance(value, NUMBERS):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def format_timestamp(epoch: float) -> str:
    """Epoch seconds -> ISO-8601 UTC with a ``Z``."""
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")
