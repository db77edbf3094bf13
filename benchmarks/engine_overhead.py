"""Per-call engine overhead of stenograph, side by side with LangChain's context editing.

One *call* is what a coding agent does around every model request, minus the network:

* stenograph: ``session.append(<tool_result user message>)``, ``session.pre_call(...)`` (runs
  the pre-call handlers and renders the request) and ``session.post_sampling(<assistant
  turn>)`` (appends the response, runs the post-sampling handlers);
* LangChain: append the ``ToolMessage`` objects to the message list, build the
  ``ModelRequest`` the agent's model node builds, run
  ``ContextEditingMiddleware(edits=[ClearToolUsesEdit()]).wrap_model_call`` with a handler that
  returns a prepared ``ModelResponse`` at once (no model), append the ``AIMessage``.

The history is first built (untimed) to N entries / messages with a deterministic synthetic
coding-agent conversation, then warm-up calls run (untimed), then calls are timed one by one
with ``time.perf_counter_ns``. The garbage collector stays enabled, as in a real agent.

Run ``python benchmarks/engine_overhead.py`` (``--quick`` for a smoke run, ``--json`` for
machine-readable results). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if (REPO / "stenograph" / "__init__.py").is_file() and str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # benchmark this checkout, however it is installed

import stenograph  # noqa: E402

SEED = 20_240_917
PRESET = "default"
MODEL = "claude-sonnet-4-5"
T0 = 1_750_000_000.0
PAUSE_SECONDS = 600.0
STENOGRAPH_SIZES = (100, 1_000, 10_000)
QUICK_SIZES = (100, 1_000)
COMPARE_SIZES = (300, 3_000)
CALLS = 400
COMPARE_CALLS = 300
QUICK_CALLS = 20
LC_CALLS = 60
QUICK_LC_CALLS = 4
PAUSE_ROUNDS = 2
AFTER_PAUSE_CALLS = 150
RATIO_TARGET = 3.0
LANGCHAIN_TARGET = 50.0
MAX_GROWTH = 0.10
TIMED, WARM, PAUSED, AFTER = range(4)  # streams of synthetic turns for the timed calls
WARMUP = 2

# ---------------------------------------------------------------------------------------------
# synthetic coding-agent conversation
# ---------------------------------------------------------------------------------------------

WORD_TEXT = (
    "the test fails because handler returns None when the config is missing so I will read "
    "module check imports update function add a guard run pytest again look at traceback fix "
    "path parse value cache entry session request response history render token budget next "
    "let me now first then also this that file line error output expected actual"
)
WORDS = tuple(WORD_TEXT.split())
IDENT_TEXT = (
    "session history entry render token cache config parser handler request response value "
    "index item result store journal state clock event budget window limit offset buffer"
)
IDENTS = tuple(IDENT_TEXT.split())
FILES = [f"/repo/src/app/{a}_{b}.py" for a in IDENTS[:8] for b in ("core", "utils", "api")]
TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": f"{name}: " + " ".join(WORDS[:40]),
        "input_schema": {
            "type": "object",
            "properties": {key: {"type": "string", "description": key} for key in keys},
            "required": list(keys[:1]),
        },
    }
    for name, keys in (
        ("Read", ("file_path", "offset", "limit")),
        ("Bash", ("command", "description", "timeout")),
        ("Grep", ("pattern", "path", "glob", "output_mode")),
        ("Glob", ("pattern", "path")),
        ("Edit", ("file_path", "old_string", "new_string")),
        ("Write", ("file_path", "content")),
    )
]
TOOL_WEIGHTS = {"Read": 40, "Bash": 22, "Grep": 14, "Glob": 6, "Edit": 14, "Write": 4}
SYSTEM_PROMPT = "You are a coding agent working in /repo. " + " ".join(WORDS * 12)


@cache
def make_corpus(size: int = 200_000) -> str:
    """Code-like text (Python and log lines) that tool results and inputs are sliced from."""
    rng = random.Random(SEED)
    lines: list[str] = []
    total = 0
    while total < size:
        a, b, c = (rng.choice(IDENTS) for _ in range(3))
        kind = rng.random()
        if kind < 0.45:
            line = f"    def {a}_{b}(self, {c}: int = {rng.randint(0, 999)}) -> {b.title()}:"
        elif kind < 0.8:
            line = f"        self.{a} = {b}.{c}({rng.randint(0, 99)}, key={a!r})  # {b}"
        else:
            line = f"2025-06-{rng.randint(10, 28)} INFO {a}.{b}: {c} took {rng.random():.3f}s"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


class Synth:
    """Deterministic generator of coding-agent messages (Anthropic format)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.corpus = make_corpus()
        self.pending: list[dict[str, Any]] = []
        self.cache_read = 4_000
        self.ids = 0

    def reseed(self, seed: int) -> None:
        """Draw what follows from ``random.Random(seed)`` (pending calls and ids carry on)."""
        self.rng = random.Random(seed)

    def _text(self, low: int, high: int) -> str:
        """A slice of the corpus with a log-uniform length in [low, high] characters."""
        length = int(math.exp(self.rng.uniform(math.log(low), math.log(high))))
        start = self.rng.randrange(0, len(self.corpus) - length)
        return self.corpus[start : start + length]

    def _prose(self, low: int, high: int) -> str:
        """Assistant / user prose of roughly ``low``-``high`` characters."""
        words: list[str] = []
        target = self.rng.randint(low, high)
        while sum(len(w) + 1 for w in words) < target:
            words.append(self.rng.choice(WORDS))
        return " ".join(words).capitalize() + "."

    def _tool_id(self) -> str:
        """A fresh ``toolu_`` id."""
        self.ids += 1
        return f"toolu_{self.ids:08d}{self.rng.getrandbits(64):016x}"

    def _tool_input(self, name: str) -> dict[str, Any]:
        """Realistic input for one tool call."""
        rng = self.rng
        if name == "Read":
            extra = {"offset": rng.randint(1, 400), "limit": 200} if rng.random() < 0.3 else {}
            return {"file_path": rng.choice(FILES), **extra}
        if name == "Bash":
            command = rng.choice(("pytest -q tests/", "git diff --stat", "ruff check src/"))
            return {"command": f"cd /repo && {command}", "description": self._prose(15, 50)}
        if name == "Grep":
            return {
                "pattern": f"def {rng.choice(IDENTS)}_\\w+",
                "path": "/repo/src",
                "output_mode": "content",
            }
        if name == "Glob":
            return {"pattern": f"**/{rng.choice(IDENTS)}*.py"}
        if name == "Edit":
            return {
                "file_path": rng.choice(FILES),
                "old_string": self._text(60, 600),
                "new_string": self._text(60, 800),
            }
        return {"file_path": rng.choice(FILES), "content": self._text(400, 4_000)}

    def _tool_use(self) -> dict[str, Any]:
        """One ``tool_use`` block."""
        name = self.rng.choices(list(TOOL_WEIGHTS), weights=list(TOOL_WEIGHTS.values()))[0]
        return {
            "type": "tool_use",
            "id": self._tool_id(),
            "name": name,
            "input": self._tool_input(name),
        }

    def assistant(self, tools: bool = True) -> dict[str, Any]:
        """An assistant turn: text, then 1-3 parallel tool calls (or text only)."""
        content: list[dict[str, Any]] = [{"type": "text", "text": self._prose(40, 400)}]
        count = self.rng.choices((1, 2, 3), weights=(60, 28, 12))[0] if tools else 0
        uses = [self._tool_use() for _ in range(count)]
        self.pending = uses
        self.cache_read += self.rng.randint(300, 3_000)
        usage = {
            "input_tokens": self.rng.randint(1, 40),
            "cache_creation_input_tokens": self.rng.randint(200, 3_000),
            "cache_read_input_tokens": self.cache_read,
            "output_tokens": self.rng.randint(40, 900),
        }
        stop = "tool_use" if uses else "end_turn"
        return {
            "role": "assistant",
            "content": content + uses,
            "usage": usage,
            "id": f"msg_{self.rng.getrandbits(64):016x}",
            "model": MODEL,
            "stop_reason": stop,
        }

    def _tool_result(self, use: dict[str, Any]) -> dict[str, Any]:
        """The result of one tool call: 200 B - 8 KB of text, sometimes an error."""
        text = self._text(200, 8_000)
        content: Any = text if self.rng.random() < 0.8 else [{"type": "text", "text": text}]
        block = {"type": "tool_result", "tool_use_id": use["id"], "content": content}
        if self.rng.random() < 0.04:
            block["is_error"] = True
        return block

    def user(self) -> dict[str, Any]:
        """The next user message: the results of the pending calls (sometimes with a text
        block), or a text prompt after a text-only assistant turn."""
        if not self.pending:
            return {"role": "user", "content": [{"type": "text", "text": self._prose(30, 600)}]}
        content = [self._tool_result(use) for use in self.pending]
        if self.rng.random() < 0.03:
            content.append({"type": "text", "text": self._prose(20, 200)})
        self.pending = []
        return {"role": "user", "content": content}

    def turn(self, tools_only: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """(user message, next assistant turn); ~5% of build turns end with text only."""
        user = self.user()
        tools = tools_only or self.rng.random() >= 0.05
        return user, self.assistant(tools=tools)


# ---------------------------------------------------------------------------------------------
# statistics and results
# ---------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100])."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Samples:
    """Timings of one variant, in microseconds."""

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


@dataclass
class Stats(Samples):
    """Per-call timings of one configuration at one history size, in microseconds."""

    size: int = 0
    size_after: int = 0

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (no raw samples)."""
        return {
            "label": self.label,
            "size": self.size,
            "size_after": self.size_after,
            "note": self.note,
            "calls": len(self.values),
            "median_us": round(self.median, 2),
            "p90_us": round(self.p90, 2),
        }


@dataclass
class Plan:
    """``rounds`` fresh histories, each with ``warmup`` untimed then ``calls`` timed calls;
    the first ``pause_rounds`` of them then pause and time ``after_pause`` more calls."""

    rounds: int
    calls: int
    warmup: int = WARMUP
    pause_rounds: int = 0
    after_pause: int = 0


def plan_for(size: int, total_calls: int, unit: float, min_rounds: int = 1) -> Plan:
    """Split ``total_calls`` over fresh histories so that none grows by more than
    ``MAX_GROWTH`` while timed (``unit``: entries or messages added per call)."""
    per_round = max(3, int(size * MAX_GROWTH / unit) - WARMUP)
    rounds = max(min_rounds, math.ceil(total_calls / per_round))
    return Plan(rounds=rounds, calls=math.ceil(total_calls / rounds))


# ---------------------------------------------------------------------------------------------
# stenograph driver
# ---------------------------------------------------------------------------------------------


def stream_seed(stream: int, index: int) -> int:
    """Seed of the ``index``-th call of a stream: the same turn whatever the history size,
    so every size times the same sequence of calls."""
    return (SEED * 10 + stream) * 1_000_000 + index


class Driver:
    """Feeds one conversation; subclasses implement ``_prepare`` and ``_call``."""

    synth: Synth

    def _prepare(self, tools_only: bool) -> tuple[Any, Any]:
        raise NotImplementedError

    def _call(self, inputs: Any, reply: Any) -> int:
        raise NotImplementedError

    def _settle(self) -> None:
        """Untimed, before each timed call: what the model's latency would let finish."""

    def timed_calls(self, count: int, stream: int = TIMED, start: int = 0) -> list[float]:
        """Time ``count`` calls (tool results in, an assistant turn with tool calls out),
        turns ``start``... of ``stream``; µs per call."""
        out = []
        for index in range(start, start + count):
            self.synth.reseed(stream_seed(stream, index))
            inputs, reply = self._prepare(tools_only=True)
            self._settle()
            out.append(self._call(inputs, reply) / 1_000)
        return out


class StenographDriver(Driver):
    """One stenograph session fed with a synthetic conversation, as a host would."""

    def __init__(self, engine: stenograph.Engine, seed: int, state_dir: Path | None) -> None:
        self.synth = Synth(seed)
        self.clock = stenograph.ManualClock(T0)
        self.session = engine.open_session(f"bench-{seed}", state_dir=state_dir, clock=self.clock)

    def _settle(self) -> None:
        """Let background work (the notes writer) finish, as it would during the seconds a
        real model call takes; untimed."""
        self.session.wait_for_background()

    def _prepare(self, tools_only: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """Next (user, assistant) pair; moves the clock like tool run + model latency."""
        user, assistant = self.synth.turn(tools_only)
        self.clock.advance(self.synth.rng.uniform(2.0, 45.0))
        assistant["timestamp"] = self.clock.now + self.synth.rng.uniform(1.0, 30.0)
        return user, assistant

    def _call(self, user: dict[str, Any], assistant: dict[str, Any]) -> int:
        """One timed call; returns nanoseconds."""
        session = self.session
        start = time.perf_counter_ns()
        session.append(user)
        session.pre_call(model=MODEL, system=SYSTEM_PROMPT, tools=TOOLS)
        session.post_sampling(assistant)
        elapsed = time.perf_counter_ns() - start
        self.clock.set(assistant["timestamp"])
        return elapsed

    def build(self, size: int) -> None:
        """Grow the history (untimed) to >= ``size`` entries, ending with a tool call."""
        self._call(*self._prepare(tools_only=True))  # the user's prompt, the first turn
        while len(self.session.history) < size or not self.synth.pending:
            self._call(*self._prepare(tools_only=False))

    def pause(self, seconds: float) -> None:
        """Let the agent sit idle (the next call comes ``seconds`` later)."""
        self.clock.advance(seconds)

    def background_seconds(self, since: int = 0) -> list[float]:
        """Durations of the background notes writes recorded after event ``since``."""
        events = self.session.events[since:]
        return [e.seconds for e in events if type(e).__name__ == "ExtractionFinished"]

    def memorized(self) -> int:
        """Number of memorized entries."""
        return sum(1 for entry in self.session.history if entry.memorized)

    def close(self) -> None:
        """Close the session (saves state when on disk)."""
        self.session.close()


@dataclass
class StenographResult:
    """Steady-state and pause figures of stenograph at one size and storage mode."""

    steady: Stats
    first_after_pause: Stats
    after_pause: Stats


def make_engine(scratch: Path) -> stenograph.Engine:
    """The ``default`` preset as shipped, except that forked-extraction (when the preset has
    it) is forced to its offline backend (no network, even with ANTHROPIC_API_KEY set) and
    writes its notes under ``scratch``."""
    engine = stenograph.Engine.from_preset(PRESET)
    if not any(slot.name == "forked-extraction" for slot in engine.slots):
        return engine
    notes = scratch / "notes" / "{session_id}" / "session-memory.md"
    overrides = {"forked-extraction": {"backend": "offline", "memory_path": str(notes)}}
    return stenograph.Engine.from_preset(PRESET, overrides=overrides)


def run_stenograph(size: int, plan: Plan, scratch: Path, on_disk: bool) -> StenographResult:
    """Time stenograph at ``size`` entries, journaling under ``scratch`` when ``on_disk``."""
    engine = make_engine(scratch)
    mode = "disk" if on_disk else "memory"
    result = StenographResult(
        Stats(f"stenograph {mode}", size=size),
        Stats(f"stenograph {mode} first call after pause", size=size),
        Stats(f"stenograph {mode} calls after pause", size=size),
    )
    background: list[float] = []
    for round_index in range(plan.rounds):
        driver = StenographDriver(
            engine, SEED + size * 1_000 + round_index, scratch / "state" if on_disk else None
        )
        driver.build(size)
        driver.timed_calls(plan.warmup, WARM, round_index * plan.warmup)
        since = len(driver.session.events)
        result.steady.values += driver.timed_calls(plan.calls, TIMED, round_index * plan.calls)
        background += driver.background_seconds(since)
        result.steady.size_after = max(result.steady.size_after, len(driver.session.history))
        if round_index < plan.pause_rounds:
            time_pause(driver, plan, result, round_index)
        driver.close()
        for folder in ("state", "notes"):
            shutil.rmtree(scratch / folder / driver.session.id, ignore_errors=True)
    if background:
        result.steady.note = (
            f"+ background notes: {len(background)} writes,"
            f" median {statistics.median(background) * 1e3:.1f} ms each"
        )
    return result


def time_pause(
    driver: StenographDriver, plan: Plan, result: StenographResult, round_index: int
) -> None:
    """Pause ``PAUSE_SECONDS``, then time the first call (inactivity-memorize acts) and
    ``plan.after_pause`` calls after it."""
    driver.session.wait_for_background()
    driver.pause(PAUSE_SECONDS)
    before = len(driver.session.history)
    result.first_after_pause.values += driver.timed_calls(1, PAUSED, round_index)
    result.first_after_pause.note = f"{driver.memorized():,} of {before:,} entries memorized"
    result.first_after_pause.size_after = len(driver.session.history)
    after = driver.timed_calls(plan.after_pause, AFTER, round_index * plan.after_pause)
    result.after_pause.values += after
    result.after_pause.size_after = len(driver.session.history)


# ---------------------------------------------------------------------------------------------
# LangChain driver
# ---------------------------------------------------------------------------------------------


def langchain_available() -> bool:
    """Whether ``langchain`` (with the agents middleware) and ``langchain-core`` import."""
    try:
        import langchain.agents.middleware  # noqa: F401
        import langchain_core.messages  # noqa: F401
    except ImportError:
        return False
    return True


def to_langchain(message: dict[str, Any], names: dict[str, str]) -> list[Any]:
    """An Anthropic-format message as LangChain message objects (one per tool result).
    ``names`` maps tool_use ids to tool names (filled from assistant turns)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    blocks = message["content"]
    if isinstance(blocks, str):
        blocks = [{"type": "text", "text": blocks}]
    text = "\n".join(b["text"] for b in blocks if b["type"] == "text")
    if message["role"] == "assistant":
        calls = [
            {"name": b["name"], "args": b["input"], "id": b["id"], "type": "tool_call"}
            for b in blocks
            if b["type"] == "tool_use"
        ]
        names.update((c["id"], c["name"]) for c in calls)
        usage = message["usage"]
        total_in = sum(usage[k] for k in usage if k != "output_tokens")
        return [
            AIMessage(
                content=text,
                tool_calls=calls,
                id=message["id"],
                usage_metadata={
                    "input_tokens": total_in,
                    "output_tokens": usage["output_tokens"],
                    "total_tokens": total_in + usage["output_tokens"],
                },
                response_metadata={
                    "model_provider": "anthropic",
                    "model_name": MODEL,
                    "stop_reason": message["stop_reason"],
                },
            )
        ]
    out: list[Any] = []
    for block in blocks:
        if block["type"] == "tool_result":
            content = block["content"]
            out.append(
                ToolMessage(
                    content=content,
                    tool_call_id=block["tool_use_id"],
                    name=names.get(block["tool_use_id"]),
                    status="error" if block.get("is_error") else "success",
                )
            )
    if text:
        out.append(HumanMessage(content=text))
    return out


class LangChainDriver(Driver):
    """A LangChain agent's message list and one ``ContextEditingMiddleware``, driven the way
    ``create_agent``'s model node drives ``wrap_model_call`` on every model call."""

    def __init__(self, seed: int) -> None:
        from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
        from langchain_core.messages import SystemMessage

        self.synth = Synth(seed)
        self.names: dict[str, str] = {}
        self.messages: list[Any] = []
        self.middleware = ContextEditingMiddleware(edits=[ClearToolUsesEdit()])
        self.model = FakeListChatModel(responses=["unused"])
        self.system = SystemMessage(content=SYSTEM_PROMPT)
        self.tools = [
            {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
            for t in TOOLS
        ]
        self.cleared = 0

    def _prepare(self, tools_only: bool) -> tuple[list[Any], Any]:
        """Next (tool/human messages, AI response) as LangChain objects (untimed)."""
        user, assistant = self.synth.turn(tools_only)
        return to_langchain(user, self.names), to_langchain(assistant, self.names)[0]

    def _call(self, inputs: list[Any], reply: Any) -> int:
        """One timed call; returns nanoseconds."""
        from langchain.agents.middleware.types import ModelRequest, ModelResponse

        seen: list[Any] = []

        def handler(request: ModelRequest) -> ModelResponse:
            seen.append(request)
            return ModelResponse(result=[reply])

        start = time.perf_counter_ns()
        self.messages.extend(inputs)
        request = ModelRequest(
            model=self.model,
            messages=self.messages,
            system_message=self.system,
            tools=self.tools,
            state={"messages": self.messages},
        )
        response = self.middleware.wrap_model_call(request, handler)
        self.messages.extend(response.result)
        elapsed = time.perf_counter_ns() - start
        self.cleared = sum(1 for m in seen[0].messages if _was_cleared(m))
        return elapsed

    def build(self, size: int) -> None:
        """Grow the message list (untimed) to >= ``size`` messages, ending with tool calls."""
        tools_only = True  # the first turn: the user's prompt, then tool calls
        while len(self.messages) < size or not self.synth.pending:
            inputs, reply = self._prepare(tools_only)
            self.messages.extend(inputs)
            self.messages.append(reply)
            tools_only = False


def _was_cleared(message: Any) -> bool:
    """Whether the middleware replaced this ToolMessage by its placeholder."""
    return bool(getattr(message, "response_metadata", {}).get("context_editing"))


def run_langchain(size: int, plan: Plan) -> Stats:
    """Time LangChain's context editing at ``size`` messages."""
    from langchain_core.messages.utils import count_tokens_approximately

    stats = Stats("langchain ContextEditingMiddleware(ClearToolUsesEdit)", size=size)
    for round_index in range(plan.rounds):
        driver = LangChainDriver(SEED + size * 1_000 + round_index)
        driver.build(size)
        driver.timed_calls(plan.warmup, WARM, round_index * plan.warmup)
        stats.values += driver.timed_calls(plan.calls, TIMED, round_index * plan.calls)
        stats.size_after = max(stats.size_after, len(driver.messages))
        tokens = count_tokens_approximately(driver.messages)
        stats.note = f"~{tokens:,} approx tokens, {driver.cleared} ToolMessages cleared per call"
    return stats


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """Where the figures come from."""
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "stenograph": getattr(stenograph, "__version__", "?"),
        "gc_enabled": gc.isenabled(),
    }


def fmt(us: float) -> str:
    """Microseconds, readable."""
    return f"{us / 1_000:8.2f} ms" if us >= 10_000 else f"{us:8.1f} µs"


def stats_line(stats: Stats) -> str:
    """One table row."""
    size = f"{stats.size:,}->{stats.size_after:,}" if stats.size_after else f"{stats.size:,}"
    return (
        f"  {size:>15}  median {fmt(stats.median)}  p90 {fmt(stats.p90)}"
        f"  ({len(stats.values)} calls) {stats.note}"
    )


def verdict(ok: bool) -> str:
    """PASS / FAIL."""
    return "PASS" if ok else "FAIL"


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    print(f"machine: {results['machine']}")
    print("\nstenograph per call (append + pre_call + post_sampling), preset 'default'")
    for mode in ("memory", "disk"):
        print(f" {mode}:")
        for row in results["stenograph"][mode]:
            print(stats_line(row["steady"]))
    for mode, ratio in results["ratios"]["stenograph_size"].items():
        small, big = ratio["sizes"]
        target = (
            f"  (target <= {RATIO_TARGET}x: {verdict(ratio['median'] <= RATIO_TARGET)})"
            if big == STENOGRAPH_SIZES[-1]
            else ""
        )
        print(
            f" cost({big:,})/cost({small:,}) {mode}: median {ratio['median']:.2f}x,"
            f" p90 {ratio['p90']:.2f}x{target}"
        )
    print(f"\nafter a {PAUSE_SECONDS:.0f} s pause (inactivity-memorize acts)")
    for mode in ("memory", "disk"):
        print(f" {mode}: first call after the pause / calls after it")
        for row in results["stenograph"][mode]:
            if row["first_after_pause"].values:
                print(stats_line(row["first_after_pause"]))
                print(stats_line(row["after_pause"]))
    print(
        f" (one-time tiktoken encoding load, paid before timing: "
        f"{results['tiktoken_load_ms']:.0f} ms)"
    )
    print_comparison(results)


def print_comparison(results: dict[str, Any]) -> None:
    """The LangChain side-by-side table."""
    print("\nLangChain ContextEditingMiddleware(ClearToolUsesEdit) vs stenograph (memory)")
    if results["langchain"] is None:
        print(
            " skipped: langchain / langchain-core not installed (pip install 'stenograph[bench]')"
        )
        return
    for lc, st in zip(results["langchain"], results["compare_stenograph"], strict=True):
        ratio = lc.median / st.median
        print(stats_line(lc))
        print(stats_line(st))
        print(
            f"  -> LangChain / stenograph at {lc.size:,}: median {ratio:.0f}x,"
            f" p90 {lc.p90 / st.p90:.0f}x"
        )
    ratio = results["ratios"]["langchain_over_stenograph"][str(COMPARE_SIZES[-1])]["median"]
    print(
        f" target: stenograph >= {LANGCHAIN_TARGET:.0f}x less per call at"
        f" {COMPARE_SIZES[-1]:,} messages: {ratio:.0f}x {verdict(ratio >= LANGCHAIN_TARGET)}"
    )


def ratio_of(a: Stats, b: Stats) -> dict[str, float]:
    """a / b for the median and the p90."""
    return {"median": a.median / b.median, "p90": a.p90 / b.p90}


def run_all(quick: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """Every measurement of one run."""
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "stenograph": {},
        "ratios": {},
        "tiktoken_load_ms": warm_tokenizer(),
    }
    with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
        for mode in ("memory", "disk"):
            sizes = QUICK_SIZES if quick else STENOGRAPH_SIZES
            results["stenograph"][mode] = [
                sweep_size(size, mode, Path(tmp), quick, log) for size in sizes
            ]
        results["compare_stenograph"] = compare_sizes(quick, Path(tmp), log)
    results["ratios"]["stenograph_size"] = {
        mode: {
            "sizes": [rows[0]["steady"].size, rows[-1]["steady"].size],
            **ratio_of(rows[-1]["steady"], rows[0]["steady"]),
        }
        for mode, rows in results["stenograph"].items()
    }
    results["langchain"] = run_langchain_sizes(quick, log) if langchain_available() else None
    if results["langchain"] is not None:
        results["ratios"]["langchain_over_stenograph"] = {
            str(lc.size): ratio_of(lc, st)
            for lc, st in zip(results["langchain"], results["compare_stenograph"], strict=True)
        }
    return results


def compare_sizes(quick: bool, scratch: Path, log: Callable[[str], None]) -> list[Stats]:
    """stenograph (in memory) at the sizes compared with LangChain."""
    out = []
    for size in COMPARE_SIZES:
        log(f"stenograph memory at {size:,} entries (comparison)")
        plan = plan_for(size, QUICK_CALLS if quick else COMPARE_CALLS, unit=2)
        out.append(run_stenograph(size, plan, scratch, on_disk=False).steady)
    return out


def sweep_size(
    size: int, mode: str, scratch: Path, quick: bool, log: Callable[[str], None]
) -> dict[str, Stats]:
    """Steady-state and pause figures of stenograph at one size."""
    log(f"stenograph {mode} at {size:,} entries")
    if quick:
        rounds = min(plan_for(size, QUICK_CALLS, unit=2).rounds, 2)
        plan = Plan(rounds, math.ceil(QUICK_CALLS / rounds), pause_rounds=int(size <= 1_000))
    else:
        plan = plan_for(size, CALLS, unit=2)
    plan.after_pause = min(plan.calls, 50)
    if not quick:
        wanted = max(PAUSE_ROUNDS, math.ceil(AFTER_PAUSE_CALLS / plan.after_pause))
        plan.pause_rounds = min(plan.rounds, wanted)
    return asdict_result(run_stenograph(size, plan, scratch, on_disk=mode == "disk"))


def run_langchain_sizes(quick: bool, log: Callable[[str], None]) -> list[Stats]:
    """LangChain's figures at every comparison size."""
    out = []
    for size in COMPARE_SIZES:
        log(f"langchain at {size:,} messages")
        plan = Plan(1, QUICK_LC_CALLS) if quick else plan_for(size, LC_CALLS, unit=2.5)
        out.append(run_langchain(size, plan))
    return out


def warm_tokenizer() -> float:
    """Load the tiktoken encoding once (a one-time cost per process, paid by the first
    memorize in a real agent); returns the milliseconds it took."""
    from stenograph.engine.tokens import count_tiktoken

    start = time.perf_counter_ns()
    count_tiktoken("warm up")
    return (time.perf_counter_ns() - start) / 1e6


def asdict_result(result: StenographResult) -> dict[str, Stats]:
    """A StenographResult as a dict of its three Stats."""
    return {
        "steady": result.steady,
        "first_after_pause": result.first_after_pause,
        "after_pause": result.after_pause,
    }


def to_json(value: Any) -> Any:
    """Results as JSON-ready data (Stats summarised)."""
    if isinstance(value, Stats):
        return value.summary()
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_json(item) for item in value]
    return value


def targets(results: dict[str, Any]) -> dict[str, bool]:
    """Whether each target holds."""
    out = {
        f"ratio_{r['sizes'][1]}_over_{r['sizes'][0]}_{mode}": r["median"] <= RATIO_TARGET
        for mode, r in results["ratios"]["stenograph_size"].items()
        if r["sizes"][1] == STENOGRAPH_SIZES[-1]
    }
    if results["langchain"] is not None:
        key = str(COMPARE_SIZES[-1])
        ratio = results["ratios"]["langchain_over_stenograph"][key]["median"]
        out[f"langchain_over_stenograph_{key}"] = ratio >= LANGCHAIN_TARGET
    return out


def profile(size: int = 10_000, calls: int = 300, top: int = 12) -> None:
    """cProfile stenograph at ``size`` entries: ``calls`` steady calls, then the first call
    after a pause; prints the top entries by cumulative time (the synthetic data
    generation between calls is not profiled)."""
    import cProfile
    import pstats

    warm_tokenizer()
    with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
        driver = StenographDriver(make_engine(Path(tmp)), SEED, None)
        driver.build(size)
        driver.timed_calls(WARMUP)
        steady = cProfile.Profile()
        for _ in range(calls):
            user, assistant = driver._prepare(tools_only=True)
            driver._settle()
            steady.enable()
            driver._call(user, assistant)
            steady.disable()
        driver._settle()
        driver.pause(PAUSE_SECONDS)
        user, assistant = driver._prepare(tools_only=True)
        first = cProfile.Profile()
        first.runcall(driver._call, user, assistant)
        driver.close()
    for title, prof in ((f"{calls} steady calls", steady), ("first call after pause", first)):
        print(f"\n=== stenograph at {size:,} entries: {title} ===")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: few calls, stenograph at 100 and 1,000 entries only",
    )
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--profile", action="store_true", help="only cProfile stenograph at 10,000 entries"
    )
    args = parser.parse_args(argv)
    if args.profile:
        profile()
        return 0
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    results = run_all(args.quick, log)
    results["targets"] = targets(results)
    results["wall_seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(to_json(results), indent=1))
    else:
        print_report(results)
        print(f"\ntargets: {results['targets']}\nwall time {results['wall_seconds']} s")
    return 1 if args.check and not all(results["targets"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
