"""Smoke guard for the benchmarks, independent of ``tests/``: every benchmark script here
runs in its quick mode (``--quick --json``), must exit 0 within ``LIMIT_SECONDS`` and print
well-formed JSON, so that no script rots. CI runs it after the tests.

Run ``python benchmarks/smoke.py`` (or name scripts: ``smoke.py moments.py``); exit status
0 means the guard holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

LIMIT_SECONDS = 120.0
HERE = Path(__file__).resolve().parent
NOT_BENCHMARKS = {"smoke.py"}
# keys each script's JSON must hold (None: a script with no quick mode, run as it is)
REQUIRED: dict[str, tuple[str, ...] | None] = {
    "engine_overhead.py": ("sizes", "targets", "machine"),
    "clearing_peers.py": ("clearing", "check_only", "targets", "machine"),
    "cache_model.py": None,
    "notes_job_cost.py": ("sizes", "targets", "machine"),
}


def scripts(names: list[str]) -> list[Path]:
    """The benchmark scripts to run (all of them by default)."""
    if names:
        return [HERE / name for name in names]
    return sorted(p for p in HERE.glob("*.py") if p.name not in NOT_BENCHMARKS)


def run_quick(script: Path) -> tuple[int, str, float]:
    """Run ``script`` with ``--quick --json``; (exit status, stdout, seconds)."""
    start = time.perf_counter()
    flags = [] if REQUIRED.get(script.name, ()) is None else ["--quick", "--json"]
    try:
        done = subprocess.run(
            [sys.executable, str(script), *flags],
            capture_output=True,
            text=True,
            timeout=LIMIT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return -1, "", time.perf_counter() - start
    if done.returncode:
        sys.stderr.write(done.stderr[-4_000:])
    return done.returncode, done.stdout, time.perf_counter() - start


def problems(name: str, status: int, stdout: str, seconds: float) -> list[str]:
    """What is wrong with one quick run (empty: the guard holds)."""
    if status == -1:
        return [f"{name} --quick did not finish within {LIMIT_SECONDS:.0f} s"]
    found = [] if status == 0 else [f"{name} --quick exited with status {status}"]
    required = REQUIRED.get(name, ("machine",))
    if required is None:
        return found
    try:
        results = json.loads(stdout)
    except json.JSONDecodeError:
        return [*found, f"{name} --quick --json did not print JSON"]
    for key in required:
        if key not in results:
            found.append(f"{name}: JSON results lack {key!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the guard; print the verdict per script."""
    failed = False
    for script in scripts(sys.argv[1:] if argv is None else argv):
        status, stdout, seconds = run_quick(script)
        found = problems(script.name, status, stdout, seconds)
        for problem in found:
            print(f"FAIL: {problem}", flush=True)
        if not found:
            print(f"ok: {script.name} --quick exited 0 in {seconds:.1f} s", flush=True)
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
