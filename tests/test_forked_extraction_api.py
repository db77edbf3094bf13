"""forked-extraction through the real anthropic SDK against the local Messages-API server."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import weakref
from pathlib import Path

import pytest

import stenograph
from stenograph import (
    ExtractionFailed,
    ExtractionFinished,
    ToolCallRefused,
)
from stenograph.testing import Reply

PROMPT_MARK = "update the session notes"
EDITOR = {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}
READ = {
    "name": "Read",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}
TOOLS = [READ, EDITOR]
SYSTEM = "You are a careful coding agent."


def preset(tmp_path: Path, **fork_settings) -> str:
    settings = {
        "backend": "anthropic",
        "maxTurns": 6,
        "timeoutSeconds": 5,
        "maxRetries": 0,
        **fork_settings,
    }
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
    path = tmp_path / "fork.toml"
    path.write_text(
        'strict = true\n[[handlers]]\nuse = "update-threshold"\nminimumMessageTokensToInit = 50\n'
        "minimumTokensBetweenUpdate = 20\ntoolCallsBetweenUpdates = 1\n"
        f'[[handlers]]\nuse = "forked-extraction"\n{lines}'
    )
    return str(path)


def is_fork(request) -> bool:
    return any(
        m["role"] == "user" and PROMPT_MARK in json.dumps(m) and "<notes path=" in json.dumps(m)
        for m in request.body["messages"]
    )


def last_text(body: dict) -> str:
    """The text of the request's last message (the fork's prompt after any tool results)."""
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[-1]["text"]


def notes_path(request) -> str:
    messages = request.body["messages"]
    prompt = next(m for m in messages if m["role"] == "user" and PROMPT_MARK in json.dumps(m))
    content = prompt["content"]
    text = content if isinstance(content, str) else content[-1]["text"]
    return re.search(r'<notes path="([^"]+)">', text).group(1)


def fork_turn(request) -> int:
    """How many fork replies this request already holds."""
    messages = request.body["messages"]
    start = next(i for i, m in enumerate(messages) if PROMPT_MARK in json.dumps(m))
    return sum(m["role"] == "assistant" for m in messages[start:])


class Host:
    """A minimal agent loop driving a session through the SDK."""

    def __init__(self, tmp_path, client, server, fork_steps, session_id="s", **settings):
        self.server, self.fork_steps = server, fork_steps
        engine = stenograph.Engine.from_preset(
            preset(tmp_path, **settings), services={"anthropic": client}
        )
        self.client = client
        self.session = engine.open_session(session_id, state_dir=tmp_path)
        self.main_replies: list[Reply] = []
        server.responder = self.respond

    def respond(self, request):
        if is_fork(request):
            return self.fork_steps(request)
        return self.main_replies.pop(0)

    def turn(self, text: str, reply: Reply, wait: bool = True):
        pending = self.session.history[-1].tool_use_ids if len(self.session.history) else ()
        results = [
            {"type": "tool_result", "tool_use_id": i, "content": "output " * 30} for i in pending
        ]
        body = text + " " + "details " * 40
        self.session.append({"role": "user", "content": [*results, {"type": "text", "text": body}]})
        self.main_replies.append(reply)
        request = self.session.pre_call(model="claude-test", system=SYSTEM, tools=TOOLS)
        response = self.client.messages.create(**request, max_tokens=1000)
        self.session.post_sampling(response)
        if wait:
            assert self.session.wait_for_background(10)
        return request, response

    def fork_requests(self):
        return [r for r in self.server.requests if r.path == "/v1/messages" and is_fork(r)]

    def events(self, kind):
        return [e for e in self.session.events if isinstance(e, kind)]

    @property
    def notes(self) -> Path:
        return Path(self.session.folder) / "session-memory.md"


def edit(path: str, old: str, new: str) -> tuple[str, dict]:
    return (
        "str_replace_based_edit_tool",
        {"command": "str_replace", "path": path, "old_str": old, "new_str": new},
    )


def good_fork(request) -> Reply:
    if fork_turn(request) == 0:
        path = notes_path(request)
        return Reply.tool_uses([edit(path, "# Current State\n", "# Current State\n- fixing\n")])
    return Reply.text("Notes updated.")


def test_fork_shares_the_main_prefix_and_the_gate_holds(
    tmp_path, messages_server, anthropic_client
):
    outside = tmp_path / "outside.md"
    outside.write_text("# Current State\nuntouched\n")
    link = tmp_path / "link.md"

    def fork(request):
        path = notes_path(request)
        if not link.exists():
            link.symlink_to(outside)
        step = fork_turn(request)
        if step == 0:
            return Reply.tool_uses(
                [
                    edit(str(outside), "untouched", "pwned"),
                    edit(
                        str(
                            Path(path).parent / ".." / Path(path).parent.name / "session-memory.md"
                        ),
                        "# Current State\n",
                        "# Current State\n- via dotdot\n",
                    ),
                    edit(str(link), "untouched", "pwned"),
                    ("Bash", {"command": f"echo pwned > {path}"}),
                    edit(path, "# Current State\n", "# Current State\n- Fixing the parser bug\n"),
                ],
                text="Updating the notes.",
            )
        return Reply.text("Done.")

    host = Host(tmp_path, anthropic_client, messages_server, fork)
    main_request, response = host.turn(
        "Fix the parser bug",
        Reply.tool_use("Read", {"file_path": "/src/parser.py"}, text="Reading."),
    )
    (fork_request, second) = host.fork_requests()
    body = fork_request.body
    assert body["model"] == main_request["model"] and body["system"] == SYSTEM
    assert body["tools"] == TOOLS
    shared = body["messages"][:-1]
    assert json.dumps(shared[:-1]) == json.dumps(main_request["messages"])
    last = dict(shared[-1])
    assert last["content"][-1].pop("cache_control") == {"type": "ephemeral"}
    assert last == host.session.history.messages()[-1]
    *answers, prompt = body["messages"][-1]["content"]  # the open Read call answered first
    assert [a["tool_use_id"] for a in answers] == [response.content[-1].id]
    assert str(host.notes) in prompt["text"] and "# Worklog" in prompt["text"]
    results = second.body["messages"][-1]["content"]
    refusal = f"only editing {host.notes} is allowed"
    assert [r.get("is_error", False) for r in results] == [True, True, True, True, False]
    assert all(r["content"] == refusal for r in results[:4])
    assert outside.read_text() == "# Current State\nuntouched\n"
    notes = host.notes.read_text()
    assert "- Fixing the parser bug" in notes and "via dotdot" not in notes
    assert [e.tool for e in host.events(ToolCallRefused)] == ["str_replace_based_edit_tool"] * 3 + [
        "Bash"
    ]
    finished = host.events(ExtractionFinished)[0]
    assert finished.turns == 2 and finished.backend == "anthropic" and finished.input_tokens > 0
    state = host.session.handler_state("update-threshold")
    assert state["lastExtractedUuid"] == host.session.history[-1].uuid
    assert not host.session.history.by_uuid.keys() & {"fork"}
    assert all(PROMPT_MARK not in json.dumps(e.content) for e in host.session.history)


def test_claude_code_edit_tool_is_used_when_the_host_has_it(
    tmp_path, messages_server, anthropic_client
):
    def fork(request):
        if fork_turn(request) == 0:
            return Reply.tool_use(
                "Edit",
                {
                    "file_path": notes_path(request),
                    "old_string": "# Worklog\n",
                    "new_string": "# Worklog\n- read parser\n",
                },
            )
        return Reply.text("ok")

    host = Host(tmp_path, anthropic_client, messages_server, fork)
    global TOOLS
    saved, TOOLS = (
        TOOLS,
        [READ, {"name": "Edit", "description": "edit", "input_schema": {"type": "object"}}],
    )
    try:
        host.turn("Go", Reply.tool_use("Read", {"file_path": "/a"}))
    finally:
        TOOLS = saved
    assert "- read parser" in host.notes.read_text()
    assert "the Edit tool (file_path" in last_text(host.fork_requests()[0].body)


def test_without_an_edit_tool_the_fork_rewrites_in_a_fence(
    tmp_path, messages_server, anthropic_client
):
    def fork(request):
        notes = last_text(request.body)
        current = re.search(r'<notes path="[^"]+">\n(.*)\n</notes>', notes, re.S).group(1)
        new = current.replace("# Learnings\n", "# Learnings\n- fences work\n")
        return Reply.text(f"Here:\n```markdown\n{new}\n```")

    host = Host(tmp_path, anthropic_client, messages_server, fork)
    global TOOLS
    saved, TOOLS = TOOLS, [READ]
    try:
        host.turn("Go", Reply.tool_use("Read", {"file_path": "/a"}))
    finally:
        TOOLS = saved
    fork_request = host.fork_requests()[0].body
    assert fork_request["tools"] == [READ]
    assert "fenced block" in last_text(fork_request)
    assert "- fences work" in host.notes.read_text()


FAULTS = {
    "429": lambda: Reply.error(429),
    "500": lambda: Reply.error(500),
    "529 overloaded": lambda: Reply.error(529),
    "timeout": lambda: Reply.text("late", delay=3),
    "connection reset": Reply.reset,
    "malformed JSON": Reply.malformed,
    "reply with no edit": lambda: Reply.text("I would rather not."),
    "edit that drops a heading": None,
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_matrix_then_a_later_success(tmp_path, messages_server, anthropic_client, fault):
    calls = {"n": 0}

    def fork(request):
        calls["n"] += 1
        if calls["n"] == 1:
            if FAULTS[fault] is None:
                return Reply.tool_use(*edit(notes_path(request), "# Learnings\n", ""))
            return FAULTS[fault]()
        return good_fork(request)

    host = Host(tmp_path, anthropic_client, messages_server, fork, timeoutSeconds=0.5)
    _, response = host.turn("First", Reply.tool_use("Read", {"file_path": "/a"}))
    assert response.content  # the host's own call was not affected
    failed = host.events(ExtractionFailed)
    assert len(failed) == 1, host.session.events
    template = host.notes.read_text()
    assert "- fixing" not in template and "# Learnings" in template
    state = host.session.handler_state("update-threshold")
    assert "lastExtractedUuid" not in state
    host.turn("Second", Reply.tool_use("Read", {"file_path": "/b"}))
    assert len(host.events(ExtractionFinished)) == 1
    assert "- fixing" in host.notes.read_text()
    assert state["lastExtractedUuid"] == host.session.history[-1].uuid


def test_main_thread_never_waits_for_the_fork_and_requests_coalesce(
    tmp_path, messages_server, anthropic_client
):
    release = threading.Event()
    held = threading.Event()

    def fork(request):
        if fork_turn(request) == 0 and not release.is_set():
            held.set()
            release.wait(10)
        return good_fork(request)

    host = Host(tmp_path, anthropic_client, messages_server, fork)
    host.turn("One", Reply.tool_use("Read", {"file_path": "/a"}), wait=False)
    assert held.wait(5)
    assert host.session.wait_for_background(0) is False  # the fork is still running
    for text in ("Two", "Three"):
        host.turn(text, Reply.tool_use("Read", {"file_path": f"/{text}"}), wait=False)
    assert len([r for r in host.fork_requests() if fork_turn(r) == 0]) == 1
    release.set()
    assert host.session.wait_for_background(10)
    firsts = [r for r in host.fork_requests() if fork_turn(r) == 0]
    assert len(firsts) == 2  # the two decisions made meanwhile ran as one
    assert len(host.events(ExtractionFinished)) == 2
    slot = next(s for s in host.session.engine.slots if s.name == "forked-extraction")
    writer = slot.handler.writer(host.session)
    kept = {f.name: getattr(writer, f.name) for f in dataclasses.fields(writer)}
    assert not [name for name, value in kept.items() if isinstance(value, dict) and value]


def test_fifty_sessions_with_concurrent_forks(tmp_path, messages_server, anthropic_client):
    def fork(request):
        if fork_turn(request) == 0:
            first = request.body["messages"][0]["content"]
            marker = re.search(r"session-(\d+)", first).group(0)
            return Reply.tool_uses(
                [edit(notes_path(request), "# Worklog\n", f"# Worklog\n- {marker}\n")], delay=0.05
            )
        return Reply.text("ok")

    hosts = []
    for i in range(50):
        host = Host(tmp_path, anthropic_client, messages_server, fork, session_id=f"s{i}")
        hosts.append(host)
    messages_server.responder = lambda request: (
        fork(request) if is_fork(request) else Reply.tool_use("Read", {"file_path": "/x"})
    )
    for i, host in enumerate(hosts):
        host.session.append({"role": "user", "content": f"session-{i} " + "words " * 60})
        request = host.session.pre_call(model="m", system=SYSTEM, tools=TOOLS)
        host.session.post_sampling(anthropic_client.messages.create(**request, max_tokens=100))
    for host in hosts:
        assert host.session.wait_for_background(20)
    for i, host in enumerate(hosts):
        notes = host.notes.read_text()
        assert re.findall(r"- session-\d+", notes) == [f"- session-{i}"], notes


def test_a_dropped_session_is_freed_after_a_fork_through_the_sdk(
    tmp_path, messages_server, anthropic_client, no_cyclic_gc
):
    host = Host(tmp_path, anthropic_client, messages_server, good_fork)
    host.turn("Fix the parser bug", Reply.tool_use("Read", {"file_path": "/src/parser.py"}))
    assert host.events(ExtractionFinished)
    host.session.close()
    session = weakref.ref(host.session)
    messages_server.responder = None
    del host
    assert session() is None  # freed by reference counting: no cycles
