"""open_session(on_event=...) and replay --events: every event as it happens, as JSON."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading

from conftest import DEMO
from helpers import open_session, run_tool_calls, text_reply

import stenograph
from stenograph.replay import replay


def test_every_event_is_delivered_as_recorded_and_is_json():
    seen: list[stenograph.Event] = []
    threads: set[str] = set()

    def observe(event):
        seen.append(event)
        threads.add(threading.current_thread().name)

    engine = stenograph.Engine.from_preset("default")
    clock = stenograph.ManualClock(1e9)
    session = engine.open_session("s", state_dir=None, clock=clock, on_event=observe)
    session.append({"role": "user", "content": "Fix the test"})
    run_tool_calls(session, clock, 4)
    session.pre_call(model="m")
    session.post_sampling(text_reply())
    clock.advance(400)
    session.append({"role": "user", "content": "Again"})
    session.pre_call(model="m")
    session.wait_for_background()
    session.close()
    final = [e for e in seen if not getattr(e, "estimated", False)]  # completed later
    assert final == session.events
    kinds = {e.kind for e in seen}
    assert {"EntriesMemorized", "ThresholdDecision"} <= kinds
    for event in seen:
        data = json.loads(json.dumps(event.to_json()))
        assert data["kind"] == event.kind and data["time"] == event.time
    memorized = [e for e in seen if isinstance(e, stenograph.EntriesMemorized)]
    assert json.loads(json.dumps(memorized[-1].to_json()))["uuids"] == list(memorized[-1].uuids)
    assert memorized[-1].estimated is False and memorized[-1] in session.events


def test_a_failing_observer_is_logged_and_the_session_goes_on(caplog):
    def broken(event):
        raise RuntimeError("observer down")

    session = stenograph.Engine.from_preset("default").open_session(
        "s", state_dir=None, on_event=broken
    )
    session.append({"role": "user", "content": "hi"})
    session.pre_call(model="m")
    with caplog.at_level(logging.ERROR, "stenograph.engine.session"):
        session.post_sampling({"role": "assistant", "content": "hello"})
    assert session.events and "on_event failed on ThresholdDecision" in caplog.text
    session.close()


def test_without_observer_nothing_changes():
    session, _clock = open_session()
    assert session.on_event is None


def test_replay_events_file_holds_each_event_once_in_order(tmp_path):
    out = tmp_path / "events.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stenograph",
            "replay",
            str(DEMO),
            "--state-dir",
            str(tmp_path),
            "--events",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    report = replay(DEMO, state_dir=tmp_path)
    expected = [
        e["kind"] for e in lines if not (e["kind"] == "EntriesMemorized" and e["estimated"])
    ]
    assert expected.count("EntriesMemorized") == len(report.memorize_events) == 1
    assert [e["kind"] for e in lines if e["kind"] == "ExtractionFinished"] == [
        "ExtractionFinished"
    ] * len(report.extractions)
    assert all(isinstance(e["time"], float) for e in lines)
