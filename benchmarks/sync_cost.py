"""What comparing the host's whole list with the history costs (``Session.sync``, run by
``wrap()`` on every call), side by side with the length-and-role check it replaced.

The history is a tool loop of 10, 100 and 500 messages: user tool results of 2,000
characters (plain dicts) and assistant turns holding the SDK's own ``TextBlock`` and
``ToolUseBlock`` objects, as a host keeps ``response.content``. Each size times 300 calls of
each lane, alternating, in one run; medians.

Run ``python benchmarks/sync_cost.py`` (``--quick``: 30 calls per lane; ``--json``: the
medians as JSON on stdout).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from anthropic.types import TextBlock, ToolUseBlock
from benchlib.report import machine

import stenograph


def build(n: int) -> tuple[stenograph.Session, list]:
    session = stenograph.Engine.from_preset("inactivity-only").open_session("b", state_dir=None)
    host: list = []
    for i in range(n // 2):
        result = [{"type": "tool_result", "tool_use_id": f"t{i - 1}", "content": "x" * 2000}]
        user = {"role": "user", "content": result if i else "start"}
        host.append(user)
        session.append(user)
        blocks = [
            TextBlock(type="text", text=f"step {i} " * 20),
            ToolUseBlock(type="tool_use", id=f"t{i}", name="Read", input={"path": f"/f{i}.py"}),
        ]
        session.post_sampling({"content": [b.model_dump(mode="json") for b in blocks]})
        host.append({"role": "assistant", "content": blocks})
    return session, host


def old_check(session: stenograph.Session, host: list) -> bool:
    known = len(session.history)
    return len(host) >= known and host[known - 1]["role"] == session.history[known - 1].role


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (30 calls per lane)")
    parser.add_argument("--json", action="store_true", help="the medians as JSON on stdout")
    args = parser.parse_args()
    calls = 30 if args.quick else 300
    result: dict[str, object] = {"machine": machine(), "calls_per_lane": calls, "sizes": {}}
    for n in (10, 100, 500):
        session, host = build(n)
        session.sync(host)  # the SDK blocks are dumped once, on the first call
        lanes: dict[str, list[float]] = {"sync": [], "length/role check": []}
        for _ in range(calls):
            for name, run in (("sync", session.sync), ("length/role check", None)):
                start = time.perf_counter()
                run(host) if run else old_check(session, host)
                lanes[name].append(time.perf_counter() - start)
        medians = {k: statistics.median(v) * 1e6 for k, v in lanes.items()}
        result["sizes"][str(n)] = {f"{k} µs": round(v, 2) for k, v in medians.items()}  # type: ignore[index]
        if not args.json:
            figures = ", ".join(f"{k} {v:.1f} µs" for k, v in medians.items())
            print(f"{n:4d} messages: {figures}")
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
