"""Smoke guard for the benchmark, independent of ``tests/``: ``engine_overhead.py --quick``
must exit 0 within ``LIMIT_SECONDS`` and print well-formed JSON.

Run ``python benchmarks/smoke.py``; exit status 0 means the guard holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

LIMIT_SECONDS = 20.0
SCRIPT = Path(__file__).with_name("engine_overhead.py")


def run_quick() -> tuple[int, str, float]:
    """Run the benchmark with ``--quick --json``; (exit status, stdout, seconds)."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "--quick", "--json"],
            capture_output=True,
            text=True,
            timeout=LIMIT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return -1, "", time.perf_counter() - start
    if done.returncode:
        sys.stderr.write(done.stderr[-4_000:])
    return done.returncode, done.stdout, time.perf_counter() - start


def problems(status: int, stdout: str, seconds: float) -> list[str]:
    """What is wrong with one quick run (empty: the guard holds)."""
    if status == -1:
        return [f"--quick did not finish within {LIMIT_SECONDS:.0f} s"]
    found = [] if status == 0 else [f"--quick exited with status {status}"]
    if seconds >= LIMIT_SECONDS:
        found.append(f"--quick took {seconds:.1f} s (limit {LIMIT_SECONDS:.0f} s)")
    try:
        results = json.loads(stdout)
    except json.JSONDecodeError:
        return [*found, "--quick --json did not print JSON"]
    for key in ("stenograph", "ratios", "targets", "machine"):
        if key not in results:
            found.append(f"JSON results lack {key!r}")
    return found


def main() -> int:
    """Run the guard; print the verdict."""
    status, stdout, seconds = run_quick()
    found = problems(status, stdout, seconds)
    for problem in found:
        print(f"FAIL: {problem}")
    if not found:
        print(f"ok: engine_overhead.py --quick exited 0 in {seconds:.1f} s")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
