"""What each part of update-threshold's work after a response costs in the steady call, at
3,000 entries: lanes of one handler slot whose ``post_sampling`` does a growing part of it,
beside ``no handlers`` and the floor.

Lanes, interleaved round by round on the same history as in ``engine_overhead.py``:
``floor``; ``no handlers``; ``empty slot`` (a slot whose hook returns at once); ``decision``
(update-threshold's ``decide``: the context size, the tool calls, the reason); ``event
built`` (and its ``ThresholdDecision`` made, not recorded); ``event recorded`` (and
recorded: what update-threshold does on a call that files no extraction);
``update-threshold`` (the handler itself, which also files an extraction request when the
decision is positive: no extractor takes it here, so it succeeds at once). Two what-if lanes
say what moving that hook off the call would save, not what stenograph does:
``deferred to a worker`` (the hook handed to a background worker of the session, which the
lane's untimed wait between calls lets finish) and ``deferred to the host`` (the hook kept
and run by the lane itself on its own thread between calls, untimed: what an event loop's
idle moment could run). Each lane's two timed parts are reported: work moved off one part
can show up in the other.

Run ``python benchmarks/threshold_parts.py`` (``--quick`` for a smoke run at 300 entries,
``--json`` for machine-readable results). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchlib.engines import engine_of
from benchlib.history import HistoryCache
from benchlib.lanes import FloorLane, Lane, SessionLane, interleave
from benchlib.report import Log, cli, finish, machine, warm_tokenizer
from benchlib.stats import fmt_us, ratio

import stenograph
from stenograph.engine.presets import Preset, SlotSpec
from stenograph.handlers.update_threshold import UpdateThreshold

SIZE, QUICK_SIZE = 3_000, 300
CALLS, QUICK_CALLS = 300, 20


class EmptySlot(UpdateThreshold):
    """A slot whose hook returns at once."""

    name = "parts-empty"

    @stenograph.hookimpl
    def post_sampling(self, session: Any, call: Any, state: Any) -> None:
        return None


class Decision(UpdateThreshold):
    """update-threshold's decision, nothing after it."""

    name = "parts-decision"

    @stenograph.hookimpl
    def post_sampling(self, session: Any, call: Any, state: Any) -> None:
        self.decide(session, state, not call.response.tool_use_ids)


class EventBuilt(UpdateThreshold):
    """The decision and its event, not recorded."""

    name = "parts-event-built"
    record = False

    @stenograph.hookimpl
    def post_sampling(self, session: Any, call: Any, state: Any) -> None:
        event = self.decision(call, call.response, state)
        if self.record:
            session.record(event)


class EventRecorded(EventBuilt):
    """The decision and its event, recorded: a call that files no extraction."""

    name = "parts-event-recorded"
    record = True


class Deferred(UpdateThreshold):
    """What-if: update-threshold's hook, whole, handed over (``hand_over``) instead of run."""

    @stenograph.hookimpl
    def post_sampling(self, session: Any, call: Any, state: Any) -> None:
        hook = functools.partial(UpdateThreshold.post_sampling, self, session, call, state)
        self.hand_over(session, hook)

    def hand_over(self, session: Any, hook: Callable[[], object]) -> None:
        raise NotImplementedError


class ToWorker(Deferred):
    """The hook handed to a background worker of the session."""

    name = "parts-to-worker"

    def hand_over(self, session: Any, hook: Callable[[], object]) -> None:
        session.run_in_background("parts-threshold", hook)


LATER = stenograph.StateKey[list[Callable[[], object]]]("parts-later")


class ToHost(Deferred):
    """The hook kept for the host to run between calls (``HostLane``)."""

    name = "parts-to-host"

    def hand_over(self, session: Any, hook: Callable[[], object]) -> None:
        session.stash.setdefault(LATER, []).append(hook)


@dataclass
class HostLane(SessionLane):
    """A session lane that runs the hooks ``ToHost`` kept, on its own thread, untimed."""

    def settle(self) -> None:
        later = self.session.stash.get(LATER, [])
        while later:
            later.pop(0)()
        super().settle()


PARTS = {
    "empty slot": EmptySlot,
    "decision": Decision,
    "event built": EventBuilt,
    "event recorded": EventRecorded,
}


def one_slot(handler: type[UpdateThreshold]) -> stenograph.Engine:
    """An engine of one slot of ``handler`` (update-threshold's settings)."""
    spec = SlotSpec(handler.name, (), "handlers[0]")
    preset = Preset(name=handler.name, description="", strict=True, slots=(spec,), label="bench")
    return stenograph.Engine(preset, handlers=[handler])


def run(quick: bool, log: Log) -> dict[str, Any]:
    """Every lane at one size, interleaved; each one's ratio to ``no handlers``."""
    size, calls = (QUICK_SIZE, QUICK_CALLS) if quick else (SIZE, CALLS)
    histories = HistoryCache()
    lanes: list[Lane] = [
        FloorLane("floor", size, histories),
        SessionLane("no handlers", size, histories, engine=engine_of("no-handlers", {})),
    ]
    lanes += [SessionLane(n, size, histories, engine=one_slot(h)) for n, h in PARTS.items()]
    whole = engine_of("update-threshold", {"update-threshold": {}})
    lanes.append(SessionLane("update-threshold", size, histories, engine=whole))
    lanes.append(SessionLane("deferred to a worker", size, histories, engine=one_slot(ToWorker)))
    lanes.append(HostLane("deferred to the host", size, histories, engine=one_slot(ToHost)))
    log(f"{size:,} entries: {len(lanes)} lanes x {calls} calls")
    interleave(lanes, calls)
    samples = {lane.name: lane.samples for lane in lanes}
    ours = [lane for lane in lanes if isinstance(lane, SessionLane)]
    before = {lane.name: lane.parts["before the model"] for lane in ours}
    after = {lane.name: lane.parts["after the model"] for lane in ours}
    return {
        "size": size,
        "samples": samples,
        "before_the_model": before,
        "after_the_model": after,
        "over_no_handlers": {n: ratio(samples[n], samples["no handlers"]) for n in after},
    }


def report(results: dict[str, Any]) -> None:
    """One line per lane: the call, its two parts, the difference to no handlers."""
    part = results["part"]
    base = part["samples"]["no handlers"].median
    print(f"\nper call at {part['size']:,} entries, median (before / after the model)")
    for name, samples in part["samples"].items():
        after = part["after_the_model"].get(name)
        extra = ""
        if after is not None:
            before = part["before_the_model"][name]
            extra = (
                f"  ({fmt_us(before.median)} / {fmt_us(after.median)},"
                f" {samples.median - base:+.1f} µs over no handlers)"
            )
        print(f"  {name:22s} {fmt_us(samples.median):>9s}{extra}")


def main(argv: list[str] | None = None) -> int:
    args = cli(__doc__ or "", argv)
    log = Log()
    warm_tokenizer()
    results = {"machine": machine(), "part": run(args.quick, log), "targets": None}
    results["wall_seconds"] = round(log.elapsed(), 1)
    return finish(results, args.json, report)


if __name__ == "__main__":
    sys.exit(main())
