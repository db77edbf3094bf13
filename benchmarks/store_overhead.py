"""What each session store costs per call, side by side in one run (loopback servers), and
how many calls per second 4 worker processes make on one session in one PostgreSQL.

    .venv/bin/python benchmarks/store_overhead.py [--quick] [--json]

One "call" is what ``wrap()`` does around a model call: append the input, pre-call,
post-sampling (no model: the store's cost is what is measured). Rounds alternate the
stores, so a noisy machine slows them alike; the figures are medians and ratios to the
folder store. Servers: ``STENOGRAPH_TEST_POSTGRES_URL`` / ``STENOGRAPH_TEST_REDIS_URL``
(defaults: the local test servers); a store whose server is unreachable is left out.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib.engines import make_engine
from benchlib.report import machine

import stenograph
from stenograph.stores import open_store

POSTGRES = os.environ.get(
    "STENOGRAPH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("STENOGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def engine() -> stenograph.Engine:
    return make_engine("default")


def stores(folder: Path) -> dict[str, str | None]:
    tag = f"bench_{secrets.token_hex(4)}"
    found: dict[str, str | None] = {
        "memory": None,
        "file": f"file:{folder / 'f'}",
        "sqlite": f"sqlite:///{folder / 's.db'}",
        "postgres": f"{POSTGRES}?schema={tag}",
        "redis": f"{REDIS}?prefix={tag}:",
    }
    for name in ("postgres", "redis"):
        try:
            open_store(found[name] or "").sessions()
        except Exception as exc:  # no server, no client library: left out, said so
            print(f"{name}: left out ({type(exc).__name__}: {exc})", file=sys.stderr)
            del found[name]
    return found


def one_call(session: stenograph.Session, n: int) -> float:
    start = time.perf_counter()
    session.append({"role": "user", "content": f"question {n}"})
    session.pre_call(model="m")
    session.post_sampling({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    return time.perf_counter() - start


def per_call(found: dict[str, str | None], calls: int) -> dict[str, float]:
    sessions = {}
    for name, url in found.items():
        sessions[name] = (
            engine().open_session("bench", state_dir=None, store=url)
            if url
            else engine().open_session("bench", state_dir=None)
        )
    samples: dict[str, list[float]] = {name: [] for name in found}
    for n in range(calls):
        for name, session in sessions.items():  # interleaved: the same noise for all
            samples[name].append(one_call(session, n))
    for session in sessions.values():
        session.close()
    return {name: statistics.median(times) * 1e6 for name, times in samples.items()}


def worker(url: str, calls: int, done: Any) -> None:
    session = engine().open_session("shared", store=url, wait_seconds=120)
    for n in range(calls):
        session.append({"role": "user", "content": f"w{os.getpid()} {n}"})
        session.pre_call(model="m")
        session.post_sampling({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    session.close()
    done.put(calls)


def throughput(url: str, workers: int, calls: int) -> float:
    ctx = multiprocessing.get_context("fork")
    done = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(url, calls, done)) for _ in range(workers)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    seconds = time.perf_counter() - start
    return sum(done.get() for _ in procs) / seconds


def cleanup(found: dict[str, str | None]) -> None:
    """Remove what the run stored on the servers (the PostgreSQL schema, the Redis keys)."""
    if "redis" in found:
        store = open_store(found["redis"] or "")
        for sid in store.sessions():
            store.delete(sid)
    if "postgres" in found:
        import psycopg

        schema = (found["postgres"] or "").rsplit("schema=", 1)[1]
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (few calls)")
    parser.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    args = parser.parse_args()
    calls = 20 if args.quick else 300
    with tempfile.TemporaryDirectory() as tmp:
        found = stores(Path(tmp))
        micros = per_call(found, calls)
        result: dict[str, Any] = {
            "machine": machine(),
            "calls": calls,
            "per_call_us": {k: round(v, 1) for k, v in micros.items()},
            "vs_file": {k: round(v / micros["file"], 2) for k, v in micros.items()},
        }
        if "postgres" in found:
            url = found["postgres"] or ""
            result["postgres_4_workers_calls_per_s"] = round(
                throughput(url, 4, 10 if args.quick else 100), 1
            )
        cleanup(found)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"per call (append + pre-call + post-sampling), median of {calls}:")
    for name, value in result["per_call_us"].items():
        print(f"  {name:9} {value:9.1f} us   {result['vs_file'][name]:5.2f}x the folder store")
    if "postgres_4_workers_calls_per_s" in result:
        rate = result["postgres_4_workers_calls_per_s"]
        print(f"4 workers, one session, one PostgreSQL: {rate} calls/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
