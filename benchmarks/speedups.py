"""The C twins of the entry path, of ``History.add``, of an in-memory session's
``Session._add`` and of the request list's update (``stenograph._speedups``) beside their
Python twins, in one process, round by round.

* **functions**: the copy (``copy_json``), the JSON check (``check_entry``'s walk) and the
  block scan (``_content`` of copied blocks) of one call's two messages (the tool results
  in, an assistant turn calling tools out), the two made entries whole (``make_entry``,
  ``response_entry``), an entry rebuilt from its journal record (what a resume does per
  entry), and ``History.add`` (a new History taking the history's first
  two entries and the call's two); each timed over a batch of calls, the twins in turn;
* **calls**: the steady call of ``engine_overhead.py`` (floor, ``entries alone``,
  ``inactivity-only``, ``default``) at 100 and 3,000 entries, every lane twice, once on
  each twin (the twin chosen before each of its calls, untimed), all interleaved. The floor
  lane copies with ``copy_json`` too: it gets the C copy as ours does.

Run ``python benchmarks/speedups.py`` (``--quick`` for a smoke run, ``--json`` for
machine-readable results). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib.engines import make_engine
from benchlib.history import HistoryCache, stream_seed
from benchlib.lanes import EntriesLane, FloorLane, Lane, SessionLane, interleave
from benchlib.report import Log, cli, finish, machine, warm_tokenizer
from benchlib.stats import Samples, balanced, fmt_us, ratio

from stenograph.engine import entries, history, session, speedups, store

SIZES, QUICK_SIZES = (100, 3_000), (100,)
CALLS, QUICK_CALLS = 300, 20
ROUNDS, QUICK_ROUNDS = 200, 10
BATCH = 200  # calls of a function per timing
TWINS = {"C": True, "Python": False}
PRESETS = ("inactivity-only", "default")
NOT_BUILT = (
    "stenograph._speedups is not built (no C compiler at install) or STENOGRAPH_PURE_PYTHON is set"
)


def use(compiled: bool) -> None:
    """Run the entry path on the C twins (``compiled``) or the Python ones."""
    assert speedups.C is not None
    entries.C = history.C = session.C = speedups.C if compiled else None
    store._json_ok = speedups.C.is_json if compiled else store._is_json


def functions() -> dict[str, Callable[[], object]]:
    """Each function of the entry path on one call's messages, ready to time."""
    messages, synth = HistoryCache().get(100, 7)
    synth.reseed(stream_seed(1, 3))
    user, assistant = synth.turn(tools_only=True)
    blocks = [entries.copy_json(m["content"]) for m in (user, assistant)]
    made = [entries.make_entry(user, 0.0), entries.response_entry(assistant, 0.0)]
    records = [entry.to_record() for entry in made]
    opening = [entries.make_entry(m, 0.0) for m in messages[:2]]
    return {
        "copy": lambda: [entries.copy_json(m["content"]) for m in (user, assistant)],
        "JSON check": lambda: [store.check_entry(entry) for entry in made],
        "block scan": lambda: [entries._content(b, True) for b in blocks],
        "entries made": lambda: [
            entries.make_entry(user, 0.0),
            entries.response_entry(assistant, 0.0),
        ],
        "entry from record": lambda: [entries.entry_from_record(dict(r)) for r in records],
        "History.add": lambda: add_all(history.History(), [*opening, *made]),
    }


def add_all(into: history.History, made: list[entries.Entry]) -> None:
    """``made`` added to a new History (the row times its making too, on both twins)."""
    for entry in made:
        into.add(entry)


def time_functions(rounds: int) -> dict[str, Any]:
    """Each function on each twin, the twins in a balanced order each round; ns per call of
    both messages."""
    samples = {(name, twin): Samples(f"{name}, {twin}") for name in functions() for twin in TWINS}
    work = functions()
    for index in range(rounds):
        for name, twin in balanced(list(samples), index):
            use(TWINS[twin])
            run = work[name]
            start = time.perf_counter_ns()
            for _ in range(BATCH):
                run()
            samples[name, twin].add_ns((time.perf_counter_ns() - start) // BATCH)
    use(True)
    return {
        name: {
            "samples": {twin: samples[name, twin] for twin in TWINS},
            "python_over_c": ratio(samples[name, "Python"], samples[name, "C"]),
        }
        for name in work
    }


def on_twin(lane: Lane, compiled: bool) -> Lane:
    """``lane`` run on one twin: chosen before each of its timed calls and the history
    builds and warm-ups those start (untimed)."""
    timed = lane.timed

    def run(index: int) -> None:
        use(compiled)
        timed(index)

    lane.timed = run  # type: ignore[method-assign]
    return lane


def lanes_at(size: int, scratch: Path) -> list[Lane]:
    """Every lane at one size on each twin, on one shared history."""
    histories = HistoryCache()
    engines = {preset: make_engine(preset, scratch) for preset in PRESETS}
    lanes: list[Lane] = []
    for twin, compiled in TWINS.items():
        made: list[Lane] = [
            FloorLane(f"floor, {twin}", size, histories),
            EntriesLane(f"entries alone, {twin}", size, histories),
            *(SessionLane(f"{p}, {twin}", size, histories, engine=e) for p, e in engines.items()),
        ]
        lanes += [on_twin(lane, compiled) for lane in made]
    return lanes


def time_calls(sizes: tuple[int, ...], calls: int, scratch: Path, log: Log) -> dict[str, Any]:
    """Every lane at every size; each lane's Python / C ratio and its ratio to its floor."""
    out: dict[str, Any] = {}
    for size in sizes:
        lanes = lanes_at(size, scratch)
        log(f"{size:,} entries: {len(lanes)} lanes x {calls} calls")
        interleave(lanes, calls)
        use(True)
        samples = {lane.name: lane.samples for lane in lanes}
        names = [lane.name.rsplit(", ", 1)[0] for lane in lanes[: len(lanes) // 2]]
        out[str(size)] = {
            "samples": samples,
            "python_over_c": {n: ratio(samples[f"{n}, Python"], samples[f"{n}, C"]) for n in names},
            "over_floor": {
                f"{n}, {t}": ratio(samples[f"{n}, {t}"], samples[f"floor, {t}"])
                for n in names[1:]
                for t in TWINS
            },
        }
    return out


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Functions, then calls."""
    results: dict[str, Any] = {"machine": machine(), "tiktoken_load_ms": warm_tokenizer()}
    if speedups.C is None:
        log(f"skipped: {NOT_BUILT}")
        return {**results, "skipped": NOT_BUILT, "wall_seconds": round(log.elapsed(), 1)}
    log("functions")
    results["functions"] = time_functions(QUICK_ROUNDS if quick else ROUNDS)
    with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
        sizes, calls = (QUICK_SIZES, QUICK_CALLS) if quick else (SIZES, CALLS)
        results["calls"] = time_calls(sizes, calls, Path(tmp), log)
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    if "skipped" in results:
        print(f"skipped: {results['skipped']}")
        return
    print("functions, both messages of a call, median per call (Python / C)")
    for name, row in results["functions"].items():
        c, py = (row["samples"][twin] for twin in ("C", "Python"))
        got = row["python_over_c"]["median"]
        print(f"  {name:<18} C {fmt_us(c.median):>9}  Python {fmt_us(py.median):>9}  {got:5.2f}x")
    for size, row in results["calls"].items():
        print(f"\nthe steady call at {int(size):,} entries, median (Python / C; each to its floor)")
        for name, over in row["python_over_c"].items():
            c, py = (row["samples"][f"{name}, {twin}"] for twin in ("C", "Python"))
            floors = [row["over_floor"].get(f"{name}, {t}") for t in TWINS]
            share = "".join(f"  {f['median']:5.2f}x" for f in floors if f) or ""
            line = f"C {fmt_us(c.median):>9}  Python {fmt_us(py.median):>9}  {over['median']:5.2f}x"
            print(f"  {name:<16} {line}" + (f"   floor: C / Python{share}" if share else ""))


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    return finish(run_all(args.quick, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
