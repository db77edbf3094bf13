"""A simulation of Anthropic's prompt cache, as documented.

A request is a sequence of segments (tools, system blocks, message content blocks) in the
order the API hashes them. A segment carrying a breakpoint (``cache_control``) makes the
prefix up to its end cacheable for its TTL ("5m" or "1h"). Per request:

- **read**: the longest prefix written earlier (same model, same segments), still alive,
  ending at a breakpoint of this request or at most ``LOOKBACK`` segments before one;
- **write**: from there to the last breakpoint whose prefix is at least the model's minimum
  cacheable length (shorter prefixes are never cached);
- **uncached**: the rest, after the last breakpoint;
- a hit refreshes the TTL of every entry on the prefix read; a write starts its entry's TTL.

An agent's prelude (its tools and system prompt, the first ``prelude`` segments) may be
shared with the agent's other sessions and calls, which keep it cached: ``warm_prelude``
starts the simulation with it cached and keeps it so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..engine.caching import TTL_SECONDS
from .prices import PriceTable

LOOKBACK = 20


@dataclass(frozen=True, slots=True)
class Segment:
    """One block of a request: its content key, its size, its breakpoint TTL if any."""

    key: str
    tokens: int
    breakpoint: str | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """One model call: when it was sent, to which model, and its segments."""

    time: float
    model: str
    segments: tuple[Segment, ...]
    output: int = 0
    prelude: int = 0


@dataclass(slots=True)
class CallCost:
    """What one call read from cache, wrote to it (by TTL), sent uncached, and cost."""

    index: int
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    uncached: int = 0
    output: int = 0
    cost: float = 0.0

    @property
    def cache_write(self) -> int:
        """Tokens written to the cache, both TTLs."""
        return self.cache_write_5m + self.cache_write_1h

    @property
    def is_miss(self) -> bool:
        """The call wrote more input to the cache than it read."""
        return self.cache_write > self.cache_read

    def to_json(self) -> dict[str, int | float]:
        """The documented per-call keys: tokens as integers, cost in US dollars."""
        return {
            "index": self.index,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "uncached": self.uncached,
            "output": self.output,
            "cost": round(self.cost, 6),
        }


@dataclass
class PromptCache:
    """The cache of one account: entries by (model, prefix hash) with their expiry."""

    prices: PriceTable
    entries: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def keep_warm(self, request: Request) -> None:
        """Cache the prelude of ``request`` for good (kept warm from outside)."""
        if request.prelude:
            hashes, _ = _prefixes(request.segments[: request.prelude])
            self.entries[(request.model, hashes[-1])] = (float("inf"), float("inf"))

    def send(self, request: Request, index: int = 0) -> CallCost:
        """Process ``request``: what it reads, writes and pays; the cache is updated."""
        hashes, ends = _prefixes(request.segments)
        price = self.prices.for_model(request.model)
        read_at = self._longest_hit(request, hashes)
        if read_at >= 0:
            self._refresh(request, hashes, read_at)
        read = ends[read_at] if read_at >= 0 else 0
        written_5m = written_1h = read
        for i, segment in enumerate(request.segments):
            ttl = segment.breakpoint
            if ttl is None or i <= read_at or ends[i] < price.min_cacheable_tokens:
                continue
            seconds = TTL_SECONDS[ttl]
            self.entries[(request.model, hashes[i])] = (request.time + seconds, seconds)
            if ttl == "1h":
                written_1h = ends[i]
            written_5m = ends[i]
        write_1h = written_1h - read
        write_5m = written_5m - max(read, written_1h)
        total = ends[-1] if ends else 0
        call = CallCost(
            index,
            cache_read=read,
            cache_write_5m=max(0, write_5m),
            cache_write_1h=write_1h,
            output=request.output,
        )
        call.uncached = total - read - call.cache_write
        call.cost = price.cost(
            call.uncached, call.cache_write_5m, call.cache_write_1h, read, call.output
        )
        return call

    def _alive(self, model: str, digest: str, now: float) -> bool:
        entry = self.entries.get((model, digest))
        return entry is not None and entry[0] >= now

    def _longest_hit(self, request: Request, hashes: list[str]) -> int:
        """Index of the last segment of the longest live prefix reachable from a breakpoint."""
        best = -1
        for i, segment in enumerate(request.segments):
            if segment.breakpoint is None:
                continue
            for j in range(i, max(best, i - LOOKBACK), -1):
                if self._alive(request.model, hashes[j], request.time):
                    best = j
                    break
        return best

    def _refresh(self, request: Request, hashes: list[str], upto: int) -> None:
        for j in range(upto + 1):
            key = (request.model, hashes[j])
            entry = self.entries.get(key)
            if entry is not None and entry[0] >= request.time:
                self.entries[key] = (request.time + entry[1], entry[1])


def _prefixes(segments: tuple[Segment, ...]) -> tuple[list[str], list[int]]:
    """The chained hash and the cumulative token count at the end of every segment."""
    hashes: list[str] = []
    ends: list[int] = []
    digest = hashlib.blake2b(digest_size=16)
    total = 0
    for segment in segments:
        digest.update(segment.key.encode())
        digest.update(b"\0")
        hashes.append(digest.copy().hexdigest())
        total += segment.tokens
        ends.append(total)
    return hashes, ends


def simulate(
    requests: list[Request], prices: PriceTable, warm_prelude: bool = False
) -> list[CallCost]:
    """Send ``requests`` in order through a fresh cache (with ``warm_prelude``, the prelude
    of each model's first request kept cached); one CallCost per request."""
    cache = fresh_cache(prices, requests, warm_prelude)
    return [cache.send(request, index) for index, request in enumerate(requests)]


def fresh_cache(prices: PriceTable, requests: list[Request], warm_prelude: bool) -> PromptCache:
    """An empty cache; with ``warm_prelude``, holding for good the prelude of each model's
    first request."""
    cache = PromptCache(prices)
    if warm_prelude:
        for request in {r.model: r for r in reversed(requests)}.values():
            cache.keep_warm(request)
    return cache
