"""What ``stenograph replay`` costs as a session grows: the whole replay (the session's calls
through the ``default`` preset, the economics, the JSON report) of one long session at 100,
300 and 1,000 model calls, per call, and the command as a whole process on the bundled demo.

The sessions are the demo's turns again and again (``benchlib.transcripts.repeated_demo``:
fresh ids, the demo's gaps, its pause in every repetition). Lanes, interleaved round by
round in a balanced order on the same file: ``folder`` (``replay(..., state_dir=<temp>)``
then ``report.to_json()``, as ``stenograph replay --json`` does), ``in memory`` (the same
with ``state_dir=None``: what the session folder's journal and leases add), and with
``--rev <commit>`` the revision's ``folder`` lane (exported as ``versus.py`` exports it).
The whole-process lane times ``stenograph replay examples/demo-session.jsonl`` beside
``python -c pass``.

Run ``python benchmarks/replay_cost.py`` (``--rev <commit>`` to compare, ``--quick`` for a
smoke run at 30 calls, ``--json`` for machine-readable results). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from types import ModuleType
from typing import Any

from benchlib.report import Log, finish, machine, parser, warm_tokenizer
from benchlib.revision import export, twins
from benchlib.stats import balanced
from benchlib.transcripts import DEMO, repeated_demo

import stenograph
import stenograph.replay

SIZES, QUICK_SIZES = (100, 300, 1_000), (30,)
ROUNDS, QUICK_ROUNDS = 3, 1
PROCESS_ROUNDS, QUICK_PROCESS_ROUNDS = 7, 2


def replay_lane(package: ModuleType, folder: bool, scratch: Path) -> Callable[[Path], float]:
    """A lane: seconds to replay a file on ``package`` and make its JSON report."""
    replay = importlib.import_module(f"{package.__name__}.replay").replay

    def run(path: Path) -> float:
        state = Path(tempfile.mkdtemp(dir=scratch)) if folder else None
        start = time.perf_counter()
        replay(path, "default", state_dir=state).to_json()
        seconds = time.perf_counter() - start
        if state is not None:
            shutil.rmtree(state)
        return seconds

    return run


def run_size(
    lanes: dict[str, Callable[[Path], float]], calls: int, rounds: int, scratch: Path, log: Log
) -> dict[str, Any]:
    """Every lane on one session of ``calls`` model calls, ``rounds`` times, interleaved."""
    path = repeated_demo(calls, scratch / f"session-{calls}.jsonl")
    log(f"{calls:,} calls: {len(lanes)} lanes x {rounds} rounds")
    seconds: dict[str, list[float]] = {name: [] for name in lanes}
    for index in range(rounds):
        for name in balanced(list(lanes), index):
            seconds[name].append(lanes[name](path))
    replayed = stenograph.replay.replay(path, "default", state_dir=None).calls
    return {
        "calls": replayed,
        "lanes": {
            name: {"seconds": median(values), "ms_per_call": 1_000 * median(values) / replayed}
            for name, values in seconds.items()
        },
    }


def process_lane(rounds: int, log: Log) -> dict[str, float]:
    """Median wall milliseconds of ``stenograph replay <demo>`` and ``python -c pass``."""
    log("whole process: stenograph replay on the demo")
    script = shutil.which("stenograph", path=str(Path(sys.executable).parent)) or "stenograph"
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "stenograph replay <demo>": [script, "replay", str(DEMO)],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory(prefix="stenograph-replay-cost-") as cwd:
        for index in range(rounds + 1):  # the first round warms the page cache, untimed
            for name in balanced(list(commands), index):
                start = time.perf_counter()
                subprocess.run(commands[name], cwd=cwd, check=True, capture_output=True)
                if index:
                    times[name].append(1_000 * (time.perf_counter() - start))
    return {name: median(values) for name, values in times.items()}


def report(results: dict[str, Any]) -> None:
    """Per size, each lane's median seconds and milliseconds per call; how the cost per
    call grows; this checkout beside the revision."""
    sizes = results["sizes"]
    print(f"\nreplay of one session, default preset, median of {results['rounds']} rounds")
    for row in sizes.values():
        print(f" {row['calls']:,} calls")
        for name, lane in row["lanes"].items():
            print(f"   {name:12s} {lane['seconds']:8.2f} s  {lane['ms_per_call']:7.2f} ms/call")
    first, last = list(sizes.values())[0], list(sizes.values())[-1]
    for name in last["lanes"]:
        growth = last["lanes"][name]["ms_per_call"] / first["lanes"][name]["ms_per_call"]
        print(f" {name}: per call at {last['calls']:,} / at {first['calls']:,}: {growth:.2f}x")
    if "rev, folder" in last["lanes"]:
        for row in sizes.values():
            this, rev = (row["lanes"][n]["seconds"] for n in ("folder", "rev, folder"))
            print(f" this / rev at {row['calls']:,} calls: {this / rev:.3f}")
    process = results["process_ms"]
    print(" whole process, median ms: " + ", ".join(f"{k} {v:.0f}" for k, v in process.items()))


def main() -> int:
    """Build the sessions, run the lanes at every size, time the command."""
    options = parser(__doc__)
    options.add_argument("--rev", help="a git revision to replay beside this checkout")
    args = options.parse_args()
    log = Log()
    rounds = QUICK_ROUNDS if args.quick else ROUNDS
    results: dict[str, Any] = {"machine": machine(), "rev": args.rev, "rounds": rounds}
    results["tiktoken_load_ms"] = warm_tokenizer()
    with tempfile.TemporaryDirectory(prefix="stenograph-replay-cost-") as tmp:
        scratch = Path(tmp)
        lanes = {
            "folder": replay_lane(stenograph, True, scratch),
            "in memory": replay_lane(stenograph, False, scratch),
        }
        if args.rev:
            rev = export(args.rev, scratch / "src")
            results["twins"] = {"rev": twins(rev), "this": twins(stenograph)}
            lanes["rev, folder"] = replay_lane(rev, True, scratch)
        sizes = QUICK_SIZES if args.quick else SIZES
        results["sizes"] = {str(n): run_size(lanes, n, rounds, scratch, log) for n in sizes}
    results["process_ms"] = process_lane(
        QUICK_PROCESS_ROUNDS if args.quick else PROCESS_ROUNDS, log
    )
    results["wall_seconds"] = round(log.elapsed(), 1)
    return finish(results, args.json, report)


if __name__ == "__main__":
    raise SystemExit(main())
