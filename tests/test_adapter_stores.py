"""The framework adapters on a store (``store=`` like ``open_session``): a conversation one
worker process served through the adapter is continued by another process, on every
store (the folder, SQLite, and the real PostgreSQL and Redis servers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from adapter_workers import PRESET
from framework_agents import agent_model, main_requests, require_extra

import stenograph

WORKER = Path(__file__).with_name("adapter_workers.py")
FRAMEWORKS = {"langchain": "langchain_anthropic", "pydantic_ai": "pydantic_ai"}


def serve(framework: str, preset: Path, store: str, server: str, first: int, last: int) -> dict:
    """Questions ``first`` to ``last - 1``, in a worker process of their own."""
    command = [sys.executable, str(WORKER), framework, str(preset), store, server]
    done = subprocess.run(
        [*command, str(first), str(last)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_conversation_continues_in_another_process(
    framework, store_url, messages_server, tmp_path
):
    require_extra(FRAMEWORKS[framework], framework.replace("_", "-"))
    messages_server.responder = agent_model
    preset = tmp_path / "preset.toml"
    preset.write_text(PRESET)
    first = serve(framework, preset, store_url, messages_server.url, 0, 2)
    sent_by_first = len(messages_server.requests)
    second = serve(framework, preset, store_url, messages_server.url, 2, 4)
    assert second["entries"][: len(first["entries"])] == first["entries"]
    assert len(second["entries"]) == len(set(second["entries"])) == 2 * len(first["entries"])
    for bad in ("HistoryTruncated", "HistoryNotFollowed", "HandlerFailed", "RequestViolation"):
        assert bad not in second["kinds"]
    assert "ThresholdDecision" in second["kinds"]
    continued = main_requests(messages_server)[sent_by_first]  # the second worker's first
    assert "Question 0" in json.dumps(continued["messages"])
    assert "Question 2" in json.dumps(continued["messages"][-1])

    engine = stenograph.Engine.from_preset(str(preset))
    with engine.open_session("conv-1", store=store_url) as session:
        assert [e.uuid for e in session.history] == second["entries"]
        assert stenograph.check_pairing(session.history.messages()) == []
        state = session.handler_state("update-threshold")
        assert state.get("initialized") is True
