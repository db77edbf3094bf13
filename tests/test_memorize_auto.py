"""inactivity-memorize at "auto": the threshold follows the prompt-cache TTL in use; with it,
memorize never makes a development session cost more (simulated)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from conftest import ROOT

import stenograph
from stenograph.replay import replay
from stenograph.testing import single_handler_session

AUTO = {"inactivityThresholdSeconds": "auto"}
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}
WROTE_1H = {"input_tokens": 3, "cache_creation": {"ephemeral_1h_input_tokens": 900}}
WROTE_5M = {"input_tokens": 3, "cache_creation": {"ephemeral_5m_input_tokens": 900}}


def run(session, pause: float, usage=None, **request) -> list[stenograph.Event]:
    """A tool call and its result, a reply, ``pause`` seconds, then a request."""
    clock = session.clock
    session.append({"role": "user", "content": "Look at a.py"})
    session.pre_call(model="m", **request)
    call = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}
    session.post_sampling({"role": "assistant", "content": [call], "usage": usage})
    session.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x" * 3000}],
        }
    )
    session.pre_call(model="m", **request)
    session.post_sampling({"role": "assistant", "content": "Done.", "usage": usage})
    clock.advance(pause)
    session.append({"role": "user", "content": "And now?"})
    session.pre_call(model="m", **request)
    return session.events


def memorized(events) -> bool:
    return any(isinstance(e, stenograph.EntriesMemorized) for e in events)


def detected(events) -> list[tuple[str, str, float]]:
    return [
        (e.ttl, e.source, e.threshold_seconds)
        for e in events
        if isinstance(e, stenograph.CacheTtlDetected)
    ]


def test_the_handler_default_stays_300_and_the_default_preset_uses_auto():
    session = single_handler_session("inactivity-memorize", {})
    assert session.engine.slots[0].settings.values.inactivity_threshold_seconds == 300
    default = stenograph.Engine.from_preset("default").slots[0]
    assert default.settings.values.inactivity_threshold_seconds == "auto"


def test_without_evidence_auto_is_the_5_minute_cache():
    assert memorized(run(single_handler_session("inactivity-memorize", AUTO), 301))
    assert not memorized(run(single_handler_session("inactivity-memorize", AUTO), 299))


def test_a_1h_cache_control_in_the_request_raises_the_threshold_to_an_hour():
    events = run(single_handler_session("inactivity-memorize", AUTO), 600, cache_control=ONE_HOUR)
    assert not memorized(events)
    assert detected(events) == [("1h", "request", 3600.0)]
    events = run(single_handler_session("inactivity-memorize", AUTO), 3600, cache_control=ONE_HOUR)
    assert memorized(events)


def test_a_1h_breakpoint_on_a_system_block_counts_too():
    system = [{"type": "text", "text": "You code.", "cache_control": ONE_HOUR}]
    events = run(single_handler_session("inactivity-memorize", AUTO), 600, system=system)
    assert detected(events) == [("1h", "request", 3600.0)] and not memorized(events)


def test_usage_writing_to_the_1h_cache_raises_the_threshold():
    events = run(single_handler_session("inactivity-memorize", AUTO), 600, usage=WROTE_1H)
    assert detected(events) == [("1h", "usage", 3600.0)]
    assert not memorized(events)


def test_usage_writing_at_5_minutes_keeps_300():
    events = run(single_handler_session("inactivity-memorize", AUTO), 301, usage=WROTE_5M)
    assert detected(events) == [("5m", "usage", 300.0)]
    assert memorized(events)


def test_a_fixed_threshold_ignores_the_ttl():
    events = run(single_handler_session("inactivity-memorize", {}), 600, cache_control=ONE_HOUR)
    assert memorized(events) and detected(events) == []


def test_auto_is_refused_nowhere_and_nonsense_is_refused(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text(
        '[[handlers]]\nuse = "inactivity-memorize"\ninactivityThresholdSeconds = "later"\n'
    )
    with pytest.raises(stenograph.PresetError, match='must be a number of seconds or "auto"'):
        stenograph.Engine.from_preset(path)


def test_auto_never_costs_more_than_as_recorded_on_any_development_session(shared_data: Path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from cache_model import usage_sessions
    finally:
        sys.path.pop(0)
    logging.disable(logging.WARNING)
    try:
        rows = []
        for path in usage_sessions(shared_data):
            overrides = {"inactivity-memorize": AUTO}
            report = replay(path, "inactivity-only", None, overrides=overrides)
            economics = report.economics
            recorded = economics["as_recorded"]["totals"]["cost"]
            preset = economics["with_preset"]["totals"]["cost"]
            rows.append((path.name, recorded, preset, economics["cache_ttl"], report.cache_ttl))
    finally:
        logging.disable(logging.NOTSET)
    above = [row for row in rows if row[2] > row[1] + 1e-9]
    recorded_total = sum(row[1] for row in rows)
    saved = recorded_total - sum(row[2] for row in rows)
    print(
        f"\n{len(rows)} sessions: ${recorded_total:.2f} as recorded, ${saved:.2f} saved with"
        f" auto ({saved / recorded_total:.1%}); above: {above or 'none'}"
    )
    assert above == []
    one_hour = [row for row in rows if row[3] == "1h"]
    assert one_hour, "the development set has a session on the 1-hour cache"
    assert all(row[4] is not None and row[4]["ttl"] == "1h" for row in one_hour)
