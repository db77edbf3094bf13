"""What the framework adapters' message conversions cost per call, each converted anew on
every call (as the adapters did) beside the conversions kept across calls (as they do now),
at 100, 1,000 and 3,000 messages.

A session takes a synthetic history through real calls, then every round appends one more
turn (the tool results and the reply) and times one call of each lane, in a balanced
order, on the session's request as rendered after that turn:

* LangChain, ``StenographMiddleware``'s two conversions: the agent's messages to
  Anthropic's format (``to_anthropic``) and the rendered request back to LangChain messages
  (``from_anthropic``); ``fresh`` runs both on the whole lists, ``kept`` through
  ``langchain.Converted`` (the agent's list grows by the turn's LangChain messages);
* pydantic-ai, the ``Stenograph`` capability's conversion of the rendered request
  (``from_anthropic``, the system parts on the first request): ``fresh`` against
  ``pydantic_ai.Rendered``.

Needs the ``langchain`` and ``pydantic-ai`` extras (a missing one's lanes are skipped, said
why). Run ``python benchmarks/framework_conversions.py`` (``--quick``, ``--json``); see
``benchmarks/README.md``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from benchlib.history import MODEL, SYSTEM_PROMPT, TOOLS, HistoryCache, stream_seed
from benchlib.report import Log, cli, finish, machine
from benchlib.stats import Samples, balanced, fmt_us, ratio

import stenograph

SIZES, QUICK_SIZES = (100, 1_000, 3_000), (100,)
CALLS, QUICK_CALLS = 100, 10
Rendered = list[dict[str, Any]]
Lanes = dict[str, Callable[[Rendered], object]]


def langchain_lanes() -> tuple[Lanes, str | None]:
    """The LangChain lanes, given the rendered request, and ``grow``, which keeps the
    agent's LangChain list as the agent state would (the history, then each turn)."""
    try:
        from stenograph.integrations import langchain as adapter
    except ImportError as exc:
        return {}, f"the langchain extra is not installed ({exc})"
    agent: list[Any] = []
    kept = adapter.Converted()

    def grow(rendered: Rendered) -> None:  # the previous reply and the new results
        agent.extend(adapter.from_anthropic(rendered[-2:] if agent else rendered))

    def fresh(rendered: Rendered) -> object:
        return adapter.to_anthropic(agent), adapter.from_anthropic(rendered)

    def cached(rendered: Rendered) -> object:
        return kept.agent(agent), kept.rendered(rendered)

    return {"grow": grow, "langchain fresh": fresh, "langchain kept": cached}, None


def pydantic_ai_lanes() -> tuple[Lanes, str | None]:
    """The pydantic-ai lanes, given the rendered request."""
    try:
        from pydantic_ai.messages import SystemPromptPart

        from stenograph.integrations import pydantic_ai as adapter
    except ImportError as exc:
        return {}, f"the pydantic-ai extra is not installed ({exc})"
    system, kept = [SystemPromptPart(content=SYSTEM_PROMPT)], adapter.Rendered()
    return {
        "pydantic-ai fresh": lambda rendered: adapter.from_anthropic(rendered, system=system),
        "pydantic-ai kept": lambda rendered: kept(rendered, system),
    }, None


def run_size(size: int, calls: int, log: Log) -> dict[str, Any]:
    """Every lane at one size, interleaved."""
    messages, synth = HistoryCache().get(size, 7)
    session = stenograph.Engine.from_preset("inactivity-only").open_session("c", state_dir=None)
    for message in messages:
        session.append(message) if message["role"] == "user" else session.post_sampling(message)
    lanes: Lanes = {}
    skipped = {}
    for make in (langchain_lanes, pydantic_ai_lanes):
        made, why = make()
        lanes.update(made)
        if why:
            skipped[make.__name__] = why
    grow = lanes.pop("grow", None)
    samples = {name: Samples(f"{name} @ {size:,}") for name in lanes}
    log(f"{size:,} messages: {len(lanes)} lanes x {calls} calls")
    for index in range(calls + 2):  # two warm-up rounds (the kept lanes' first conversion)
        synth.reseed(stream_seed(1, index))
        user, assistant = synth.turn(tools_only=True)
        session.append(user)
        rendered = session.pre_call(model=MODEL, system=SYSTEM_PROMPT, tools=TOOLS)["messages"]
        if grow is not None:
            grow(rendered)
        for name in balanced(list(lanes), index):
            start = time.perf_counter_ns()
            lanes[name](rendered)
            if index >= 2:
                samples[name].add_ns(time.perf_counter_ns() - start)
        session.post_sampling(assistant)
    session.close()
    pairs = [(f, f.replace("fresh", "kept")) for f in samples if f.endswith("fresh")]
    return {
        "samples": samples,
        "fresh_over_kept": {f.split()[0]: ratio(samples[f], samples[k]) for f, k in pairs},
        "skipped": skipped,
    }


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Every size."""
    sizes = QUICK_SIZES if quick else SIZES
    results: dict[str, Any] = {"machine": machine(), "quick": quick, "sizes": {}}
    for size in sizes:
        results["sizes"][str(size)] = run_size(size, QUICK_CALLS if quick else CALLS, log)
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    print("\nper call, median / p90")
    for size, r in results["sizes"].items():
        print(f" {int(size):,} messages")
        for name, s in r["samples"].items():
            print(f"   {name:<20} {fmt_us(s.median):>9} / {fmt_us(s.p90):>9}")
        for name, got in r["fresh_over_kept"].items():
            print(f"   {name}: fresh / kept {got['median']:.1f}x")
        for name, why in r["skipped"].items():
            print(f"   skipped ({name}): {why}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    return finish(run_all(args.quick, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
