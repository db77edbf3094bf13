"""update-threshold's cost: per decision at 100 vs 10,000 entries, and the whole-session token
counting it does versus one plain tiktoken pass over the same text.

Part 1, **decision cost**: ``session.post_sampling(<assistant turn>)`` timed call by call on
sessions of three presets, at 100 and at 10,000 entries, interleaved round by round (every
round times one call of each (preset, size) in a balanced order):

* ``update-threshold``: a preset holding only update-threshold (defaults 10,000 / 5,000 / 3);
* ``default``: the shipped ``default`` preset with forked-extraction forced ``offline`` and
  its notes in a temporary ``memoryPath``; the background notes writer is awaited outside the
  timed region;
* ``no handlers``: an empty preset, i.e. what ``post_sampling`` costs by itself (the append of
  the response); shown so the handlers' share can be read off.

Part 2, **token counting**: a real session (the few largest in ``../shared/data/transcripts``,
synthetic when absent) is fed entry by entry into a session; after each assistant entry
``history.context_size(estimator)`` is called, as update-threshold does; only those calls are
timed and summed. Compared with ONE ``encoding().encode_ordinary`` over all the text of the
same entries (extracted beforehand, untimed). Both with the recorded usage (the context size
is anchored on it, so little is counted) and with usage stripped (every entry is estimated).

Run ``python benchmarks/threshold_cost.py [--quick] [--json]``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.engines import engine_of, make_engine
from benchlib.history import MODEL, SEED, SYSTEM_PROMPT, T0, TOOLS, HistoryCache
from benchlib.lanes import SessionLane, interleave
from benchlib.report import Log, cli, finish, machine, warm_tokenizer
from benchlib.stats import Samples, balanced, fmt_us, ratio, verdict
from benchlib.transcripts import (
    Conversation,
    largest_real_sessions,
    message_texts,
    no_transcripts_note,
    synthetic_conversation,
)

import stenograph
from stenograph.engine.tokens import count_chars4, encoding

SIZES = (100, 10_000)
CALLS, QUICK_CALLS = 1_000, 40
COUNT_ROUNDS, QUICK_COUNT_ROUNDS = 30, 3
REAL_SESSIONS = 3
DECISION_TARGET = 3.0
COUNTING_TARGET = 2.0
VARIANTS = ("update-threshold", "default", "no handlers")
ESTIMATORS = ("tiktoken", "chars4")


def variant_engine(variant: str, scratch: Path) -> stenograph.Engine:
    """The engine of one variant; notes (``default``) go under ``scratch``."""
    if variant == "no handlers":
        return engine_of("no-handlers", {})
    if variant == "update-threshold":
        return engine_of("update-threshold-only", {"update-threshold": {}})
    return make_engine("default", scratch)


# ---------------------------------------------------------------------------------------------
# part 1: decision cost
# ---------------------------------------------------------------------------------------------


class DecisionLane(SessionLane):
    """A session whose history is appended as it is; only ``post_sampling`` is timed."""

    positive = 0
    background_s: list[float]

    def run(self, turn: tuple[dict[str, Any], dict[str, Any]]) -> int:
        """Tool results in and ``pre_call`` (untimed), then ``post_sampling`` timed;
        background work is awaited before and after, untimed."""
        user, assistant = turn
        session = self.session
        session.append(user)
        session.pre_call(model=MODEL, system=SYSTEM_PROMPT, tools=TOOLS)
        session.wait_for_background()
        seen = len(session.events)
        start = time.perf_counter_ns()
        session.post_sampling(assistant)
        elapsed = time.perf_counter_ns() - start
        self.clock.set(assistant["timestamp"])
        session.wait_for_background()
        for event in session.events[seen:]:
            if event.kind == "ThresholdDecision" and event.extract:
                self.positive += 1
            elif event.kind == "ExtractionFinished":
                self.background_s.append(event.seconds)
        return elapsed


def decision_cost(quick: bool, scratch: Path, log: Log) -> dict[str, Any]:
    """Part 1: post_sampling per call, every (variant, size) interleaved round by round."""
    histories = HistoryCache()
    lanes = []
    for size in SIZES:
        for variant in VARIANTS:
            engine = variant_engine(variant, scratch)
            lane = DecisionLane(variant, size, histories, engine=engine, by_calls=False)
            lane.background_s = []
            lanes.append(lane)
    calls = QUICK_CALLS if quick else CALLS
    log(f"decision cost: {len(lanes)} lanes x {calls} calls (sizes {SIZES})")
    interleave(lanes, calls)
    out: dict[str, Any] = {"lanes": {}, "ratios": {}}
    for lane in lanes:
        lane.samples.note += f"; {lane.positive} positive decisions" + (
            f", {len(lane.background_s)} background writes" if lane.background_s else ""
        )
    for variant in VARIANTS:
        small, big = (next(x for x in lanes if x.name == variant and x.size == s) for s in SIZES)
        out["lanes"][variant] = {str(small.size): small.samples, str(big.size): big.samples}
        out["ratios"][variant] = ratio(big.samples, small.samples)
        if big.background_s:
            out.setdefault("background_ms", {})[variant] = {
                str(lane.size): 1e3 * sorted(lane.background_s)[len(lane.background_s) // 2]
                for lane in (small, big)
            }
    return out


# ---------------------------------------------------------------------------------------------
# part 2: whole-session token counting
# ---------------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """One session's messages with and without usage, and its text (all untimed)."""

    conversation: Conversation
    stripped: list[dict[str, Any]]
    text: str
    texts: list[str]


def prepare(conversation: Conversation) -> Prepared:
    """Strip usage, extract the countable text (untimed)."""
    stripped = [{k: v for k, v in m.items() if k != "usage"} for m in conversation.messages]
    texts = ["\n".join(message_texts(m)) for m in conversation.messages]
    return Prepared(conversation, stripped, "\n".join(texts), texts)


def count_session(
    engine: stenograph.Engine, messages: list[dict[str, Any]], estimator: str
) -> tuple[int, int]:
    """Feed ``messages`` one by one; after each assistant entry call
    ``history.context_size(estimator)``. Returns (ns spent in those calls, the last size)."""
    session = engine.open_session("count", state_dir=None, clock=stenograph.ManualClock(T0))
    spent = size = 0
    for message in messages:
        session.append(message)
        if message.get("role") == "assistant":
            start = time.perf_counter_ns()
            size = session.history.context_size(estimator)
            spent += time.perf_counter_ns() - start
    session.close()
    return spent, size


def plain_pass(text: str, estimator: str) -> tuple[int, int]:
    """ONE pass over all the text: (ns, tokens)."""
    start = time.perf_counter_ns()
    tokens = (
        len(encoding().encode_ordinary(text)) if estimator == "tiktoken" else count_chars4(text)
    )
    return time.perf_counter_ns() - start, tokens


def counting_sessions(log: Log) -> tuple[list[Conversation], str | None]:
    """The largest real sessions, or synthetic ones with a note."""
    real = largest_real_sessions(REAL_SESSIONS)
    if real:
        return real, None
    note = no_transcripts_note()
    log(note)
    sizes = (150, 300, 600)
    return [synthetic_conversation(n, SEED + n) for n in sizes], note


def counting_cost(quick: bool, log: Log) -> dict[str, Any]:
    """Part 2: per session, the counting variants and the plain passes, interleaved."""
    conversations, note = counting_sessions(log)
    engine = variant_engine("no handlers", Path("."))
    rounds = QUICK_COUNT_ROUNDS if quick else COUNT_ROUNDS
    out: dict[str, Any] = {"note": note, "rounds": rounds, "sessions": []}
    for conversation in conversations:
        log(f"token counting: {conversation.name} ({len(conversation.messages)} messages)")
        out["sessions"].append(count_one(engine, prepare(conversation), rounds))
    return out


def count_one(engine: stenograph.Engine, prepared: Prepared, rounds: int) -> dict[str, Any]:
    """Every counting variant of one session, ``rounds`` times, in a balanced order."""
    runs: dict[str, Callable[[], tuple[int, int]]] = {}
    for estimator in ESTIMATORS:
        recorded, stripped = prepared.conversation.messages, prepared.stripped
        runs[f"session {estimator}, recorded usage"] = _counting(engine, recorded, estimator)
        runs[f"session {estimator}, usage stripped"] = _counting(engine, stripped, estimator)
        runs[f"plain {estimator} pass"] = _plain(prepared.text, estimator)
    samples = {name: Samples(name) for name in runs}
    tokens: dict[str, int] = {}
    for index in range(rounds):
        for name in balanced(list(runs), index):
            spent, tokens[name] = runs[name]()
            samples[name].add_ns(spent)
    conversation = prepared.conversation
    result = {
        "session": conversation.name,
        "source": conversation.source,
        "messages": len(conversation.messages),
        "calls": conversation.calls,
        "chars": len(prepared.text),
        "tokens": tokens,
        "samples": samples,
        "ratios": {},
    }
    for estimator in ESTIMATORS:
        plain = samples["plain tiktoken pass"]
        for usage in ("recorded usage", "usage stripped"):
            counted = samples[f"session {estimator}, {usage}"]
            result["ratios"][f"{estimator}, {usage} / plain tiktoken"] = ratio(counted, plain)
    return result


def _counting(
    engine: stenograph.Engine, messages: list[dict[str, Any]], estimator: str
) -> Callable[[], tuple[int, int]]:
    return lambda: count_session(engine, messages, estimator)


def _plain(text: str, estimator: str) -> Callable[[], tuple[int, int]]:
    return lambda: plain_pass(text, estimator)


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def targets(results: dict[str, Any]) -> dict[str, bool]:
    """Whether each target holds (by median)."""
    out = {
        f"decision_{variant}_10000_over_100": r["median"] <= DECISION_TARGET
        for variant, r in results["decision"]["ratios"].items()
        if variant != "no handlers"
    }
    for session in results["counting"]["sessions"]:
        r = session["ratios"]["tiktoken, usage stripped / plain tiktoken"]["median"]
        out[f"counting_{Path(session['session']).stem}_stripped_within_2x"] = r <= COUNTING_TARGET
    return out


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    print(f"(tiktoken load before timing: {results['tiktoken_load_ms']:.0f} ms)")
    decision = results["decision"]
    print("\npart 1: post_sampling per call (µs), interleaved; median / p90")
    for variant, by_size in decision["lanes"].items():
        cells = "   ".join(
            f"{size:>6}: {fmt_us(s.median):>8} / {fmt_us(s.p90):>8} ({s.note})"
            for size, s in by_size.items()
        )
        r = decision["ratios"][variant]
        target = "" if variant == "no handlers" else f" target <= {DECISION_TARGET}x: "
        target += verdict(r["median"] <= DECISION_TARGET) if target else ""
        print(f" {variant:<17} {cells}")
        print(f" {'':<17} 10,000 / 100: median {r['median']:.2f}x, p90 {r['p90']:.2f}x{target}")
    for variant, by_size in decision.get("background_ms", {}).items():
        print(f" background notes write ({variant}, untimed), median: {by_size} ms")
    counting = results["counting"]
    print(f"\npart 2: whole-session token counting ({counting['rounds']} rounds, medians)")
    if counting["note"]:
        print(f" {counting['note']}")
    for session in counting["sessions"]:
        print_counting(session)


def print_counting(session: dict[str, Any]) -> None:
    """One session's counting table."""
    print(
        f" {session['session']} ({session['source']}): {session['messages']} messages,"
        f" {session['calls']} context_size calls, {session['chars']:,} chars of text"
    )
    for name, s in session["samples"].items():
        tokens = session["tokens"].get(name, 0)
        print(f"   {name:<36} {fmt_us(s.median):>9} (p90 {fmt_us(s.p90):>9})  -> {tokens:,}")
    for name, r in session["ratios"].items():
        mark = ""
        if name.startswith("tiktoken, usage stripped"):
            mark = f"  target <= {COUNTING_TARGET}x: {verdict(r['median'] <= COUNTING_TARGET)}"
        print(f"   {name:<44} {r['median']:.2f}x{mark}")


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Both parts."""
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "tiktoken_load_ms": warm_tokenizer(),
    }
    with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
        results["decision"] = decision_cost(quick, Path(tmp), log)
    results["counting"] = counting_cost(quick, log)
    results["targets"] = targets(results)
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    results = run_all(args.quick, Log())
    return finish(results, args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
