"""What a replay's calls cost: as recorded, with the preset, and as the file recorded it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..engine.entries import Entry
from ..engine.rendering import merge_run
from .cache import CallCost, Request, Segment, fresh_cache, simulate
from .prices import PriceTable
from .segments import Block, Segmenter, Sizer

TOTAL_KEYS = ("cache_read", "cache_write", "uncached", "output", "cost")


@dataclass
class Call:
    """One model call of a replay: when, which model, both requests, the recorded usage."""

    time: float
    model: str
    full: dict[str, Any]
    sent: dict[str, Any]
    usage: dict[str, int] | None = None
    forks: list[Fork] = field(default_factory=list)
    tokens_full: int = 0
    tokens_sent: int = 0


@dataclass
class Fork:
    """A notes fork's model call after a main call: its request and its output tokens
    (as reported by the fork, or estimated)."""

    time: float
    model: str
    request: dict[str, Any]
    output: int


@dataclass
class Ledger:
    """Collects the calls of a replay; :meth:`economics` prices them."""

    calls: list[Call] = field(default_factory=list)
    _runs: list[tuple[str, list[Any]]] = field(default_factory=list, repr=False)
    _merged: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _seen: int = 0

    def new_conversation(self) -> None:
        """The next calls belong to another session (its history starts empty)."""
        self._runs, self._merged, self._seen = [], [], 0

    def full_messages(self, entries: list[Entry]) -> list[dict[str, Any]]:
        """The request messages of ``entries`` in full (no handler changes), merged as the
        session merges them; earlier messages are built once."""
        for entry in entries[self._seen :]:
            if self._runs and self._runs[-1][0] == entry.role:
                self._runs[-1][1].append(entry.content)
                self._merged[-1] = merge_run(entry.role, self._runs[-1][1])
            else:
                self._runs.append((entry.role, [entry.content]))
                self._merged.append(merge_run(entry.role, [entry.content]))
        self._seen = len(entries)
        return list(self._merged)

    def economics(self, prices: PriceTable) -> Economics:
        """Simulate the prompt cache on both request sequences and price everything.

        The cache before the first call is not in the file: when that call read from the
        cache, what it read is taken as the agent's prelude, kept warm from outside."""
        usages = [c.usage for c in self.calls]
        ttl = detected_ttl(usages)
        warm = next((u.get("cache_read_input_tokens", 0) for u in usages if u), 0)
        segmenter, sizer = Segmenter(ttl), Sizer()
        full = [segmenter.blocks(c.full) for c in self.calls]
        sent = [segmenter.blocks(c.sent) for c in self.calls]
        recorded_sizes = [
            sizer.segments(b, input_total(c.usage), warm or None)
            for c, b in zip(self.calls, full, strict=True)
        ]
        preset_sizes = [sizer.segments(b) for b in sent]
        requests = self._requests(full, recorded_sizes)
        as_recorded = simulate(requests, prices, warm_prelude=warm > 0)
        with_preset, forks = self._with_forks(
            self._requests(sent, preset_sizes), segmenter, sizer, prices, warm > 0
        )
        recorded = [
            recorded_cost(i, c.usage, prices, c.model, ttl)
            for i, c in enumerate(self.calls)
            if c.usage
        ]
        return Economics(as_recorded, with_preset, recorded, prices, ttl, forks)

    def _requests(
        self, blocks: list[list[Block]], sizes: list[tuple[Segment, ...]]
    ) -> list[Request]:
        return [
            Request(
                c.time,
                c.model,
                s,
                (c.usage or {}).get("output_tokens", 0),
                prelude=next((i for i, block in enumerate(b) if not block.prelude), len(b)),
            )
            for c, b, s in zip(self.calls, blocks, sizes, strict=True)
        ]

    def _with_forks(
        self,
        requests: list[Request],
        segmenter: Segmenter,
        sizer: Sizer,
        prices: PriceTable,
        warm: bool,
    ) -> tuple[list[CallCost], list[CallCost]]:
        """The preset's main calls, each followed by its forks, on one cache (a fork reads
        the main thread's prefix and writes what the next main call reads)."""
        cache = fresh_cache(prices, requests, warm)
        main: list[CallCost] = []
        forks: list[CallCost] = []
        for index, (call, request) in enumerate(zip(self.calls, requests, strict=True)):
            main.append(cache.send(request, index))
            for fork in call.forks:
                segments = sizer.segments(segmenter.blocks(fork.request))
                request = Request(fork.time, fork.model, segments, fork.output)
                forks.append(cache.send(request, index))
        return main, forks


@dataclass
class Economics:
    """Per-call costs of the three views, and the price table used."""

    as_recorded: list[CallCost]
    with_preset: list[CallCost]
    recorded_usage: list[CallCost]
    prices: PriceTable
    ttl: str
    forks: list[CallCost] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The documented ``economics`` object."""
        return {
            "as_recorded": view_json(self.as_recorded),
            "with_preset": {**view_json(self.with_preset), "forks": view_json(self.forks)},
            "recorded_usage": view_json(self.recorded_usage),
            "cache_ttl": self.ttl,
            "prices": self.prices.to_json(),
        }


def view_json(calls: list[CallCost]) -> dict[str, Any]:
    """``{"calls": [...], "totals": {...}}`` of one view."""
    rows = [call.to_json() for call in calls]
    totals: dict[str, int | float] = {key: sum(row[key] for row in rows) for key in TOTAL_KEYS}
    totals["cost"] = round(float(totals["cost"]), 6)
    return {"calls": rows, "totals": totals}


def input_total(usage: dict[str, int] | None) -> int | None:
    """Input tokens of a call, cached or not, from its recorded usage."""
    if not usage:
        return None
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key, 0) for key in keys)


def detected_ttl(usages: Any) -> str:
    """The session's TTL: "1h" when any recorded usage wrote to the 1-hour cache, else "5m"."""
    return "1h" if any((u or {}).get("ephemeral_1h_input_tokens") for u in usages) else "5m"


def recorded_cost(
    index: int, usage: dict[str, int], prices: PriceTable, model: str, ttl: str
) -> CallCost:
    """What the recorded usage of one call cost (writes split by TTL when recorded)."""
    write = usage.get("cache_creation_input_tokens", 0)
    write_1h = usage.get("ephemeral_1h_input_tokens")
    if write_1h is None:
        write_1h = write if ttl == "1h" and "ephemeral_5m_input_tokens" not in usage else 0
    call = CallCost(
        index,
        cache_read=usage.get("cache_read_input_tokens", 0),
        cache_write_5m=max(0, write - write_1h),
        cache_write_1h=write_1h,
        uncached=usage.get("input_tokens", 0),
        output=usage.get("output_tokens", 0),
    )
    call.cost = prices.for_model(model).cost(
        call.uncached, call.cache_write_5m, call.cache_write_1h, call.cache_read, call.output
    )
    return call
