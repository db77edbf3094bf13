"""How well the simulated cache matches what a session recorded: misses call by call and
cache writes per session ("a miss": a call that writes more input to the cache than it
reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SessionFit:
    """One session: its calls with usage, the misses of each side, the writes of each."""

    name: str
    calls: int
    simulated_misses: set[int]
    recorded_misses: set[int]
    simulated_writes: int
    recorded_writes: int

    @property
    def writes_within(self) -> float:
        """Relative difference of the simulated writes from the recorded ones."""
        if not self.recorded_writes:
            return 0.0 if not self.simulated_writes else float("inf")
        return abs(self.simulated_writes - self.recorded_writes) / self.recorded_writes


@dataclass
class Fit:
    """The whole set: precision and recall of the simulated misses, sessions within 20 %."""

    sessions: list[SessionFit] = field(default_factory=list)

    def add(self, name: str, economics: dict[str, Any]) -> SessionFit:
        """Compare one replay's ``economics`` (as recorded vs recorded usage)."""
        recorded = {c["index"]: c for c in economics["recorded_usage"]["calls"]}
        simulated = [c for c in economics["as_recorded"]["calls"] if c["index"] in recorded]
        fit = SessionFit(
            name,
            len(simulated),
            {c["index"] for c in simulated if _miss(c)},
            {i for i, c in recorded.items() if _miss(c)},
            sum(c["cache_write"] for c in simulated),
            sum(c["cache_write"] for c in recorded.values()),
        )
        self.sessions.append(fit)
        return fit

    @property
    def true_misses(self) -> int:
        """Misses both sides have."""
        return sum(len(s.simulated_misses & s.recorded_misses) for s in self.sessions)

    @property
    def precision(self) -> float:
        """Share of the simulated misses that were recorded."""
        found = sum(len(s.simulated_misses) for s in self.sessions)
        return self.true_misses / found if found else 1.0

    @property
    def recall(self) -> float:
        """Share of the recorded misses the simulation finds."""
        recorded = sum(len(s.recorded_misses) for s in self.sessions)
        return self.true_misses / recorded if recorded else 1.0

    def outside(self, tolerance: float = 0.2) -> list[SessionFit]:
        """Sessions whose simulated writes are off by more than ``tolerance``."""
        return [s for s in self.sessions if s.writes_within > tolerance]

    def within_share(self, tolerance: float = 0.2) -> float:
        """Share of sessions whose simulated writes are within ``tolerance``."""
        if not self.sessions:
            return 1.0
        return 1 - len(self.outside(tolerance)) / len(self.sessions)


def _miss(call: dict[str, Any]) -> bool:
    return bool(call["cache_write"] > call["cache_read"])
