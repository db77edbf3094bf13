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
from typing import Any

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
    """The cache of one account: entries by prefix hash (the model's name starts each
    chain) with their expiry and TTL."""

    prices: PriceTable
    entries: dict[bytes, tuple[float, float]] = field(default_factory=dict)
    _chains: dict[str, _Chains] = field(default_factory=dict, repr=False)

    def keep_warm(self, request: Request) -> None:
        """Cache the prelude of ``request`` for good (kept warm from outside)."""
        if request.prelude:
            chain = self._chain(request.model, request.segments[: request.prelude])
            self.entries[chain.hashes[-1]] = (float("inf"), float("inf"))

    def send(self, request: Request, index: int = 0) -> CallCost:
        """Process ``request``: what it reads, writes and pays; the cache is updated."""
        chain = self._chain(request.model, request.segments)
        hashes, ends, marks = chain.hashes, chain.ends, chain.marks
        price = self.prices.for_model(request.model)
        read_at = self._longest_hit(request.time, marks, hashes)
        if read_at >= 0:
            self._refresh(request.time, hashes[: read_at + 1])
        read = ends[read_at] if read_at >= 0 else 0
        written_5m = written_1h = read
        for i in marks:
            ttl = request.segments[i].breakpoint
            if ttl is None or i <= read_at or ends[i] < price.min_cacheable_tokens:
                continue
            seconds = TTL_SECONDS[ttl]
            self.entries[hashes[i]] = (request.time + seconds, seconds)
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

    def _chain(self, model: str, segments: tuple[Segment, ...]) -> _Chain:
        chains = self._chains.get(model) or self._chains.setdefault(model, _Chains(model))
        return chains.of(segments)

    def _alive(self, digest: bytes, now: float) -> bool:
        entry = self.entries.get(digest)
        return entry is not None and entry[0] >= now

    def _longest_hit(self, now: float, marks: list[int], hashes: list[bytes]) -> int:
        """Index of the last segment of the longest live prefix reachable from a breakpoint
        (``marks``: the indexes of the segments carrying one)."""
        best = -1
        for i in marks:
            for j in range(i, max(best, i - LOOKBACK), -1):
                if self._alive(hashes[j], now):
                    best = j
                    break
        return best

    def _refresh(self, now: float, hashes: list[bytes]) -> None:
        """A hit at ``now`` refreshes every live entry on the prefix ``hashes``."""
        entries = self.entries
        for key in entries.keys() & hashes:
            expiry, seconds = entries[key]
            if expiry >= now:
                entries[key] = (now + seconds, seconds)


@dataclass
class _Chain:
    """A request's segments, the hash of each prefix, its tokens, and which segments carry
    a breakpoint."""

    segments: list[Segment]
    hashes: list[bytes]
    ends: list[int]
    marks: list[int]


class _Chains:
    """The chains of one model's requests: a request sharing its first segments with one
    of the last two (each call's request extends the one before, a fork's starts as its
    main call's) takes their figures over and computes the rest."""

    KEPT = 2

    def __init__(self, model: str) -> None:
        self.seed = model.encode()
        self.recent: list[_Chain] = []

    def of(self, segments: tuple[Segment, ...]) -> _Chain:
        """The chain of ``segments``."""
        given = list(segments)
        shared, hashes, ends, marks = 0, [], [], []
        for known in self.recent:
            length = common_prefix(known.segments, given)
            if length > shared:
                shared, hashes, ends = length, known.hashes[:length], known.ends[:length]
                marks = [i for i in known.marks if i < length]
        digest = hashes[-1] if hashes else self.seed
        total = ends[-1] if ends else 0
        blake2b = hashlib.blake2b
        for index in range(shared, len(given)):
            segment = given[index]
            digest = blake2b(digest + segment.key.encode(), digest_size=16).digest()
            hashes.append(digest)
            total += segment.tokens
            ends.append(total)
            if segment.breakpoint is not None:
                marks.append(index)
        chain = _Chain(given, hashes, ends, marks)
        self.recent = [chain, *self.recent[: self.KEPT - 1]]
        return chain


def common_prefix(known: list[Any], given: list[Any]) -> int:
    """How many first items ``given`` shares with ``known``, comparing list slices (their
    shared items compare by identity, in C): the whole of the shorter, else searched back
    from its end, where a request that extends another first differs."""
    size = min(len(known), len(given))
    if known[:size] == given[:size]:
        return size
    low, high, step = 0, size, 1  # known[:low] == given[:low] and known[:high] != given[:high]
    while high - step > low:
        if known[: high - step] == given[: high - step]:
            low = high - step
            break
        high, step = high - step, step * 2
    while high - low > 1:
        middle = (low + high) // 2
        if known[:middle] == given[:middle]:
            low = middle
        else:
            high = middle
    return low


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
