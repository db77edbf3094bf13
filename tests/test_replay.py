"""`stenograph replay`: the demo transcript, every real session, and the CLI contract."""

from __future__ import annotations

import json

import pytest
from conftest import DEMO, real_transcripts
from helpers import run_cli

import stenograph
from stenograph.engine.clock import parse_timestamp
from stenograph.integrations.transcripts import read_transcript, read_transcripts
from stenograph.replay import replay

JSON_KEYS = {
    "calls",
    "tokens_full",
    "tokens_sent",
    "memorized_entries",
    "memorize_events",
    "extractions",
    "memory_file",
    "handler_errors",
}


def strict_preset(tmp_path, base: str = "default") -> str:
    path = tmp_path / "strict.toml"
    path.write_text(f'extends = "{base}"\nstrict = true\n')
    return str(path)


def test_demo_replay_memorizes_after_the_pause(tmp_path):
    report = replay(DEMO, strict_preset(tmp_path), state_dir=tmp_path)
    assert report.calls == 11 and report.format == "claude-code-jsonl"
    assert [e["before_assistant_index"] for e in report.memorize_events] == [7]
    assert report.memorize_events[0]["gap_seconds"] >= 300
    assert report.tokens_sent < report.tokens_full
    assert report.memorized_entries == report.memorize_events[0]["entries"] > 0
    assert report.handler_errors == [] and report.request_violations == []
    assert (tmp_path / "replay-demo-session" / "journal.jsonl").exists()


def test_replay_is_deterministic(tmp_path):
    first = replay(DEMO, state_dir=tmp_path).to_json()
    second = replay(DEMO, state_dir=tmp_path).to_json()
    assert first == second


def _eligible_gaps(path) -> bool:
    """Whether some call is sent a cache TTL (300 s, 3600 s on the 1-hour cache: "auto") or
    more after the previous response's end (the request leaves at its newest input's time,
    not at its response's), with tool entries before."""
    for transcript in read_transcripts(path):
        messages = transcript.messages
        one_hour = any((m.get("usage") or {}).get("ephemeral_1h_input_tokens") for m in messages)
        threshold = 3600 if one_hour else 300
        last_response, saw_tools, latest = None, False, None
        for message in messages:
            moment = parse_timestamp(message.get("timestamp"))
            if message["role"] == "assistant":
                sent = max(latest or moment or 0, last_response or 0)
                if last_response is not None and saw_tools and sent - last_response >= threshold:
                    return True
                last_response = moment if moment is not None else last_response
            elif moment is not None:
                latest = moment
            blocks = message["content"] if isinstance(message["content"], list) else []
            saw_tools |= any(b.get("type") in ("tool_use", "tool_result") for b in blocks)
    return False


@pytest.mark.parametrize("path", real_transcripts(), ids=lambda p: p.name[:24])
def test_every_real_transcript_replays(tmp_path, path):
    report = replay(path, strict_preset(tmp_path), state_dir=tmp_path)
    assert report.handler_errors == [] and report.request_violations == []
    conversations = read_transcripts(path)
    assert report.calls == sum(m["role"] == "assistant" for t in conversations for m in t.messages)
    assert report.tokens_sent <= report.tokens_full
    if report.memorize_events:
        assert report.tokens_sent < report.tokens_full
    assert bool(report.memorize_events) == _eligible_gaps(path)


def test_real_transcripts_are_present_or_skipped(shared_data):
    assert real_transcripts(), f"no transcripts under {shared_data}"


def test_every_request_of_a_real_session_pairs(shared_data):
    path = shared_data / "chiphuyen-sniffly" / "d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"
    engine = stenograph.Engine.from_preset("default")
    clock = stenograph.ManualClock(0)
    session = engine.open_session("x", state_dir=None, clock=clock)
    for message in read_transcript(path).messages:
        moment = parse_timestamp(message.get("timestamp"))
        if moment is not None and moment > clock.now:
            clock.set(moment)
        if message["role"] == "assistant":
            request = session.pre_call(model="m")
            assert stenograph.check_request(request["messages"]) == []
            session.post_sampling(message)
        else:
            session.append(message)
    assert any(e.memorized for e in session.history)


def test_cli_replay_json(tmp_path):
    result = run_cli("replay", str(DEMO), "--json", "--state-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) >= JSON_KEYS
    assert data["calls"] == 11 and data["memorize_events"][0]["before_assistant_index"] == 7
    assert set(data["memorize_events"][0]) >= {"before_assistant_index", "gap_seconds", "entries"}


def test_cli_replay_report(tmp_path):
    result = run_cli("replay", str(DEMO), "--state-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "model calls replayed" in result.stdout and "less)" in result.stdout


def test_cli_replay_skips_garbage_lines_with_a_count(tmp_path):
    lines = DEMO.read_text().splitlines()
    lines[5:5] = ["{not json", "[1, 2]", "\x00\x01binary"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    result = run_cli("replay", str(broken), "--json", "--state-dir", str(tmp_path))
    assert result.returncode == 1  # the report stands; the exit status flags the skipped lines
    data = json.loads(result.stdout)
    assert data["skipped_lines"] == 3 and data["calls"] == 11
    assert any(":6:" in w for w in data["warnings"])
    assert (
        f"{broken}:6: skipped" in result.stderr and "3 transcript line(s) skipped" in result.stderr
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [("missing.jsonl",), ("{demo}", "--preset", "nope")])
def test_cli_replay_errors_are_one_clear_line(tmp_path, args):
    args = tuple(a.format(demo=DEMO) for a in args)
    result = run_cli("replay", *args, "--state-dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
