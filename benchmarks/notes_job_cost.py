"""Background cost of one notes extraction on a stored session, by history length.

A session on the ``default`` preset (forked-extraction on its offline backend) kept in a
folder store holds a synthetic history of N entries, appended as it is; then it gets
``CALLS`` calls (tool results appended, ``pre_call``, ``post_sampling``), each of the two
steps followed by ``wait_for_background()``. update-threshold files an extraction on some
of them; the background writer runs it (snapshot, job, extraction lease, offline notes,
the notes and their journal record committed). Per extraction this reports the wall and process-CPU
seconds of the waits (the main thread is blocked meanwhile, so the CPU is the writer's)
and the notes job's own ``seconds`` (the notes written, as ``ExtractionFinished`` says).
A long session must not pay per extraction in proportion to its length beyond what the
writer itself needs.

    .venv/bin/python benchmarks/notes_job_cost.py [--quick] [--json] [--sizes 1000,10000]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib.engines import make_engine
from benchlib.history import MODEL, SYSTEM_PROMPT, TIMED, TOOLS, HistoryCache
from benchlib.lanes import SessionLane
from benchlib.report import Log, finish, machine, parser, warm_tokenizer

from stenograph import ExtractionFinished

SIZES, QUICK_SIZES = (1_000, 10_000, 50_000), (200, 1_000)
CALLS, QUICK_CALLS = 30, 8


def measure(size: int, calls: int, scratch: Path) -> dict[str, Any]:
    """``calls`` calls on a stored session of ``size`` entries; the cost per extraction."""
    engine = make_engine("default", scratch)
    lane = SessionLane(
        "disk", size, HistoryCache(), engine=engine, state_dir=scratch / "state", by_calls=False
    )
    lane.rebuild()
    waits = Waits(lane.session)
    for index in range(calls):
        user, assistant = lane.prepare(TIMED, index)
        lane.session.append(user)
        lane.session.pre_call(model=MODEL, system=SYSTEM_PROMPT, tools=TOOLS)
        waits.wait()
        lane.session.post_sampling(assistant)
        waits.wait()
        lane.clock.set(assistant["timestamp"])
    lane.close()
    per = max(waits.extractions, 1)
    return {
        "entries": size,
        "calls": calls,
        "extractions": waits.extractions,
        "wall_s_per_extraction": waits.wall / per,
        "cpu_s_per_extraction": waits.cpu / per,
        "job_seconds_median": statistics.median(waits.jobs) if waits.jobs else 0.0,
    }


class Waits:
    """The waits for background work that saw an extraction finish: seconds, CPU, count."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.wall = self.cpu = 0.0
        self.extractions = 0
        self.jobs: list[float] = []

    def wait(self) -> None:
        """Wait for the background work; count it when an extraction finished meanwhile."""
        seen = len(self.session.events)
        started, started_cpu = time.perf_counter(), time.process_time()
        self.session.wait_for_background(timeout=600.0)
        wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
        done = [e for e in self.session.events[seen:] if isinstance(e, ExtractionFinished)]
        if done:
            self.wall, self.cpu = self.wall + wall, self.cpu + cpu
            self.extractions += len(done)
            self.jobs.extend(e.seconds for e in done)


def report(results: dict[str, Any]) -> None:
    """The human-readable table."""
    print(
        f"\n{'entries':>8} {'extractions':>12} {'wall s/extr':>12} {'cpu s/extr':>11}"
        f" {'job s (median)':>15}"
    )
    for row in results["sizes"]:
        print(
            f"{row['entries']:>8,} {row['extractions']:>12} {row['wall_s_per_extraction']:>12.3f}"
            f" {row['cpu_s_per_extraction']:>11.3f} {row['job_seconds_median']:>15.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    cli = parser(__doc__)
    cli.add_argument("--sizes", help="comma-separated history lengths (entries)")
    args = cli.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    calls = QUICK_CALLS if args.quick else CALLS
    log, started = Log(), time.perf_counter()
    results: dict[str, Any] = {"machine": machine(), "tokenizer_ms": warm_tokenizer()}
    rows = []
    with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
        for size in sizes:
            log(f"{size:,} entries, {calls} calls")
            rows.append(measure(size, calls, Path(tmp) / str(size)))
    results["sizes"] = rows
    results["targets"] = "none: reported (per-extraction cost must not grow ~ history length)"
    results["wall_seconds"] = round(time.perf_counter() - started, 1)
    return finish(results, args.json, report)


if __name__ == "__main__":
    sys.exit(main())
