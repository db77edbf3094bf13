"""stenograph's steady call side by side with the floor lane, at 100 / 1,000 / 3,000 / 10,000
entries.

One *call* is what a coding agent does around every model request, minus the network: the
tool results in, the request out, the reply in. Lanes, interleaved round by round on the
same synthetic history and then the same turns:

* ``floor``: a wrapper keeping its own list that only copies the new input and the reply into
  it and hands out a copy of the list (the least any wrapper keeping a history does);
* ``default``: ``session.append`` + ``session.pre_call``, then (untimed: the model call,
  while the background work they handed over runs) ``session.post_sampling``, on the
  ``default`` preset (forked-extraction offline, its background notes writer awaited
  between calls, untimed), ``state_dir=None``; the two timed parts are reported too;
* ``default, request held``: the same, the lane holding each request until the next
  ``pre_call`` returned, as a host loop's ``request = session.pre_call(...)`` does (the
  other lanes let it go, as ``wrap(client, session)`` does: the session then brings the
  list it handed out up to date instead of copying the history's);
* ``inactivity-only``: the same on the ``inactivity-only`` preset;
* ``no handlers``: the same on an empty preset: the engine's own share of the call (the
  entries made, the request rendered and guarded, the phases run with no slot);
* ``entries alone``: a bound below any session, not a session: the two messages made
  entries and checked as a session makes and checks them, their messages put at the end
  of the list handed out (no index, guard, phase, handler or count).

What a session store adds per call is ``store_overhead.py``'s.

Run ``python benchmarks/engine_overhead.py`` (``--quick`` for a smoke run, ``--json`` for
machine-readable results). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from benchlib.engines import engine_of, make_engine
from benchlib.history import HistoryCache
from benchlib.lanes import EntriesLane, FloorLane, Lane, SessionLane, interleave
from benchlib.report import Log, cli, finish, machine, warm_tokenizer
from benchlib.stats import fmt_us, ratio, verdict

SIZES, QUICK_SIZES = (100, 1_000, 3_000, 10_000), (100, 1_000)
CALLS, QUICK_CALLS = 300, 20
FLOOR_TARGETS = {100: 3.0, 1_000: 3.0, 3_000: 2.0, 10_000: 2.0}  # default / floor
SIZE_TARGET = 3.0  # cost(10,000) / cost(100)
PRESETS = ("default", "inactivity-only")  # shipped presets, in memory
HELD = "default, request held"  # the default preset, the host holding each request
OURS = (PRESETS[0], HELD, *PRESETS[1:], "no handlers")  # and no handler: the engine's share
BOUND = "entries alone"  # the entries a session keeps, made and checked: a bound below ours


def lanes_at(size: int, scratch: Path) -> list[Lane]:
    """The floor and our lanes at one size, on one shared history."""
    histories = HistoryCache()
    engines = {p: make_engine(p, scratch) for p in PRESETS}
    engines["no handlers"] = engine_of("no-handlers", {})
    ours = [SessionLane(p, size, histories, engine=engine) for p, engine in engines.items()]
    held = SessionLane(HELD, size, histories, engine=engines["default"], hold=True)
    bound = EntriesLane(BOUND, size, histories)
    return [FloorLane("floor", size, histories), ours[0], held, *ours[1:], bound]


def run_size(size: int, calls: int, scratch: Path, log: Log) -> dict[str, Any]:
    """Every lane at one size, interleaved; our lanes' ratios to the floor."""
    lanes = lanes_at(size, scratch)
    log(f"{size:,} entries: {len(lanes)} lanes x {calls} calls")
    interleave(lanes, calls)
    samples = {lane.name: lane.samples for lane in lanes}
    floor = samples["floor"]
    return {
        "samples": samples,
        "parts": {lane.name: lane.parts for lane in lanes if isinstance(lane, SessionLane)},
        "over_floor": {name: ratio(samples[name], floor) for name in (*OURS, BOUND)},
    }


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Every size."""
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "tiktoken_load_ms": warm_tokenizer(),
        "sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
        for size in QUICK_SIZES if quick else SIZES:
            results["sizes"][str(size)] = run_size(
                size, QUICK_CALLS if quick else CALLS, Path(tmp), log
            )
    sizes = results["sizes"]
    if "100" in sizes and "10000" in sizes:
        big, small = (sizes[s]["samples"]["default"] for s in ("10000", "100"))
        results["size_ratio"] = ratio(big, small)
    results["targets"] = targets(results)
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def targets(results: dict[str, Any]) -> dict[str, bool]:
    """Whether each target holds (by median)."""
    out = {
        f"default_over_floor_{size}": r["over_floor"]["default"]["median"]
        <= FLOOR_TARGETS[int(size)]
        for size, r in results["sizes"].items()
    }
    if "size_ratio" in results:
        out["cost_10000_over_100"] = results["size_ratio"]["median"] <= SIZE_TARGET
    return out


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    print(f"(tiktoken load before timing: {results['tiktoken_load_ms']:.0f} ms)")
    print("\nper call, median / p90, and the ratio to the floor lane (median)")
    for size, r in results["sizes"].items():
        print(f" {int(size):,} entries")
        for name, s in r["samples"].items():
            over = r["over_floor"].get(name)
            share = f"  {over['median']:5.2f}x the floor" if over else ""
            print(f"   {name:<26} {fmt_us(s.median):>9} / {fmt_us(s.p90):>9}{share}  ({s.note})")
            for part, p in r["parts"].get(name, {}).items():
                print(f"     {part:<24} {fmt_us(p.median):>9} / {fmt_us(p.p90):>9}")
        limit = FLOOR_TARGETS[int(size)]
        got = r["over_floor"]["default"]["median"]
        print(f"   target default <= {limit}x the floor: {verdict(got <= limit)}")
    if "size_ratio" in results:
        got = results["size_ratio"]["median"]
        print(
            f" cost(10,000) / cost(100), default: {got:.2f}x "
            f"(target <= {SIZE_TARGET}x: {verdict(got <= SIZE_TARGET)})"
        )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    return finish(run_all(args.quick, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
