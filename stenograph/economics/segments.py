"""From request dicts to simulator segments: one per tool, system block and content block,
with the breakpoints the request carries (or the ones an agent is assumed to set)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..engine.caching import cache_ttl
from ..engine.tokens import content_tokens, count_tiktoken
from .cache import Segment


@dataclass(frozen=True, slots=True)
class Block:
    """A request block before sizing: content key, token estimate, breakpoint, and whether
    it belongs to the prelude (tools and system, whose real size a transcript lacks)."""

    key: str
    estimate: int
    breakpoint: str | None
    prelude: bool


@dataclass
class Segmenter:
    """Splits requests into blocks. Without any ``cache_control`` in a request, breakpoints
    are assumed where Claude Code puts them (``assume``): the system prompt and the last
    two messages, at ``ttl``; a top-level ``cache_control`` marks the last message.
    Digests and estimates are cached per block object."""

    ttl: str = "5m"
    assume: bool = True
    _seen: dict[int, tuple[Any, str, int]] = field(default_factory=dict, repr=False)

    def blocks(self, request: dict[str, Any]) -> list[Block]:
        """The request's blocks in cache-key order: tools, system, messages."""
        out: list[Block] = []
        for tool in request.get("tools") or []:
            out.append(self._block("tool", tool, True))
        system = request.get("system")
        for item in [system] if isinstance(system, str) else system or []:
            out.append(self._block("system", item, True))
        ends = [len(out) - 1]  # where the system prompt and then each message end
        for index, message in enumerate(request.get("messages") or []):
            content = message.get("content")
            items = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for item in items or []:
                out.append(self._block(f"{index}:{message.get('role')}", item, False))
            ends.append(len(out) - 1)
        if any(b.breakpoint for b in out):
            return out
        ttl = cache_ttl(request.get("cache_control"))
        if ttl is not None:
            marks = ends[-1:] if len(ends) > 1 else []
        elif self.assume:
            ttl, marks = self.ttl, [ends[0], *ends[1:][-2:]]
        else:
            return out
        for i in {m for m in marks if m >= 0}:
            out[i] = Block(out[i].key, out[i].estimate, ttl, out[i].prelude)
        return out

    def _block(self, where: str, item: Any, prelude: bool) -> Block:
        cached = self._seen.get(id(item))
        if cached is None or cached[0] is not item:
            marked = isinstance(item, dict) and "cache_control" in item
            plain = {k: v for k, v in item.items() if k != "cache_control"} if marked else item
            text = json.dumps(plain, sort_keys=True, ensure_ascii=False, default=str)
            digest = hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
            if prelude:
                estimate = count_tiktoken(plain if isinstance(plain, str) else text)
            else:
                estimate = content_tokens([plain])
            cached = (item, digest, estimate)
            self._seen[id(item)] = cached
        ttl = cache_ttl(item.get("cache_control")) if isinstance(item, dict) else None
        return Block(f"{where}|{cached[1]}", cached[2], ttl, prelude)


@dataclass
class Sizer:
    """Gives every block a size. "As recorded", a call's recorded total input fixes the
    size of the blocks it is the first to send (the prelude takes up what the estimates of
    the others leave; the others are scaled to fill the rest); blocks seen before keep
    their size. Without a recorded total, a new block is its estimate times the ratio of
    recorded to estimated tokens seen so far."""

    sizes: dict[str, int] = field(default_factory=dict)
    recorded: int = 0
    estimated: int = 0

    @property
    def ratio(self) -> float:
        """Recorded over estimated tokens of the blocks sized from a recorded total."""
        return self.recorded / self.estimated if self.estimated else 1.0

    def segments(
        self, blocks: list[Block], total: int | None = None, prelude: int | None = None
    ) -> tuple[Segment, ...]:
        """``blocks`` as sized segments: sizes of new blocks learned when ``total`` is given
        (the prelude's being ``prelude`` tokens when known)."""
        new = [b for b in blocks if _content_key(b) not in self.sizes]
        if new:
            self._learn(new, blocks, total, prelude)
        return tuple(Segment(b.key, self.sizes[_content_key(b)], b.breakpoint) for b in blocks)

    def _learn(
        self, new: list[Block], blocks: list[Block], total: int | None, known_prelude: int | None
    ) -> None:
        known = sum(self.sizes.get(_content_key(b), 0) for b in blocks)
        room = (total - known) if total is not None else None
        prelude = [b for b in new if b.prelude]
        others = [b for b in new if not b.prelude]
        estimate = sum(b.estimate for b in others)
        if room is None or room <= 0:
            for b in new:
                self.sizes[_content_key(b)] = round(b.estimate * self.ratio)
            return
        if prelude:
            spare = max(0, room - estimate) if known_prelude is None else min(room, known_prelude)
            shares = _split(spare, [b.estimate or 1 for b in prelude])
            for b, size in zip(prelude, shares, strict=True):
                self.sizes[_content_key(b)] = size
            room -= spare
        if others:
            for b, size in zip(others, _split(room, [b.estimate for b in others]), strict=True):
                self.sizes[_content_key(b)] = size
            self.recorded += room
            self.estimated += estimate


def _content_key(block: Block) -> str:
    return block.key.split("|", 1)[1]


def _split(total: int, weights: list[int]) -> list[int]:
    """``total`` in integer shares proportional to ``weights`` (equal when all are 0)."""
    weight = sum(weights)
    if weight <= 0:
        weights, weight = [1] * len(weights), len(weights)
    shares = [total * w // weight for w in weights]
    shares[-1] += total - sum(shares)
    return shares
