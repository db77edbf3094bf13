"""Timings and their summaries: samples in µs, median and p90 (nearest rank), ratios."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100])."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    """The median (0 for none)."""
    return statistics.median(values) if values else 0.0


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """The median of every key over ``runs``, as ``median_<key>``."""
    return {f"median_{key}": median([run[key] for run in runs]) for key in runs[0]}


@dataclass
class Samples:
    """Timings of one lane, in microseconds."""

    label: str
    values: list[float] = field(default_factory=list, repr=False)
    note: str = ""

    def add_ns(self, nanoseconds: int) -> None:
        """Record one timing given in nanoseconds."""
        self.values.append(nanoseconds / 1_000)

    @property
    def median(self) -> float:
        """Median (µs)."""
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def p90(self) -> float:
        """90th percentile, nearest rank (µs)."""
        return percentile(self.values, 90) if self.values else float("nan")

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (no raw samples)."""
        return {
            "label": self.label,
            "n": len(self.values),
            "median_us": round(self.median, 2),
            "p90_us": round(self.p90, 2),
            "note": self.note,
        }


def ratio(a: Samples, b: Samples) -> dict[str, float]:
    """a / b for the median and the p90."""
    return {"median": a.median / b.median, "p90": a.p90 / b.p90}


def balanced(items: Sequence[Any], round_index: int) -> list[Any]:
    """``items`` in round ``round_index``'s order of a Williams design: over ``len(items)``
    rounds (twice that for an odd count) each item runs first equally often and right after
    each other item equally often. A plain rotation would put one lane right after the same
    other one in all but one round of each cycle, and a lane right after a lane of the same
    work finds more of its objects in the caches: 0.82-0.95 for a revision beside itself."""
    count = len(items)
    if not count:
        return []
    first, low, high = [0], 1, count - 1
    while low <= high:
        first.append(low)
        if low != high:
            first.append(high)
        low, high = low + 1, high - 1
    row = round_index % (count if count % 2 == 0 else 2 * count)
    order = [items[(step + row) % count] for step in first]
    return order if row < count else order[::-1]


def fmt_us(us: float) -> str:
    """Microseconds, readable."""
    if us >= 1_000_000:
        return f"{us / 1e6:.2f} s"
    if us >= 10_000:
        return f"{us / 1_000:.1f} ms"
    if us >= 1_000:
        return f"{us / 1_000:.2f} ms"
    return f"{us:.0f} µs" if us >= 100 else f"{us:.1f} µs"


def verdict(ok: bool) -> str:
    """PASS / FAIL."""
    return "PASS" if ok else "FAIL"
