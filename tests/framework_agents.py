"""What the framework adapter tests share: the optional extras, a preset with every
built-in handler on small thresholds, a Messages-API responder that plays a tool-using
model and the notes fork, and the checks on what reached the wire."""

from __future__ import annotations

import importlib
import json
import os
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import stenograph
from stenograph.testing import Reply

Message = dict[str, Any]

PROMPT_MARK = "update the session notes"
NOTE_LINE = "- read the files the user named; next: summarise them"
NOTES = (
    resources.files("stenograph.handlers.forked_extraction")
    .joinpath("template.md")
    .read_text(encoding="utf-8")
    .replace("# Current State\n", f"# Current State\n{NOTE_LINE}\n", 1)
)
TOOL_OUTPUT_CHARS = 1_500
SUMMARY_MARK = "Context Extraction Assistant"  # LangChain's summarization prompt
SUMMARY = "Summary so far: the files of src/ were read one by one."


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` of an optional extra; skip without it, or fail when
    ``STENOGRAPH_REQUIRE_EXTRAS=1`` (CI installs every extra)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("STENOGRAPH_REQUIRE_EXTRAS") == "1":
            raise
        pytest.skip(
            f"{module} is not installed (pip install 'stenograph[{extra}]'): {exc}",
            allow_module_level=True,
        )


def all_handlers_preset(tmp_path: Path) -> str:
    """inactivity-memorize (300 s), update-threshold and forked-extraction on small
    thresholds (notes after a few turns), memory-compact at 1,000 tokens."""
    path = tmp_path / "all.toml"
    path.write_text(
        'strict = true\n[[handlers]]\nuse = "inactivity-memorize"\n'
        '[[handlers]]\nuse = "update-threshold"\nminimumMessageTokensToInit = 300\n'
        "minimumTokensBetweenUpdate = 200\ntoolCallsBetweenUpdates = 1\n"
        '[[handlers]]\nuse = "forked-extraction"\nbackend = "anthropic"\nmaxRetries = 0\n'
        'timeoutSeconds = 10\n[[handlers]]\nuse = "memory-compact"\nmaxContextTokens = 1000\n'
        "minKeepTokens = 0\nminKeepTextMessages = 1\nmaxKeepTokens = 600\nwaitSeconds = 5\n"
    )
    return str(path)


def is_fork(body: dict[str, Any]) -> bool:
    """Whether a request is the notes writer's (its last user message is the prompt)."""
    return PROMPT_MARK in json.dumps(body["messages"][-1])


def agent_model(request: Any) -> Reply:
    """A tool-using model: a new user text gets a ``read_file`` call, a tool result gets a
    short answer; the notes fork gets a full rewrite of the notes, a summarization request
    a summary."""
    body = request.body
    if is_fork(body):
        return Reply.text(f"```markdown\n{NOTES}```")
    if SUMMARY_MARK in json.dumps(body["messages"]):
        return Reply.text(SUMMARY)
    last = body["messages"][-1]["content"]
    blocks = [last] if isinstance(last, str) else last
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
        return Reply.text(f"Read it ({len(body['messages'])} messages so far).")
    return Reply.tool_use("read_file", {"path": f"src/file{len(body['messages'])}.py"})


def read_file_output(path: str) -> str:
    """What the test tool returns: long enough for memorize and compaction to matter."""
    return (f"# {path}\n" + "def f(x):\n    return x + 1\n" * 200)[:TOOL_OUTPUT_CHARS]


def main_requests(server: Any) -> list[dict[str, Any]]:
    """The bodies of the agent's own requests (not the notes fork's)."""
    return [r.body for r in server.requests if not is_fork(r.body)]


def fork_requests(server: Any) -> list[dict[str, Any]]:
    """The bodies of the notes fork's requests."""
    return [r.body for r in server.requests if is_fork(r.body)]


def normalised(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the API reads them: consecutive same-role messages merged, string
    content (of a message or a tool result) as one text block, no ``cache_control`` keys (a
    breakpoint turns a string into a block; LangChain merges a compaction's preamble with
    the next user message; pydantic-ai sends every text as blocks)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if out and out[-1]["role"] == message["role"]:
            out[-1]["content"] += _no_breakpoints(blocks)
        else:
            out.append({"role": message["role"], "content": _no_breakpoints(blocks)})
    return out


def _no_breakpoints(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("type") == "tool_result" and isinstance(value.get("content"), str):
            value = {**value, "content": [{"type": "text", "text": value["content"]}]}
        return {k: _no_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_no_breakpoints(v) for v in value]
    return value


def check_wire(server: Any, session: stenograph.Session) -> None:
    """Every request passed the outgoing-request guard; each notes fork request starts
    with the main thread's prefix (the system, tools and messages of a main request, then
    the response it got) and puts a cache breakpoint on the last shared message."""
    bodies = [r.body for r in server.requests]
    for body in bodies:
        assert stenograph.check_pairing(body["messages"]) == [], body["messages"]
    assert not [e for e in session.events if e.kind in ("RequestViolation", "HandlerFailed")]
    mains = main_requests(server)
    forks = fork_requests(server)
    assert forks, "the notes fork never reached the server"
    for fork in forks:
        shared = fork["messages"][:-1]
        last = shared[-1]["content"]
        assert isinstance(last, list) and last[-1]["cache_control"] == {"type": "ephemeral"}
        assert shared[-1]["role"] == "assistant"
        assert any(
            m["system"] == fork["system"]
            and m["tools"] == fork["tools"]
            and m["model"] == fork["model"]
            and normalised(m["messages"]) == normalised(shared[:-1])
            for m in mains
        ), "the fork's prefix is not a main request and its response"


def check_handlers(server: Any, session: stenograph.Session) -> None:
    """Threshold decisions, notes written through the Anthropic backend, a compaction and
    a memorize all show in the session's events, and a later wire request carries the
    memorized placeholder."""
    kinds = [e.kind for e in session.events]
    assert "ThresholdDecision" in kinds
    finished = [e for e in session.events if e.kind == "ExtractionFinished"]
    assert finished and {e.backend for e in finished} == {"anthropic"}
    assert "EntriesMemorized" in kinds
    assert "Compacted" in kinds
    assert any(
        "[memorized: read_file result left out" in json.dumps(b) for b in main_requests(server)
    )
    assert any(NOTE_LINE in json.dumps(b["messages"][0]) for b in main_requests(server))


def check_followed(server: Any, session: stenograph.Session, history: list[Message]) -> None:
    """After a run whose history other code changed: no request broke the guard, no
    handler failed, the session holds exactly the framework's list, and it followed the
    changes (a truncation or adopted edits, never a call it could not take)."""
    for body in (r.body for r in server.requests):
        assert stenograph.check_pairing(body["messages"]) == [], body["messages"]
    kinds = [e.kind for e in session.events]
    for bad in ("PairingViolation", "HandlerFailed", "HistoryNotFollowed"):
        assert bad not in kinds, [e for e in session.events if e.kind == bad]
    assert {"HistoryTruncated", "HistoryEdited"} & set(kinds)
    assert [e.content for e in session.history] == [m["content"] for m in history]
