"""From request dicts to simulator segments: one per tool, system block and content block,
with the breakpoints the request carries (or the ones an agent is assumed to set)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..engine.caching import cache_ttl
from ..engine.tokens import content_tokens, count_tiktoken
from .cache import Segment, common_prefix


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
    Digests and estimates are cached per block object, each message's blocks per message
    object, and a request whose first messages are the last request's takes their blocks
    over (a replay's requests each extend the one before): a request's messages and their
    content are read as unchanged once seen (a request changes them by new objects)."""

    ttl: str = "5m"
    assume: bool = True
    _seen: dict[int, tuple[Any, str, int]] = field(default_factory=dict, repr=False)
    _messages: dict[int, _Message] = field(default_factory=dict, repr=False)
    _marked: dict[tuple[Block, str], Block] = field(default_factory=dict, repr=False)
    _blocks: dict[Block, Block] = field(default_factory=dict, repr=False)
    _last: _Messages | None = field(default=None, repr=False)

    def blocks(self, request: dict[str, Any]) -> list[Block]:
        """The request's blocks in cache-key order: tools, system, messages."""
        out: list[Block] = []
        for tool in request.get("tools") or []:
            out.append(self._block("tool", tool, True))
        system = request.get("system")
        for item in [system] if isinstance(system, str) else system or []:
            out.append(self._block("system", item, True))
        prelude = len(out)
        ends = [prelude - 1]  # where the system prompt and then each message end
        messages = self._messages_of(list(request.get("messages") or []))
        out += messages.blocks
        ends += [prelude + end - 1 for end in messages.ends[-2:]]
        if messages.marked or any(b.breakpoint for b in out[:prelude]):
            return out
        ttl = cache_ttl(request.get("cache_control"))
        if ttl is not None:
            marks = ends[-1:] if len(ends) > 1 else []
        elif self.assume:
            ttl, marks = self.ttl, [ends[0], *ends[1:][-2:]]
        else:
            return out
        for i in {m for m in marks if m >= 0}:
            out[i] = self._mark(out[i], ttl)
        return out

    def _messages_of(self, messages: list[dict[str, Any]]) -> _Messages:
        """The blocks of ``messages``, those of the first ones shared with the last
        request's taken over."""
        last = self._last
        shared = common_prefix(last.messages, messages) if last is not None else 0
        if last is not None and shared:
            end = last.ends[shared - 1]
            blocks, ends = last.blocks[:end], last.ends[:shared]
            marked = last.marked_upto[:shared]
        else:
            blocks, ends, marked = [], [], []
        for index in range(shared, len(messages)):
            own = self._message(index, messages[index])
            blocks += own.blocks
            ends.append(len(blocks))
            marked.append(own.marked or bool(marked and marked[-1]))
        self._last = _Messages(messages, blocks, ends, marked)
        return self._last

    def _message(self, index: int, message: dict[str, Any]) -> _Message:
        """The blocks of one message at ``index`` (cached per message object)."""
        cached = self._messages.get(id(message))
        if cached is not None and cached.message is message and cached.index == index:
            return cached
        content = message.get("content")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content
        where = f"{index}:{message.get('role')}"
        blocks = [self._block(where, item, False) for item in items or []]
        made = _Message(message, index, blocks, any(b.breakpoint for b in blocks))
        self._messages[id(message)] = made
        return made

    def _mark(self, block: Block, ttl: str) -> Block:
        """``block`` with a breakpoint at ``ttl`` (one object per block and TTL)."""
        marked = self._marked.get((block, ttl))
        if marked is None:
            made = Block(block.key, block.estimate, ttl, block.prelude)
            marked = self._marked[(block, ttl)] = self._blocks.setdefault(made, made)
        return marked

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
        made = Block(f"{where}|{cached[1]}", cached[2], ttl, prelude)
        return self._blocks.setdefault(made, made)  # equal blocks are one object


@dataclass
class _Message:
    """One message's blocks at ``index``, and whether one carries a breakpoint."""

    message: dict[str, Any]
    index: int
    blocks: list[Block]
    marked: bool


@dataclass
class _Messages:
    """The blocks of a request's messages: where each message's end (exclusive), and
    whether a message up to each carries a breakpoint of its own."""

    messages: list[dict[str, Any]]
    blocks: list[Block]
    ends: list[int]
    marked_upto: list[bool]

    @property
    def marked(self) -> bool:
        """Whether any message carries a breakpoint of its own."""
        return bool(self.marked_upto and self.marked_upto[-1])


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
    _last: _Sized | None = field(default=None, repr=False)
    _made: dict[Block, Segment] = field(default_factory=dict, repr=False)

    @property
    def ratio(self) -> float:
        """Recorded over estimated tokens of the blocks sized from a recorded total."""
        return self.recorded / self.estimated if self.estimated else 1.0

    def segments(
        self, blocks: list[Block], total: int | None = None, prelude: int | None = None
    ) -> tuple[Segment, ...]:
        """``blocks`` as sized segments: sizes of new blocks learned when ``total`` is given
        (the prelude's being ``prelude`` tokens when known). The first blocks shared with
        the last call's are its segments (a block, once sized, keeps its size)."""
        last, sizes = self._last, self.sizes
        shared = common_prefix(last.blocks, blocks) if last is not None else 0
        head, tokens = (last.segments[:shared], last.tokens[:shared]) if last else ((), [])
        tail = blocks[shared:]
        new = [b for b in tail if _content_key(b) not in sizes]
        if new:
            known = sum(sizes.get(_content_key(b), 0) for b in tail)
            self._learn(new, (tokens[-1] if tokens else 0) + known, total, prelude)
        made = tuple(self._segment(b) for b in tail)
        running = tokens[-1] if tokens else 0
        for segment in made:
            running += segment.tokens
            tokens.append(running)
        self._last = _Sized(list(blocks), head + made, tokens)
        return self._last.segments

    def _segment(self, block: Block) -> Segment:
        """``block`` sized (one object per block: equal segments are one object)."""
        made = self._made.get(block)
        if made is None:
            made = self._made[block] = Segment(
                block.key, self.sizes[_content_key(block)], block.breakpoint
            )
        return made

    def _learn(
        self, new: list[Block], known: int, total: int | None, known_prelude: int | None
    ) -> None:
        """Size the ``new`` blocks of a call whose other blocks hold ``known`` tokens."""
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


@dataclass
class _Sized:
    """A call's blocks, their segments and the tokens up to the end of each."""

    blocks: list[Block]
    segments: tuple[Segment, ...]
    tokens: list[int]


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
