"""Shared plumbing of the benchmarks ``threshold_cost.py``, ``fork_overhead.py``,
``edit_modes.py`` and ``integration_overhead.py``: the command line, statistics, the machine
description, the real transcripts (with a synthetic fall-back) and the synthetic coding-agent
conversation of ``engine_overhead.py`` (imported from there, not copied).

Not a benchmark itself.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if (REPO / "stenograph" / "__init__.py").is_file() and str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # benchmark this checkout, however it is installed
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from engine_overhead import (  # noqa: E402  (the house synthetic conversation)
    MODEL,
    SEED,
    SYSTEM_PROMPT,
    T0,
    TOOLS,
    Samples,
    Synth,
    stream_seed,
)
from engine_overhead import machine as engine_machine  # noqa: E402

from stenograph.engine.tokens import collect_text  # noqa: E402

__all__ = [
    "MODEL",
    "SEED",
    "SYSTEM_PROMPT",
    "T0",
    "TOOLS",
    "Samples",
    "Synth",
    "cli",
    "machine",
    "synthetic_history",
    "stream_seed",
]

# The real transcripts (never copied); STENOGRAPH_BENCH_TRANSCRIPTS points elsewhere (a missing
# folder exercises the synthetic fall-back).
TRANSCRIPTS = Path(
    os.environ.get("STENOGRAPH_BENCH_TRANSCRIPTS", REPO.parent / "shared" / "data" / "transcripts")
)
DEMO = REPO / "examples" / "demo-session.jsonl"


# ---------------------------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------------------------


def ratio(a: Samples, b: Samples) -> dict[str, float]:
    """a / b for the median and the p90."""
    return {"median": a.median / b.median, "p90": a.p90 / b.p90}


def rotated(items: Sequence[Any], round_index: int) -> list[Any]:
    """``items`` rotated by ``round_index``: each variant goes first in turn, so no variant
    always runs right after the same other one."""
    if not items:
        return []
    shift = round_index % len(items)
    return [*items[shift:], *items[:shift]]


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


# ---------------------------------------------------------------------------------------------
# machine, command line, output
# ---------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """Where the figures come from: engine_overhead's description plus the SDK's and
    tiktoken's versions."""
    import anthropic
    import tiktoken

    return {
        **engine_machine(),
        "anthropic": anthropic.__version__,
        "tiktoken": getattr(tiktoken, "__version__", "?"),
    }


def cli(doc: str, argv: list[str] | None = None) -> argparse.Namespace:
    """``--quick`` and ``--json``, as every benchmark here takes them."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (~15 s)")
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    return parser.parse_args(argv)


class Log:
    """Progress lines on stderr, stamped with the seconds since the start."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {message}", file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.started


def to_json(value: Any) -> Any:
    """Results as JSON-ready data (Samples summarised, floats rounded)."""
    if isinstance(value, Samples):
        return value.summary()
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, Path):
        return str(value)
    return value


def finish(results: dict[str, Any], as_json: bool, report: Callable[[dict[str, Any]], None]) -> int:
    """Print the report (or the JSON); exit status 0."""
    if as_json:
        print(json.dumps(to_json(results), indent=1, ensure_ascii=False))
    else:
        report(results)
        print(f"\ntargets: {results.get('targets')}\nwall time {results['wall_seconds']} s")
    return 0


def quiet_model_deprecation() -> None:
    """The SDK warns that the house model name is deprecated; irrelevant to a local server."""
    warnings.filterwarnings(
        "ignore", message=r"The model .* is deprecated", category=DeprecationWarning
    )


def messages_server() -> Any:
    """A ``stenograph.testing.MessagesServer`` whose connections send without Nagle's delay.

    The test server writes a response's headers and body in two ``send`` calls; with Nagle's
    algorithm on, the body waits for the client's delayed ACK of the headers: ~40 ms per
    reply on Linux, which would swamp everything measured here. ``disable_nagle_algorithm``
    is the standard ``socketserver.StreamRequestHandler`` switch (TCP_NODELAY); set on the
    server's handler class in this process only.
    """
    from stenograph.testing import MessagesServer
    from stenograph.testing import messages_server as module

    module._Handler.disable_nagle_algorithm = True
    return MessagesServer()


def warm_tokenizer() -> float:
    """Load the tiktoken encoding once (a one-time cost per process); milliseconds taken."""
    from stenograph.engine.tokens import count_tiktoken

    start = time.perf_counter_ns()
    count_tiktoken("warm up")
    return (time.perf_counter_ns() - start) / 1e6


# ---------------------------------------------------------------------------------------------
# conversations
# ---------------------------------------------------------------------------------------------


def synthetic_history(size: int, seed: int) -> tuple[list[dict[str, Any]], Synth]:
    """A synthetic coding-agent history of >= ``size`` messages ending with an assistant turn
    that calls tools, and the generator positioned to continue it (its next user message
    answers those calls)."""
    synth = Synth(seed)
    messages: list[dict[str, Any]] = []
    tools_only = True  # the user's prompt, then tool calls
    while len(messages) < size or not synth.pending:
        user, assistant = synth.turn(tools_only)
        messages += [user, assistant]
        tools_only = False
    return messages, synth


class HistoryCache:
    """Synthetic histories built once per (size, seed) and shared by every variant, so all
    variants at one size run on the same history and then receive the same turns."""

    def __init__(self) -> None:
        self._built: dict[tuple[int, int], tuple[list[dict[str, Any]], Synth]] = {}

    def get(self, size: int, seed: int) -> tuple[list[dict[str, Any]], Synth]:
        """The messages (shared, read-only) and a private copy of the positioned generator."""
        key = (size, seed)
        if key not in self._built:
            self._built[key] = synthetic_history(size, seed)
        messages, synth = self._built[key]
        return messages, copy.deepcopy(synth)

    def drop(self, size: int, seed: int) -> None:
        """Forget one history (memory)."""
        self._built.pop((size, seed), None)


def claude_code_files() -> list[Path]:
    """Claude Code JSONL files under the shared transcripts folder (empty when absent)."""
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(TRANSCRIPTS.rglob("*.jsonl"), key=lambda p: p.stat().st_size, reverse=True)


def countable_chars(messages: Iterable[dict[str, Any]]) -> int:
    """Characters stenograph would count in these messages (media excluded)."""
    return sum(len(text) for message in messages for text in message_texts(message))


def message_texts(message: dict[str, Any]) -> list[str]:
    """The text stenograph's token estimate counts for one message, block by block: text,
    thinking, tool name and JSON input, tool result content; media blocks are skipped (they
    count a flat rate). Mirrors ``stenograph.engine.tokens.content_tokens``."""
    out: list[str] = []
    collect_text(message.get("content"), out)
    return out


@dataclass
class Conversation:
    """A recorded (or synthetic) conversation as Anthropic message dicts."""

    name: str
    messages: list[dict[str, Any]]
    source: str  # "real", "demo" or "synthetic"

    @property
    def calls(self) -> int:
        """Assistant messages (model calls)."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")


def largest_real_sessions(count: int, candidates: int = 12) -> list[Conversation]:
    """The ``count`` Claude Code sessions with the most countable text, among the
    ``candidates`` largest files (empty when the transcripts folder is absent)."""
    from stenograph.integrations.transcripts import TranscriptError, read_transcript

    found = []
    for path in claude_code_files()[:candidates]:
        try:
            transcript = read_transcript(path)
        except TranscriptError:
            continue
        if transcript.format != "claude-code-jsonl" or not transcript.messages:
            continue
        found.append(
            (
                countable_chars(transcript.messages),
                Conversation(path.name, transcript.messages, "real"),
            )
        )
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [conversation for _, conversation in found[:count]]


def demo_conversation() -> Conversation:
    """The bundled demo transcript ``examples/demo-session.jsonl``."""
    from stenograph.integrations.transcripts import read_transcript

    return Conversation(DEMO.name, read_transcript(DEMO).messages, "demo")


def synthetic_conversation(size: int, seed: int) -> Conversation:
    """A synthetic stand-in for a real session (used when the transcripts are absent)."""
    messages, _ = synthetic_history(size, seed)
    return Conversation(f"synthetic-{size}", messages, "synthetic")


def no_transcripts_note() -> str:
    """The note printed when the real transcripts are absent."""
    return (
        f"note: {TRANSCRIPTS} is absent; using synthetic sessions instead of real ones"
        " (figures are not comparable with the README's)"
    )
