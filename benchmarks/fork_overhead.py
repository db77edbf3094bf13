"""Main-thread overhead while a forked-extraction fork runs.

Sessions with update-threshold (low thresholds, so it fires) and forked-extraction
(``backend="anthropic"``, ``editMode="rewrite"``) get the real ``anthropic.Anthropic`` client
pointed at a local ``MessagesServer``. The server's ``responder`` holds a fork's request open
(it blocks on a ``threading.Event``) for the sessions whose fork must stay running, and
answers the others at once. The main thread never touches the network: responses are fed to
``post_sampling`` as dicts.

Per call, ``session.pre_call(...)`` + ``session.post_sampling(<assistant dict>)`` is timed on
the main thread (the tool-result ``append`` before it is not), for three kinds of session fed
the same turns, interleaved round by round:

* ``free``: its fork ran to completion before timing; no fork is running;
* ``held``: its fork is running, held open by the server: the fork thread sits in a socket
  read. The timed calls are the same as ``free``'s (negative decisions, nothing filed), so the
  two differ only by the running fork: this pair is the target (held / free <= 1.2x);
* ``held, filing``: a fork is held and every decision is positive, so each call files a
  request that is coalesced and snapshots the context (what a long fork costs the main
  thread when the agent keeps growing the context meanwhile). Reported, not a target.

Run ``python benchmarks/fork_overhead.py [--quick] [--json]``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
from benchlib.engines import engine_of
from benchlib.history import MODEL, SYSTEM_PROMPT, TOOLS, HistoryCache
from benchlib.lanes import SessionLane, interleave
from benchlib.report import Log, cli, finish, machine, warm_tokenizer
from benchlib.stats import fmt_us, ratio, verdict

import stenograph
from stenograph.testing import MessagesServer, Reply
from stenograph.testing.messages_server import RecordedRequest

SIZES = (200, 2_000)
CALLS, QUICK_CALLS = 1_000, 40
TARGET = 1.2
HOLD_LIMIT_S = 600.0  # a held fork is released at the latest after this (never, in practice)
SMALL_USAGE = {  # context size 600 < minimumTokensBetweenUpdate: the decision is negative
    "input_tokens": 10,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 500,
    "output_tokens": 90,
}
KINDS = ("free", "held", "held, filing")
TRIGGER = 9  # the stream of the turn that starts a fork
NOTES = re.compile(r'<notes path="([^"]+)">\n(.*)\n</notes>', re.DOTALL)


class ForkServer:
    """The local Messages API: holds the forks of the sessions it is told to hold, answers
    the others at once with their unchanged notes as a full rewrite."""

    def __init__(self) -> None:
        self.server = MessagesServer()
        self.server.responder = self.respond
        self.gates: dict[str, threading.Event] = {}
        self.arrived: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def hold(self, session_id: str) -> None:
        """Hold the next fork request of ``session_id`` until :meth:`release`."""
        with self.lock:
            self.gates[session_id] = threading.Event()
            self.arrived[session_id] = threading.Event()

    def release(self, session_id: str) -> None:
        """Let the held fork of ``session_id`` get its reply."""
        with self.lock:
            gate = self.gates.pop(session_id, None)
        if gate is not None:
            gate.set()

    def wait_arrived(self, session_id: str, timeout: float = 10.0) -> bool:
        """Wait until the held fork's request is at the server."""
        return self.arrived[session_id].wait(timeout)

    def respond(self, request: RecordedRequest) -> Reply:
        """A fork's request: hold it when told to, then rewrite the notes unchanged."""
        prompt = request.body["messages"][-1]["content"]
        text = prompt if isinstance(prompt, str) else prompt[-1].get("text", "")
        found = NOTES.search(text)
        if found is None:
            return Reply.error(400, "not a fork request")
        path, notes = found.groups()
        session_id = Path(path).parent.name
        with self.lock:
            gate, arrived = self.gates.get(session_id), self.arrived.get(session_id)
        if gate is not None and arrived is not None:
            arrived.set()
            gate.wait(HOLD_LIMIT_S)  # the connection thread blocks; so does the fork's read
        return Reply.text(f"```markdown\n{notes}\n```")

    def close(self) -> None:
        """Release everything and stop serving."""
        for session_id in list(self.gates):
            self.release(session_id)
        self.server.close()


def fork_engine(scratch: Path, client: anthropic.Anthropic) -> stenograph.Engine:
    """update-threshold (init 1,000 / growth 5,000 / 1 tool call) + forked-extraction on the
    anthropic backend, rewrite mode, notes under ``scratch/<session_id>/``."""
    threshold = {
        "minimumMessageTokensToInit": 1_000,
        "minimumTokensBetweenUpdate": 5_000,
        "toolCallsBetweenUpdates": 1,
    }
    fork = {
        "backend": "anthropic",
        "editMode": "rewrite",
        "memoryPath": str(scratch / "{session_id}" / "session-memory.md"),
        "timeoutSeconds": HOLD_LIMIT_S + 60,
        "maxRetries": 0,
        "maxTurns": 2,
    }
    slots = {"update-threshold": threshold, "forked-extraction": fork}
    return engine_of("fork-bench", slots, services={"anthropic": client})


@dataclass
class ForkLane(SessionLane):
    """One kind of session; each history starts (and, for ``free``, finishes) a fork before
    any call is timed."""

    forks: ForkServer | None = None
    positive: int = 0
    held_while_timed: bool = True

    @property
    def holds(self) -> bool:
        """Whether this lane's fork is held while timed."""
        return self.name != "free"

    def open(self, messages: list[dict[str, Any]]) -> None:
        """Fresh session and history; the trigger call starts the fork (held or finished)."""
        assert self.forks is not None
        slug = re.sub(r"[^a-z0-9]+", "-", self.name.lower())
        if self.holds:
            self.forks.hold(f"{slug}-{self.size}-{self.builds}")
        super().open(messages)
        self.run(self.prepare(TRIGGER, self.builds, natural_usage=True))  # positive
        self._settle_fork()

    def _settle_fork(self) -> None:
        """``free``: wait for the fork to finish; held kinds: until it is at the server."""
        assert self.forks is not None
        session = self.session
        if self.holds:
            if not self.forks.wait_arrived(session.id):
                raise RuntimeError(f"{session.id}: the fork did not reach the server")
            return
        if not session.wait_for_background(30):
            raise RuntimeError(f"{session.id}: the fork did not finish")
        if not any(e.kind == "ExtractionFinished" for e in session.events):
            raise RuntimeError(f"{session.id}: the fork failed: {session.events[-1]}")

    def settle(self) -> None:
        """Nothing is awaited: a held fork keeps running, a free one has finished."""

    def prepare(
        self, stream: int, index: int, natural_usage: bool = False
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The next turn, its tool results appended (untimed). ``free`` and ``held`` answer
        with a small usage (negative decision); ``held, filing`` (and the trigger call) keep
        the generator's growing usage (positive)."""
        user, assistant = super().prepare(stream, index)
        if not natural_usage and self.name != "held, filing":
            assistant["usage"] = dict(SMALL_USAGE)
        self.session.append(user)
        return user, assistant

    def run(self, turn: tuple[dict[str, Any], dict[str, Any]]) -> int:
        """``pre_call`` + ``post_sampling`` timed; nanoseconds."""
        assistant, session = turn[1], self.session
        seen = len(session.events)
        start = time.perf_counter_ns()
        session.pre_call(model=MODEL, system=SYSTEM_PROMPT, tools=TOOLS)
        session.post_sampling(assistant)
        elapsed = time.perf_counter_ns() - start
        self.clock.set(assistant["timestamp"])
        events = session.events[seen:]
        self.positive += sum(1 for e in events if e.kind == "ThresholdDecision" and e.extract)
        if self.holds and session.wait_for_background(0):
            self.held_while_timed = False  # the fork ended: the figures would be wrong
        return elapsed

    def close(self) -> None:
        """Release a held fork, let it finish, close the session."""
        if self.session is not None and self.forks is not None:
            self.forks.release(self.session.id)
        super().close()


def run_size(
    size: int, calls: int, engine: stenograph.Engine, forks: ForkServer, log: Log
) -> dict[str, Any]:
    """Every kind at one size, interleaved round by round."""
    histories = HistoryCache()
    lanes = [
        ForkLane(kind, size, histories, engine=engine, by_calls=False, forks=forks)
        for kind in KINDS
    ]
    log(f"{size:,} entries: {len(lanes)} lanes x {calls} calls")
    interleave(lanes, calls)
    for lane in lanes:
        lane.samples.note += f"; {lane.positive} positive decisions"
    by_kind = {lane.name: lane for lane in lanes}
    return {
        "samples": {lane.name: lane.samples for lane in lanes},
        "held_while_timed": all(lane.held_while_timed for lane in lanes if lane.holds),
        "ratios": {
            "held / free": ratio(by_kind["held"].samples, by_kind["free"].samples),
            "held, filing / free": ratio(by_kind["held, filing"].samples, by_kind["free"].samples),
        },
    }


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Every size."""
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "switch_interval_s": sys.getswitchinterval(),
        "tiktoken_load_ms": warm_tokenizer(),
        "sizes": {},
    }
    forks = ForkServer()
    client = anthropic.Anthropic(api_key="x", base_url=forks.server.url, max_retries=0)
    try:
        with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
            engine = fork_engine(Path(tmp), client)
            for size in SIZES:
                calls = QUICK_CALLS if quick else CALLS
                results["sizes"][str(size)] = run_size(size, calls, engine, forks, log)
    finally:
        forks.close()
    results["server_errors"] = [repr(e) for e in forks.server.errors]
    results["targets"] = {
        f"held_over_free_{size}": r["ratios"]["held / free"]["median"] <= TARGET
        and r["held_while_timed"]
        for size, r in results["sizes"].items()
    }
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    print(f"GIL switch interval {results['switch_interval_s'] * 1e3:.0f} ms")
    print("\npre_call + post_sampling per call on the main thread, median / p90")
    for size, r in results["sizes"].items():
        print(f" {int(size):,} entries (fork held throughout: {r['held_while_timed']})")
        for kind, s in r["samples"].items():
            print(f"   {kind:<14} {fmt_us(s.median):>9} / {fmt_us(s.p90):>9}   ({s.note})")
        for name, q in r["ratios"].items():
            target = ""
            if name == "held / free":
                target = f"   target <= {TARGET}x: {verdict(q['median'] <= TARGET)}"
            print(f"   {name:<20} median {q['median']:.2f}x, p90 {q['p90']:.2f}x{target}")
    if results["server_errors"]:
        print(f"server errors: {results['server_errors']}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    return finish(run_all(args.quick, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
