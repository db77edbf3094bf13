"""The moments a user waits on: the first call after a pause, start-up, resume, memory.

* **pause**: a session (``default`` preset, in memory) is built to N entries with the
  house synthetic coding-agent conversation (``benchlib``), steady calls are timed, then
  the clock jumps 600 s and the next call (the one where inactivity-memorize acts) is timed;
  each round reports that call and its ratio to the round's median steady call. A second lane
  pauses ``CROWD`` sessions at once, each on its own thread, and reports the slowest call.
* **start-up**: whole processes, interleaved round by round: ``python -c pass`` (the floor),
  ``python -c "import stenograph"`` and ``stenograph --help``.
* **resume**: a journaled session of N entries (appended as they are: no calls, so no notes
  extraction while it is built) is closed, then reopened by id on the ``default`` preset
  (``gc`` enabled, as in a host; the engine built before the clock starts); µs per entry,
  next to the floor lane (parsing the journal's lines with ``json.loads``, gc off).
* **memory**: bytes traced (``tracemalloc``) while a session takes N messages (its calls
  and background work included), each handed over as a fresh copy the host drops after the
  call (so the strings the session shares with it are charged to the session), next to one
  plain deep copy of the same messages as Python objects (text included: ``copy.deepcopy``
  would share the strings); and what the session adds when the host keeps its messages
  (the strings shared, not kept twice). The smaller of two rounds, as a table of the whole
  process (the interned strings' dict, ~1 MB) may grow during one of them.

Run ``python benchmarks/moments.py`` (``--quick`` for a smoke run, ``--json`` for JSON).
See ``benchmarks/README.md``.
"""

from __future__ import annotations

import gc
import json
import marshal
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchlib.engines import make_engine
from benchlib.history import MODEL, PAUSED, SYSTEM_PROMPT, TIMED, TOOLS, HistoryCache
from benchlib.lanes import WARMUP, SessionLane
from benchlib.report import Log, cli, finish, machine, warm_tokenizer
from benchlib.stats import fmt_us, median, medians

PAUSE_SECONDS = 600.0
PAUSE_SIZES, QUICK_PAUSE_SIZES = (1_000, 10_000, 50_000), (300, 1_000)
PAUSE_ROUNDS, QUICK_PAUSE_ROUNDS = 3, 1
STEADY_CALLS, QUICK_STEADY_CALLS = 30, 5
CROWD, CROWD_SIZE, QUICK_CROWD_SIZE = 20, 2_000, 300
START_ROUNDS, QUICK_START_ROUNDS = 10, 2
RESUME_SIZES, QUICK_RESUME_SIZES = (1_000, 10_000, 50_000), (300,)
RESUME_ROUNDS, QUICK_RESUME_ROUNDS = 3, 1
MEMORY_SIZES, QUICK_MEMORY_SIZES = (1_000, 10_000), (300,)
MEMORY_ROUNDS = 2  # the smaller is kept: a process-wide table may grow during one round
TARGETS = {
    "pause_ms": {10_000: 20.0, 50_000: 100.0},
    "start_ms": 80.0,
    "resume_us_per_entry": 25.0,
    "memory_ratio": 1.1,
}


# ---------------------------------------------------------------------------------------------
# the first call after a pause
# ---------------------------------------------------------------------------------------------


def session_lane(
    name: str, size: int, scratch: Path, state: Path | None = None, by_calls: bool = True
) -> SessionLane:
    """Our lane on the ``default`` preset, with a history of its own (taken in by calls, or
    appended as it is without warm-up calls)."""
    engine = make_engine("default", scratch)
    warmup = WARMUP if by_calls else 0
    return SessionLane(
        name, size, HistoryCache(), engine=engine, state_dir=state, by_calls=by_calls, warmup=warmup
    )


def pause_round(lane: SessionLane, steady_calls: int) -> dict[str, float]:
    """A fresh history: median steady call, then the first call after the pause (µs)."""
    lane.rebuild()
    steady = median([lane.call(TIMED, index) / 1_000 for index in range(steady_calls)])
    lane.session.wait_for_background()
    lane.clock.advance(PAUSE_SECONDS)
    first = lane.call(PAUSED, lane.builds) / 1_000
    return {
        "steady_us": steady,
        "pause_us": first,
        "ratio": first / steady,
        "memorized": lane.memorized(),
    }


def pause_lane(sizes: tuple[int, ...], rounds: int, calls: int, scratch: Path, log: Log) -> list:
    """Per size: every round's figures and their medians."""
    out = []
    for size in sizes:
        log(f"pause at {size:,} entries")
        lane = session_lane("pause", size, scratch)
        runs = [pause_round(lane, calls) for _ in range(rounds)]
        lane.close()
        out.append({"size": size, "rounds": runs, **medians(runs)})
    return out


def crowd_lane(size: int, scratch: Path, log: Log) -> dict[str, Any]:
    """``CROWD`` sessions of ``size`` entries pause, then all call at once from their own
    threads: the slowest and the median of those calls (µs)."""
    log(f"{CROWD} sessions of {size:,} entries after a pause, at once")
    lanes = [session_lane(f"crowd {i}", size, scratch) for i in range(CROWD)]
    for lane in lanes:
        lane.rebuild()
        lane.session.wait_for_background()
        lane.clock.advance(PAUSE_SECONDS)
    times: list[float] = [0.0] * CROWD
    go = threading.Barrier(CROWD)

    def call(i: int) -> None:
        turn = lanes[i].prepare(PAUSED, 0)
        go.wait()
        times[i] = lanes[i].run(turn) / 1_000

    threads = [threading.Thread(target=call, args=(i,)) for i in range(CROWD)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for lane in lanes:
        lane.close()
    return {"sessions": CROWD, "size": size, "max_us": max(times), "median_us": median(times)}


# ---------------------------------------------------------------------------------------------
# start-up
# ---------------------------------------------------------------------------------------------


def startup_lane(rounds: int, log: Log) -> dict[str, Any]:
    """Whole-process wall times (ms), the three commands interleaved round by round. Python
    may write its bytecode cache (the untimed first round does), as an installed package
    has it: ``pip install`` compiles it, and ``PYTHONDONTWRITEBYTECODE`` in the calling
    environment would otherwise make every process compile every module again."""
    log("start-up")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    script = shutil.which("stenograph", path=str(Path(sys.executable).parent))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import stenograph": [sys.executable, "-c", "import stenograph"],
        "stenograph --help": [script or "stenograph", "--help"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds + 1):  # the first round warms the page cache, untimed
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True, env=env)
            samples[name].append((time.perf_counter() - start) * 1_000)
    return {name: {"median_ms": median(v[1:]), "runs_ms": v[1:]} for name, v in samples.items()}


# ---------------------------------------------------------------------------------------------
# resume
# ---------------------------------------------------------------------------------------------


def resume_round(size: int, round_index: int, scratch: Path) -> dict[str, float]:
    """Build a journaled session of ``size`` entries, close it, reopen it by id."""
    state = scratch / f"resume-{size}-{round_index}"
    lane = session_lane("resume", size, scratch, state, by_calls=False)
    lane.builds = round_index  # a fresh history per round
    lane.rebuild()
    session_id, entries = lane.session.id, len(lane.session.history)
    lane.close()
    del lane
    engine = make_engine("default", scratch)  # a host builds its engine once, not per session
    gc.collect()
    start = time.perf_counter()
    session = engine.open_session(session_id, state_dir=state)
    seconds = time.perf_counter() - start
    assert len(session.history) == entries
    session.close()
    journal = next(state.glob("*/journal.jsonl"))
    gc.disable()
    start = time.perf_counter()
    with journal.open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    floor = time.perf_counter() - start
    gc.enable()
    del records, session
    shutil.rmtree(state)
    return {
        "entries": entries,
        "us_per_entry": seconds * 1e6 / entries,
        "floor_us_per_entry": floor * 1e6 / entries,
        "ratio": seconds / floor,
    }


def resume_lane(sizes: tuple[int, ...], rounds: int, scratch: Path, log: Log) -> list:
    """Per size: every round and the medians."""
    out = []
    for size in sizes:
        log(f"resume at {size:,} entries")
        runs = [resume_round(size, r, scratch) for r in range(rounds)]
        out.append({"size": size, "rounds": runs, **medians(runs)})
    return out


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------


def memory_round(size: int, scratch: Path) -> dict[str, float]:
    """Bytes a session holds for ``size`` entries (after its calls) and a deep copy's: the
    host handing each message over as a fresh copy it then drops (the session charged for
    all it keeps, the strings it shares included), and the host keeping its messages (what
    the session adds to the process, the strings shared)."""
    lane = session_lane("memory", size, scratch)
    lane.rebuild()
    # each message its own objects, as a host parsing the API's JSON has them (the
    # synthetic turns share strings, which a deep copy of the list would keep shared)
    messages = [marshal.loads(marshal.dumps(entry.message())) for entry in lane.session.history]
    lane.close()
    del lane
    gc.collect()
    tracemalloc.start()
    copied = marshal.loads(marshal.dumps(messages))  # a deep copy, strings included
    deep_copy = tracemalloc.get_traced_memory()[0]
    del copied
    tracemalloc.stop()
    held = session_bytes(messages, size, scratch, dropped=True)
    added = session_bytes(messages, size, scratch, dropped=False)
    return {
        "entries": len(messages),
        "session_bytes": held,
        "deep_copy_bytes": deep_copy,
        "ratio": held / deep_copy,
        "added_bytes": added,
        "added_ratio": added / deep_copy,
    }


def session_bytes(messages: list[dict[str, Any]], size: int, scratch: Path, dropped: bool) -> int:
    """Bytes traced while a session takes ``messages`` (its calls and background work
    included); ``dropped``: each is handed over as a fresh copy the host then drops."""
    engine = make_engine("default", scratch)
    warm_tokenizer()  # a process-wide table, not the session's
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    session = engine.open_session(f"memory-{size}", state_dir=None)
    for message in messages:
        given = marshal.loads(marshal.dumps(message)) if dropped else message
        session.append(given) if given["role"] == "user" else session.post_sampling(given)
        if given["role"] == "user":
            session.pre_call(model=MODEL, system=SYSTEM_PROMPT, tools=TOOLS)
        del given
    session.wait_for_background()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    session.close()
    return held


def memory_lane(size: int, scratch: Path) -> dict[str, float]:
    """The round holding the fewest bytes of ``MEMORY_ROUNDS``."""
    rounds = [memory_round(size, scratch) for _ in range(MEMORY_ROUNDS)]
    return min(rounds, key=lambda r: r["session_bytes"])


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Every lane of one run."""
    with tempfile.TemporaryDirectory(prefix="stenograph-moments-") as tmp:
        scratch = Path(tmp)
        results: dict[str, Any] = {"machine": machine(), "quick": quick}
        results["startup"] = startup_lane(QUICK_START_ROUNDS if quick else START_ROUNDS, log)
        results["pause"] = pause_lane(
            QUICK_PAUSE_SIZES if quick else PAUSE_SIZES,
            QUICK_PAUSE_ROUNDS if quick else PAUSE_ROUNDS,
            QUICK_STEADY_CALLS if quick else STEADY_CALLS,
            scratch,
            log,
        )
        results["crowd"] = crowd_lane(QUICK_CROWD_SIZE if quick else CROWD_SIZE, scratch, log)
        results["resume"] = resume_lane(
            QUICK_RESUME_SIZES if quick else RESUME_SIZES,
            QUICK_RESUME_ROUNDS if quick else RESUME_ROUNDS,
            scratch,
            log,
        )
        log("memory")
        sizes = QUICK_MEMORY_SIZES if quick else MEMORY_SIZES
        results["memory"] = [memory_lane(size, scratch) for size in sizes]
    results["targets"] = targets(results)
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def targets(results: dict[str, Any]) -> dict[str, bool]:
    """Whether each target holds (only the sizes this run measured)."""
    out: dict[str, bool] = {}
    for row in results["pause"]:
        limit = TARGETS["pause_ms"].get(row["size"])
        if limit is not None:
            out[f"pause_{row['size']}"] = row["median_pause_us"] / 1_000 <= limit
    for name in ("import stenograph", "stenograph --help"):
        out[name] = results["startup"][name]["median_ms"] <= TARGETS["start_ms"]
    for row in results["resume"]:
        if row["size"] == 50_000:
            out["resume_50000"] = row["median_us_per_entry"] <= TARGETS["resume_us_per_entry"]
    for row in results["memory"]:
        out[f"memory_{row['entries']}"] = row["ratio"] <= TARGETS["memory_ratio"]
    return out


def print_report(results: dict[str, Any]) -> None:
    """The human-readable report."""
    print("start-up (whole processes, interleaved; median ms)")
    for name, row in results["startup"].items():
        print(f"  {name:<20} {row['median_ms']:7.1f} ms")
    print("\nfirst call after a 600 s pause (inactivity-memorize acts), in memory")
    for row in results["pause"]:
        print(
            f"  {row['size']:>7,} entries: {fmt_us(row['median_pause_us']):>9}"
            f"  steady {fmt_us(row['median_steady_us']):>9}"
            f"  ratio {row['median_ratio']:6.1f}x  ({row['median_memorized']:,.0f} memorized)"
        )
    crowd = results["crowd"]
    print(
        f"  {crowd['sessions']} sessions of {crowd['size']:,} entries at once: slowest call"
        f" {fmt_us(crowd['max_us'])}, median {fmt_us(crowd['median_us'])}"
    )
    print("\nresume (reopen by id, gc enabled) vs parsing the journal (gc off)")
    for row in results["resume"]:
        print(
            f"  {row['size']:>7,} entries: {row['median_us_per_entry']:5.1f} µs/entry"
            f"  floor {row['median_floor_us_per_entry']:5.1f} µs/entry"
            f"  ratio {row['median_ratio']:4.2f}x"
        )
    print("\nmemory of one session (tracemalloc) vs one deep copy of its messages")
    for row in results["memory"]:
        print(
            f"  {row['entries']:>7,} entries: {row['session_bytes'] / 1e6:7.1f} MB"
            f"  deep copy {row['deep_copy_bytes'] / 1e6:7.1f} MB  ratio {row['ratio']:4.2f}x"
            f"  (the host keeping its messages: {row['added_bytes'] / 1e6:7.1f} MB added,"
            f" {row['added_ratio']:4.2f}x)"
        )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    return finish(run_all(args.quick, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
