"""`stenograph show --call N` and `replay --requests`: the same request, and the one a host
sends through wrap() at that call on the same history."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DEMO

import stenograph
from stenograph.engine.clock import parse_timestamp
from stenograph.integrations.anthropic import wrap
from stenograph.integrations.transcripts import read_transcript
from stenograph.replay import REPLAY_SYSTEM
from stenograph.testing.messages_server import Reply


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stenograph", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def demo_requests(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("requests")
    out = folder / "requests.jsonl"
    done = cli("replay", str(DEMO), "--state-dir", str(folder), "--requests", str(out))
    assert done.returncode == 0, done.stderr
    return out.read_text().splitlines()


def test_requests_file_has_one_request_per_call(demo_requests):
    assert len(demo_requests) == 11
    requests = [json.loads(line) for line in demo_requests]
    assert all(set(r) == {"model", "system", "messages"} for r in requests)
    assert "[memorized:" not in demo_requests[6] and "[memorized:" in demo_requests[7]


@pytest.mark.parametrize("call", [0, 7, 10])
def test_show_prints_the_nth_line_of_requests(demo_requests, call):
    shown = cli("show", str(DEMO), "--call", str(call))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == demo_requests[call] + "\n"


def test_show_diff_names_what_the_preset_changed():
    diff = cli("show", str(DEMO), "--call", "7", "--diff")
    assert diff.returncode == 0
    assert diff.stdout.startswith("--- call 7, full history\n+++ call 7, as sent\n")
    assert '+     "content": "[memorized: Read result left out' in diff.stdout
    same = cli("show", str(DEMO), "--call", "2", "--diff")
    assert same.stdout == "call 2: sent as the full history (no change)\n"


def test_show_refuses_a_call_out_of_range():
    done = cli("show", str(DEMO), "--call", "11")
    assert done.returncode == 2
    assert "no call 11; it has 11 model calls (0 to 10)" in done.stderr


def test_a_host_through_wrap_sends_what_show_prints(
    demo_requests, messages_server, anthropic_client, monkeypatch
):
    """The demo replayed by a host: the real SDK, wrap(), the local Messages-API server
    answering with the recorded responses, the clock at each message's time."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    transcript = read_transcript(DEMO)
    assistants = [m for m in transcript.messages if m["role"] == "assistant"]
    messages_server.script(*(Reply.blocks(m["content"], usage=m["usage"]) for m in assistants))
    first = next(parse_timestamp(m["timestamp"]) for m in transcript.messages if "timestamp" in m)
    clock = stenograph.ManualClock(first)
    session = stenograph.Engine.from_preset("default").open_session("host", clock=clock)
    client = wrap(anthropic_client, session)
    history: list[dict] = []
    for message in transcript.messages:
        moment = parse_timestamp(message.get("timestamp"))
        if moment is not None and moment > clock.now:
            clock.set(moment)
        if message["role"] == "user":
            history.append({"role": "user", "content": message["content"]})
            continue
        response = client.messages.create(
            model=message["model"], system=REPLAY_SYSTEM, max_tokens=1024, messages=history
        )
        session.wait_for_background()
        history.append({"role": "assistant", "content": response.content})
    session.close()
    sent = [r.body for r in messages_server.requests]
    assert len(sent) == len(demo_requests)
    for body, line in zip(sent, demo_requests, strict=True):
        shown = json.loads(line)
        assert {key: body[key] for key in shown} == shown
