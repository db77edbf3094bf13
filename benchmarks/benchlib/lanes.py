"""Lanes and the interleaved runner: every lane at one size runs on the same history and then
receives the same turns; each round times one call of every lane, in a balanced order (each lane
first and right after each other lane equally often), so a shared machine's drift and
what one lane leaves in the caches fall on all of them alike."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import stenograph
from stenograph.engine.entries import copy_json, make_entry, response_entry
from stenograph.engine.store import check_entry

from .history import (
    MODEL,
    SEED,
    SYSTEM_PROMPT,
    T0,
    TIMED,
    TOOLS,
    WARM,
    HistoryCache,
    Synth,
    stream_seed,
)
from .stats import Samples, balanced

WARMUP = 2
MAX_GROWTH = 0.10  # a history grows by at most this share while timed, then a fresh one
PARTS = ("before the model", "after the model")  # the timed parts of a call of ours


@dataclass
class Lane:
    """One variant at one size, timed call by call. Subclasses say how a history is taken in
    (``open``), what one call is (``prepare``, untimed, then ``run``, timed, in ns) and how a
    history is let go (``close``)."""

    name: str
    size: int
    histories: HistoryCache
    warmup: int = WARMUP
    samples: Samples = field(init=False)
    synth: Synth = field(init=False)
    seed: int = 0
    builds: int = 0
    done: int = 0
    #: untimed work run right before each timed call (``cold_calls.py``'s cache sweep)
    sweep: Callable[[], object] | None = None

    def __post_init__(self) -> None:
        self.samples = Samples(f"{self.name} @ {self.size:,}")
        self.per_build = max(1, int(self.size * MAX_GROWTH / 2))  # each call adds 2 messages

    def timed(self, index: int) -> None:
        """The ``index``-th timed call (on a fresh history when this one grew enough)."""
        if self.builds == 0 or self.done >= self.per_build:
            self.rebuild()
        self.samples.add_ns(self.call(TIMED, index))
        self.done += 1

    def call(self, stream: int, index: int) -> int:
        """One call: the ``index``-th turn of ``stream`` (after ``sweep``, when set, between
        the untimed preparation and the timed call); nanoseconds."""
        turn = self.prepare(stream, index)
        if self.sweep is not None:
            self.sweep()
        return self.run(turn)

    def rebuild(self) -> None:
        """A fresh shared history (untimed), then the warm-up calls."""
        self.close()
        self.seed = SEED + self.size * 1_000 + self.builds
        messages, self.synth = self.histories.get(self.size, self.seed)
        self.open(messages)
        for index in range(self.warmup):
            self.call(WARM, self.builds * self.warmup + index)
        self.builds += 1
        self.done = 0

    def prepare(self, stream: int, index: int) -> Any:
        """The turn to send (untimed): tool results in, an assistant turn calling tools out."""
        self.synth.reseed(stream_seed(stream, index))
        return self.synth.turn(tools_only=True)

    def open(self, messages: list[dict[str, Any]]) -> None:
        """Take in a history (untimed)."""
        raise NotImplementedError

    def run(self, turn: Any) -> int:
        """One timed call; nanoseconds."""
        raise NotImplementedError

    def close(self) -> None:
        """Let the history go."""


def interleave(lanes: Sequence[Lane], calls: int) -> None:
    """``calls`` rounds, each timing one call of every lane in a balanced order; then every
    lane is closed and its samples say how many histories it used."""
    for index in range(calls):
        for lane in balanced(lanes, index):
            lane.timed(index)
    for lane in lanes:
        lane.samples.note = f"{lane.builds} histories, <= {lane.per_build} timed calls each"
        lane.close()


@dataclass
class SessionLane(Lane):
    """stenograph: a session fed as a host feeds it; one call is ``append`` (the tool results),
    ``pre_call`` (handlers, the request rendered) and, after the model call (untimed),
    ``post_sampling`` (the reply appended, handlers). The history is taken in by such
    calls (``by_calls``) or appended as it is; ``pause`` seconds of idling follow it
    (memorize acts on the first warm-up call). ``hold``: the lane keeps each request until
    the next call's ``pre_call`` returned (a host loop's ``request = session.pre_call(...)``),
    so that the session copies the history's list rather than bringing the one it handed
    out before up to date (a wrapper such as ``wrap(client, session)`` lets it go)."""

    engine: stenograph.Engine | None = None
    state_dir: Path | None = None
    by_calls: bool = True
    pause: float = 0.0
    hold: bool = False
    held: Any = None
    session: Any = None
    memorized_at_close: int = 0
    clock: stenograph.ManualClock = field(default_factory=lambda: stenograph.ManualClock(T0))
    parts: dict[str, Samples] = field(init=False)
    last_parts: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.parts = {part: Samples(f"{self.name} {part}") for part in PARTS}

    def open(self, messages: list[dict[str, Any]]) -> None:
        """A new session holding ``messages``."""
        assert self.engine is not None
        self.clock = stenograph.ManualClock(T0)
        slug = re.sub(r"[^a-z0-9]+", "-", self.name.lower())
        self.session = self.engine.open_session(
            f"{slug}-{self.size}-{self.builds}", state_dir=self.state_dir, clock=self.clock
        )
        for user, assistant in zip(messages[::2], messages[1::2], strict=True):
            self.clock.advance(20.0)
            if self.by_calls:
                self.run((user, {**assistant, "timestamp": self.clock.now + 10.0}))
            else:
                self.session.append(user)
                self.session.append(assistant)
        self.session.wait_for_background()
        self.clock.advance(self.pause)

    def prepare(self, stream: int, index: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The next turn; the clock moves like a tool run and a model call, and background
        work finishes (what the model's latency lets it do), all untimed."""
        user, assistant = super().prepare(stream, index)
        self.clock.advance(self.synth.rng.uniform(2.0, 45.0))
        assistant["timestamp"] = self.clock.now + self.synth.rng.uniform(1.0, 30.0)
        self.settle()
        return user, assistant

    def settle(self) -> None:
        """Let the background work already handed over finish (untimed); counts waiting
        for their batch stay queued, as they would through a model call."""
        self.session.wait_for_background(batched=False)

    def run(self, turn: tuple[dict[str, Any], dict[str, Any]]) -> int:
        """append + pre_call, then (untimed: the model call, during which the background
        work ``pre_call`` handed over runs) post_sampling; the sum of the two timed parts,
        each also kept in ``parts``."""
        user, assistant = turn
        session = self.session
        start = time.perf_counter_ns()
        session.append(user)
        request = session.pre_call(model=MODEL, system=SYSTEM_PROMPT, tools=TOOLS)
        if self.hold:
            self.held = request  # the one held before is let go now, as in a host loop
        before = time.perf_counter_ns() - start
        self.settle()
        start = time.perf_counter_ns()
        session.post_sampling(assistant)
        after = time.perf_counter_ns() - start
        self.clock.set(assistant["timestamp"])
        self.last_parts = (before, after)
        return before + after

    def timed(self, index: int) -> None:
        """A timed call (see :meth:`Lane.timed`), its two parts kept in ``parts``."""
        super().timed(index)
        for samples, nanoseconds in zip(self.parts.values(), self.last_parts, strict=True):
            samples.add_ns(nanoseconds)

    def memorized(self) -> int:
        """How many entries are memorized."""
        return sum(1 for entry in self.session.history if entry.memorized)

    def close(self) -> None:
        """Close the session (state saved when on disk), counting its memorized entries."""
        self.held = None
        if self.session is not None:
            self.memorized_at_close = self.memorized()
            self.session.close()
            self.session = None


@dataclass
class FloorLane(Lane):
    """The floor: a wrapper keeping its own list that only copies the new input and the reply
    into it and hands out a copy of the list as the request's messages. It keeps its last
    request until the next call, as a session keeps ``last_request`` (post-sampling hands it
    to the handlers), so that dropping the previous request is timed in both lanes."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    request: dict[str, Any] | None = None

    def open(self, messages: list[dict[str, Any]]) -> None:
        """A private copy of the history."""
        self.messages = copy_json(messages)

    def run(self, turn: tuple[dict[str, Any], dict[str, Any]]) -> int:
        """Copy the input in, the list out, the reply in; timed."""
        user, assistant = turn
        start = time.perf_counter_ns()
        self.messages.append(copy_json(user))
        request = {"model": MODEL, "system": SYSTEM_PROMPT, "tools": TOOLS}
        request["messages"] = list(self.messages)
        self.request = request
        self.messages.append(copy_json(assistant))
        return time.perf_counter_ns() - start


@dataclass
class EntriesLane(FloorLane):
    """A bound below any session: what keeping *checked entries* costs alone. Each message
    is made an ``Entry`` as ``session.append`` / ``post_sampling`` make it (copied, its
    blocks read, its id and timestamp given) and checked as an in-memory session checks it
    (what the journal could not hold refused), its message put at the end of the list
    handed out, which is handed out as it is (as a session's list let go is brought up to
    date): no index, no guard, no phase, no handler, no count."""

    def run(self, turn: tuple[dict[str, Any], dict[str, Any]]) -> int:
        """The input made an entry and sent, the list out, the reply made an entry; timed."""
        user, assistant = turn
        messages = self.messages
        start = time.perf_counter_ns()
        entry = make_entry(user, 0.0)
        check_entry(entry)
        messages.append({"role": entry.role, "content": entry.content})
        request = {"model": MODEL, "system": SYSTEM_PROMPT, "tools": TOOLS}
        request["messages"] = messages
        self.request = request
        entry = response_entry(assistant, 0.0)
        check_entry(entry)
        messages.append({"role": entry.role, "content": entry.content})
        return time.perf_counter_ns() - start
