"""The whole development set, replayed with every built-in preset: the calls replayed equal
an independent count of the API calls in each file (written here, not the reader's), no
rendered request breaks an API rule, and what is not replayed is named by reason."""

from __future__ import annotations

import json

import pytest
from conftest import real_transcripts

from stenograph.engine.presets import builtin_names
from stenograph.replay import replay

ABANDONED = "model calls on abandoned branches"


def count_calls(path) -> int:
    """API calls in a transcript file, counted from its raw records."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        return 0
    try:
        value = json.loads(text)
    except ValueError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        if any("history" in row for row in rows):  # OpenHands evaluation output, one per line
            return sum(_openhands_calls(row["history"]) for row in rows)
        return _claude_code_calls(rows)
    if isinstance(value, dict) and "type" in value:  # a one-line Claude Code file
        return _claude_code_calls([value])
    if isinstance(value, dict) and "trajectory" in value:
        history = value.get("history") or []
        if history:
            return sum(item.get("role") == "assistant" for item in history)
        return len(value["trajectory"])
    if isinstance(value, list) and value and "source" in value[0]:
        return _openhands_calls(value)
    messages = value["messages"] if isinstance(value, dict) else value
    return sum(m.get("role") == "assistant" for m in messages)


def _claude_code_calls(rows: list[dict]) -> int:
    """Distinct message ids of real model responses in the file's own conversation."""
    responses = [
        r
        for r in rows
        if r.get("type") == "assistant" and r["message"].get("model") != "<synthetic>"
    ]
    main = [r for r in responses if not r.get("isSidechain")]
    return len({r["message"].get("id") or r["uuid"] for r in (main or responses)})


def _openhands_calls(events: list[dict]) -> int:
    """One call per model response id; an agent message without one is a call of its own."""
    calls = set()
    for n, event in enumerate(events):
        if event.get("source") != "agent" or "action" not in event:
            continue
        response = (event.get("tool_call_metadata") or {}).get("model_response") or {}
        if response.get("id"):
            calls.add(response["id"])
        elif event["action"] == "message":
            calls.add(n)
    return len(calls)


@pytest.mark.parametrize("preset", builtin_names())
def test_every_development_file_replays_every_call(preset):
    files = real_transcripts()
    if not files:
        pytest.skip("../shared/data/transcripts is absent (fresh clone without shared data)")
    wrong, violations = [], []
    for path in files:
        report = replay(path, preset, state_dir=None)
        reasons = {o["reason"]: o for o in report.not_replayed}
        abandoned = reasons.get(ABANDONED, {"count": 0})["count"]
        if report.calls + abandoned != count_calls(path):
            wrong.append((path.name, report.calls, abandoned, count_calls(path)))
        violations += report.request_violations
        assert report.handler_errors == []
        assert all(
            o["count"] > 0 and o["where"] or o["reason"] == ABANDONED for o in reasons.values()
        )
    assert wrong == [] and violations == []
