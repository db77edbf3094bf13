"""The steady call on cold caches: each call timed right after the process swept its caches,
next to the same call timed warm, at 100 and 3,000 entries.

A host's model call does not follow the last one at once: between them its tools run, its
framework builds messages, the network stack reads the reply. ``clearing_peers.py`` shows
what that does to a call of ours: beside LangChain's middleware (~85 ms of work a call) our
memorized call reads 2-3x what it reads alone. This script measures that effect apart,
with a sweep nobody's code shapes: ``sum()`` over a list of 2,000,000 int objects (~80 MB
read, more than any cache of these machines holds), untimed, right before each timed call
of a *swept* lane. Lanes:

* ``floor`` (``benchlib.lanes.FloorLane``), ``memorized`` (a session on the
  ``inactivity-only`` preset whose history a 600 s pause memorized, as in
  ``clearing_peers.py``), ``default`` (the ``default`` preset, as in ``engine_overhead.py``)
  and ``no-op`` (two clock reads: what coming back to Python at all costs);
* each of them twice: warm (its calls one after another's, as in ``engine_overhead.py``)
  and swept.

The warm lanes run interleaved round by round, then the swept lanes, in blocks of
``BLOCK`` rounds taking turns (a sweep cools every lane, so a warm lane must not follow a
swept one in a round): machine drift falls on both alike. Reported: each lane's median warm
and swept, swept / warm, and each lane's ratio to the floor in the same condition.

Run ``python benchmarks/cold_calls.py`` (``--quick`` for a smoke run, ``--json`` for
machine-readable results). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.engines import make_engine
from benchlib.history import HistoryCache
from benchlib.lanes import FloorLane, Lane, SessionLane
from benchlib.report import Log, cli, finish, machine, warm_tokenizer
from benchlib.stats import balanced, fmt_us, ratio

SIZES, QUICK_SIZES = (100, 3_000), (100,)
CALLS, QUICK_CALLS = 200, 10
BLOCK = 10  # rounds of one condition before the other takes its turn
SWEEP_INTS = 2_000_000
PAUSE_SECONDS = 600.0
CONDITIONS = ("warm", "swept")


@dataclass
class NoOpLane(Lane):
    """Two clock reads: a call that does nothing."""

    def open(self, messages: list[dict[str, Any]]) -> None:
        """Nothing to take in."""

    def prepare(self, stream: int, index: int) -> None:
        """Nothing to prepare."""

    def run(self, turn: None) -> int:
        """Nothing, timed."""
        start = time.perf_counter_ns()
        return time.perf_counter_ns() - start


def sweeper() -> Any:
    """The sweep: ``sum()`` over a list of int objects larger than the caches."""
    ints = list(range(10**9, 10**9 + SWEEP_INTS))  # no small-int cache: an object each
    return lambda: sum(ints)


def lanes_at(size: int, condition: str, scratch: Path, sweep: Any) -> list[Lane]:
    """The four lanes of one condition at one size, on one shared history."""
    histories = HistoryCache()
    memorized = make_engine("inactivity-only")
    default = make_engine("default", scratch)
    lanes: list[Lane] = [
        FloorLane("floor", size, histories),
        SessionLane("memorized", size, histories, engine=memorized, pause=PAUSE_SECONDS),
        SessionLane("default", size, histories, engine=default),
        NoOpLane("no-op", size, histories),
    ]
    for lane in lanes:
        lane.name = f"{lane.name}, {condition}"
        lane.sweep = sweep if condition == "swept" else None
    return lanes


def run_size(size: int, calls: int, scratch: Path, sweep: Any, log: Log) -> dict[str, Any]:
    """Both conditions at one size, in alternating blocks of rounds."""
    by_condition = {c: lanes_at(size, c, scratch, sweep) for c in CONDITIONS}
    log(f"{size:,} entries: 2 x 4 lanes x {calls} calls")
    for start in range(0, calls, BLOCK):
        for lanes in by_condition.values():
            for index in range(start, min(start + BLOCK, calls)):
                for lane in balanced(lanes, index):
                    lane.timed(index)
    out: dict[str, Any] = {"samples": {}, "swept_over_warm": {}, "over_floor": {}}
    for lanes in by_condition.values():
        floor = lanes[0].samples
        for lane in lanes:
            lane.close()
            out["samples"][lane.name] = lane.samples
            out["over_floor"][lane.name] = ratio(lane.samples, floor)
    for warm, swept in zip(*by_condition.values(), strict=True):
        out["swept_over_warm"][warm.name.split(",")[0]] = ratio(swept.samples, warm.samples)
    return out


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Every size."""
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "tiktoken_load_ms": warm_tokenizer(),
        "sweep_ints": SWEEP_INTS,
        "sizes": {},
    }
    sweep = sweeper()
    started = time.perf_counter()
    sweep()
    results["sweep_ms"] = round((time.perf_counter() - started) * 1_000, 1)
    with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
        for size in QUICK_SIZES if quick else SIZES:
            calls = QUICK_CALLS if quick else CALLS
            results["sizes"][str(size)] = run_size(size, calls, Path(tmp), sweep, log)
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    print(f"(sweep: sum() over {results['sweep_ints']:,} ints, {results['sweep_ms']} ms)")
    print("\nper call, median / p90; the ratio to the floor of the same condition (median)")
    for size, r in results["sizes"].items():
        print(f" {int(size):,} entries")
        for name, s in r["samples"].items():
            over = r["over_floor"][name]["median"]
            times = f"{fmt_us(s.median):>9} / {fmt_us(s.p90):>9}"
            print(f"   {name:<20} {times}  {over:6.2f}x the floor")
        for name, got in r["swept_over_warm"].items():
            print(f"   {name:<20} swept / warm {got['median']:5.2f}x")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    return finish(run_all(args.quick, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
