"""What ``stenograph.integrations.anthropic.wrap(client, session)`` adds to each
``messages.create`` call, against the plain SDK call with the same messages.

A local ``MessagesServer`` (in a child process, so its work never competes with the client
for the GIL) answers every request at once with the same few-KB reply: a text block and a
``Write`` tool call. A multi-turn tool loop runs at 10, 100 and 500 messages of history;
every round times one call of each variant, in a balanced order:

* ``direct``: ``client.messages.create(model, max_tokens, system, tools, messages)``;
* ``floor``: the same call through a stand-in wrapper that only copies the new messages and
  dumps the response to a dict, the least any wrapper keeping its own history must do;
* ``wrap(inactivity-only)``: the same call on ``wrap(client, session)``, the session on the
  ``inactivity-only`` preset (in memory);
* ``wrap(default)``: the same on the ``default`` preset, forked-extraction forced offline with
  its notes in a temporary folder; its background notes writer is awaited after the call,
  outside the timed region;
* ``async direct`` and ``async wrap(default)``: the same two calls on ``AsyncAnthropic``, each
  awaited on one long-lived event loop (``run_until_complete``).

The overhead of a wrapped lane is the median of its per-round differences with its direct
lane (``direct``, or ``async direct``): lanes of one round run back to back, so the slow drift
of a shared machine cancels out. The p90 overhead compares the two lanes' p90s.

Timed: the ``create`` call only (for the wrapper: appending the new tool-result message to
the session, pre-call, the SDK call, post-sampling). Not timed: building the history, the
host appending the reply and the next tool result to its message list, waiting for
background work, rebuilding a history that grew by more than 10 %.

Run ``python benchmarks/integration_overhead.py [--quick] [--json]``; see
``benchmarks/README.md``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import anthropic
from benchlib.engines import make_engine
from benchlib.history import MODEL, SYSTEM_PROMPT, T0, TOOLS, HistoryCache
from benchlib.lanes import Lane, interleave
from benchlib.report import Log, cli, finish, machine, quiet_model_deprecation, warm_tokenizer
from benchlib.stats import Samples, fmt_us

import stenograph
from stenograph.engine.entries import copy_json
from stenograph.integrations.anthropic import wrap
from stenograph.testing import MessagesServer, Reply

SIZES = (10, 100, 500)
CALLS = {10: 600, 100: 600, 500: 200}
QUICK_CALLS = {10: 20, 100: 20, 500: 12}
WARMUP = 1
MAX_TOKENS = 1024
TARGET_PERCENT = 5.0
VARIANTS = (
    "direct",
    "floor",
    "wrap(inactivity-only)",
    "wrap(default)",
    "async direct",
    "async wrap(default)",
)
REPLY_TEXT = "I'll write the updated module now, then run the tests again."
TOOL_RESULT = "File written: /repo/src/app/session_core.py (3,120 bytes).\n" * 24


# ---------------------------------------------------------------------------------------------
# the server, in a child process
# ---------------------------------------------------------------------------------------------


def reply_content() -> str:
    """The ~3 KB file content of the reply's Write call."""
    line = "    def render_{0}(self, value: int = {0}) -> str:  # keep the cache warm\n"
    return "".join(line.format(i) for i in range(40))


def serve(conn: Connection) -> None:
    """Child process: serve the same reply to every request until told to stop."""
    quiet_model_deprecation()
    server = MessagesServer()
    server.default = Reply.tool_use(
        "Write",
        {"file_path": "/repo/src/app/session_core.py", "content": reply_content()},
        text=REPLY_TEXT,
    )
    conn.send(server.url)
    conn.recv()
    server.close()


class ServerProcess:
    """The MessagesServer in a spawned child process."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child,), daemon=True)
        self.process.start()
        self.url: str = self.conn.recv()

    def close(self) -> None:
        """Stop the child (by its own process object only)."""
        self.conn.send("stop")
        self.process.join(5)
        if self.process.is_alive():
            self.process.terminate()


# ---------------------------------------------------------------------------------------------
# variants
# ---------------------------------------------------------------------------------------------


def plain(message: dict[str, Any]) -> dict[str, Any]:
    """A synthetic message as a host keeps it: role and content only."""
    return {"role": message["role"], "content": message["content"]}


class FloorClient:
    """The least any wrapper keeping its own history does per call: copy the messages it
    has not seen (as ``Session.append`` does) and turn the response into a plain dict (as
    ``post_sampling`` does). No session, no handlers."""

    def __init__(self, client: anthropic.Anthropic) -> None:
        self.messages = self
        self._client = client
        self._seen = 0

    def create(self, **kwargs: Any) -> Any:
        """``messages.create`` with the floor's bookkeeping around it."""
        messages = kwargs["messages"]
        self._seen = min(self._seen, len(messages))
        copy_json(messages[self._seen :])
        self._seen = len(messages)
        response = self._client.messages.create(**kwargs)
        response.model_dump(mode="json", exclude_none=True)
        return response


def variant_engine(variant: str, scratch: Path) -> stenograph.Engine | None:
    """The engine of a wrapped variant (None for the unwrapped ones)."""
    if "wrap(" not in variant:
        return None
    return make_engine(variant.split("wrap(")[1][:-1], scratch)


@dataclass
class WrapLane(Lane):
    """One variant at one size: a host's message list (and, wrapped, its session)."""

    engine: stenograph.Engine | None = None
    client: Any = None
    loop: asyncio.AbstractEventLoop | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    session: Any = None
    api: Any = None
    starting: Samples = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.starting = Samples(f"{self.name} @ {self.size}, calls starting a notes write")

    def open(self, messages: list[dict[str, Any]]) -> None:
        """The host's list (role and content only) and, wrapped, a session holding it."""
        self.messages = [plain(m) for m in messages]
        self.api = FloorClient(self.client) if self.name == "floor" else self.client
        if self.engine is not None:
            self.clock = stenograph.ManualClock(T0)
            session_id = f"{self.size}-{self.builds}"
            self.session = self.engine.open_session(session_id, state_dir=None, clock=self.clock)
            for message in self.messages:
                self.session.append(message)
            self.api = wrap(self.client, self.session)

    def prepare(self, stream: int, index: int) -> None:
        """The tool results of the last reply's calls, appended to the host's list."""
        last = self.messages[-1]["content"]
        results = [
            {"type": "tool_result", "tool_use_id": block["id"], "content": TOOL_RESULT}
            for block in last
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        self.messages.append({"role": "user", "content": results})
        if self.session is not None:
            self.clock.advance(5.0)
            self.seen = len(self.session.events)

    def run(self, turn: None) -> int:
        """One ``messages.create`` timed, the reply kept; nanoseconds."""
        start = time.perf_counter_ns()
        response = self.api.messages.create(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            system=SYSTEM_PROMPT,
            tools=TOOLS,
            messages=self.messages,
        )
        if self.loop is not None:
            response = self.loop.run_until_complete(response)
        elapsed = time.perf_counter_ns() - start
        content = [block.model_dump(mode="json", exclude_none=True) for block in response.content]
        self.messages.append({"role": "assistant", "content": content})
        if self.session is not None:
            if any(e.kind == "ExtractionStarted" for e in self.session.events[self.seen :]):
                self.starting.add_ns(elapsed)
            self.session.wait_for_background()
        return elapsed

    def close(self) -> None:
        """Close the session."""
        if self.session is not None:
            self.session.close()
            self.session = None


def run_size(size: int, calls: int, clients: Clients, scratch: Path, log: Log) -> dict[str, Any]:
    """Every variant at one size, interleaved round by round."""
    histories = HistoryCache()
    lanes = [
        WrapLane(
            variant,
            size,
            histories,
            warmup=WARMUP,
            engine=variant_engine(variant, scratch),
            client=clients.of(variant),
            loop=clients.loop if variant.startswith("async") else None,
        )
        for variant in VARIANTS
    ]
    log(f"{size} messages: {len(lanes)} variants x {calls} calls")
    interleave(lanes, calls)
    baseline = {lane.name: lane.samples for lane in lanes if "direct" in lane.name}
    return {
        "samples": {lane.name: lane.samples for lane in lanes},
        "overhead": {
            lane.name: overhead(lane.samples, baseline[direct_of(lane.name)])
            for lane in lanes
            if "direct" not in lane.name
        },
        "notes_write_starts": {lane.name: lane.starting for lane in lanes if lane.starting.values},
    }


def direct_of(variant: str) -> str:
    """The lane a variant is compared with."""
    return "async direct" if variant.startswith("async") else "direct"


def overhead(wrapped: Samples, direct: Samples) -> dict[str, float]:
    """What the wrapper adds, in µs and percent of the direct call: the median of the
    per-round differences, and the difference of the p90s."""
    added = statistics.median(w - d for w, d in zip(wrapped.values, direct.values, strict=True))
    return {
        "median_us": added,
        "median_percent": 100 * added / direct.median,
        "p90_us": wrapped.p90 - direct.p90,
        "p90_percent": 100 * (wrapped.p90 - direct.p90) / direct.p90,
    }


class Clients:
    """The sync client, and the async one with the event loop its calls run on."""

    def __init__(self, url: str) -> None:
        self.sync = anthropic.Anthropic(api_key="x", base_url=url, max_retries=0)
        self.loop = asyncio.new_event_loop()
        self.async_ = anthropic.AsyncAnthropic(api_key="x", base_url=url, max_retries=0)

    def of(self, variant: str) -> Any:
        """The client a variant calls."""
        return self.async_ if variant.startswith("async") else self.sync

    def close(self) -> None:
        """Close both clients and the loop."""
        self.sync.close()
        self.loop.run_until_complete(self.async_.close())
        self.loop.close()


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Every size."""
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "tiktoken_load_ms": warm_tokenizer(),
        "sizes": {},
    }
    server = ServerProcess()
    clients = Clients(server.url)
    try:
        with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
            for size in SIZES:
                calls = (QUICK_CALLS if quick else CALLS)[size]
                results["sizes"][str(size)] = run_size(size, calls, clients, Path(tmp), log)
    finally:
        clients.close()
        server.close()
    results["targets"] = {
        f"{variant}_{size}_under_{TARGET_PERCENT:.0f}pct": o["median_percent"] < TARGET_PERCENT
        for size, r in results["sizes"].items()
        for variant, o in r["overhead"].items()
        if "wrap(" in variant
    }
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    print("\nmessages.create per call (local server in a child process), median / p90")
    for size, r in results["sizes"].items():
        print(f" {size} messages of history")
        for variant, s in r["samples"].items():
            print(f"   {variant:<22} {fmt_us(s.median):>9} / {fmt_us(s.p90):>9}   ({s.note})")
        for variant, o in r["overhead"].items():
            ok = o["median_percent"] < TARGET_PERCENT
            verdict = "PASS" if ok else "FAIL"
            print(
                f"   {variant:<22} adds {o['median_us']:+.0f} µs ({o['median_percent']:+.1f} %)"
                f" median, {o['p90_us']:+.0f} µs ({o['p90_percent']:+.1f} %) p90"
                + (f"   target < {TARGET_PERCENT:.0f} %: {verdict}" if "wrap(" in variant else "")
            )
        for variant, s in r["notes_write_starts"].items():
            print(
                f"   {variant}: the {len(s.values)} calls that started a background notes write:"
                f" median {fmt_us(s.median)}, p90 {fmt_us(s.p90)}"
            )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    quiet_model_deprecation()
    return finish(run_all(args.quick, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
