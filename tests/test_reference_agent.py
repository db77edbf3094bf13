"""The reference host (examples/agent) end to end: the agent runs as a real subprocess in a
pty (pexpect), the real SDK inside it talks to a local Messages-API server in this process."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import stenograph
from stenograph.testing import MessagesServer, Reply

pexpect = pytest.importorskip("pexpect")

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "examples" / "agent" / "stenograph_agent.py"
FORK_MARK = "update the session notes"
STATUS = re.compile(r"\[context ([\d,]+) tok · memorized (\d+) · notes updated (\d+)\]")
TASK = "Fix the greeting in hello.py, then run it."
FOLLOW_UP = "What did you change?"


# ---------------------------------------------------------------------------------------
# The scripted model
# ---------------------------------------------------------------------------------------


def text_of(message: dict) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def tool_results(message: dict) -> list[dict]:
    content = message["content"]
    return (
        [b for b in content if b.get("type") == "tool_result"] if isinstance(content, list) else []
    )


def is_fork(body: dict) -> bool:
    return any(m["role"] == "user" and FORK_MARK in text_of(m) for m in body["messages"])


class Model:
    """A responder: the main thread's replies follow ``script`` (keyed by the turn's user
    text, then by how many replies the turn already has); forked-extraction's requests get
    one edit of the notes with the host's text editor tool, then a short text."""

    def __init__(self, script: dict[str, list[Reply]]) -> None:
        self.script = script
        self.lock = threading.Lock()
        self.main_replies = 0  # answered with a message
        self.fork_requests = 0
        self.fail_next: int | None = None  # answer the next main request with this status

    def __call__(self, request) -> Reply:
        body = request.body
        if is_fork(body):
            with self.lock:
                self.fork_requests += 1
            return self.fork(body["messages"])
        with self.lock:
            if self.fail_next is not None:
                status, self.fail_next = self.fail_next, None
                return Reply.error(status)
        messages = body["messages"]
        start = max(
            i
            for i, m in enumerate(messages)
            if m["role"] == "user" and text_of(m).strip() and FORK_MARK not in text_of(m)
        )
        # the turn's text is the newest text a user message holds (after any tool results)
        turn = text_of(messages[start]).strip().splitlines()[-1]
        step = sum(m["role"] == "assistant" for m in messages[start:])
        reply = self.script[turn][step]
        with self.lock:
            if reply.kind == "message":
                self.main_replies += 1
        return reply

    @staticmethod
    def fork(messages: list[dict]) -> Reply:
        if messages[-1]["role"] == "user" and FORK_MARK in text_of(messages[-1]):
            prompt = text_of(messages[-1])
            path = re.search(r'<notes path="([^"]+)">', prompt).group(1)
            heading = re.search(r"# Current State\n_[^\n]*_", prompt).group(0)
            edit = {
                "command": "str_replace",
                "path": path,
                "old_str": heading,
                "new_str": heading + "\nFixed the greeting typo in hello.py.",
            }
            return Reply.tool_use("str_replace_based_edit_tool", edit)
        return Reply.text("Notes updated.")


def task_script() -> dict[str, list[Reply]]:
    edit = {"command": "str_replace", "path": "hello.py", "old_str": "Helo", "new_str": "Hello"}
    return {
        TASK: [
            Reply.tool_use("list_files", {}, text="Let me look around."),
            Reply.tool_use("read_file", {"path": "hello.py"}),
            Reply.tool_use("str_replace_based_edit_tool", edit, text="Found it: a typo."),
            Reply.tool_use("run_command", {"command": "touch refused.txt"}),
            Reply.tool_use("run_command", {"command": "echo ran > ran.txt && cat hello.py"}),
            Reply.text("Fixed the greeting in hello.py: it now prints Hello."),
        ],
        FOLLOW_UP: [Reply.text("I changed Helo to Hello in hello.py.")],
    }


# ---------------------------------------------------------------------------------------
# Running the agent
# ---------------------------------------------------------------------------------------


@pytest.fixture
def server():
    with MessagesServer() as server:
        yield server
        assert server.errors == []


def agent_env(server: MessagesServer, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "STENOGRAPH"))}
    env.update(
        ANTHROPIC_BASE_URL=server.url,
        ANTHROPIC_API_KEY="test",
        TERM="dumb",
        COLUMNS="250",
        NO_COLOR="1",
        PYTHONUNBUFFERED="1",
        PYTHONIOENCODING="utf-8",
        HOME=str(home),
    )
    return env


def interactive_signals() -> None:
    """Ctrl-C as in an interactive shell, even when the tests run as a background job (which
    ignores SIGINT, and Python then keeps it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Agent:
    """One agent process in a pty."""

    def __init__(self, server, tmp_path: Path, workdir: Path, session: str, *extra: str) -> None:
        args = [
            str(AGENT),
            "--workdir",
            str(workdir),
            "--session",
            session,
            "--state-dir",
            str(tmp_path / "state"),
            "--model",
            "claude-test",
            "--max-retries",
            "0",
            *extra,
        ]
        self.log = io.StringIO()
        self.child = pexpect.spawn(
            sys.executable,
            args,
            env=agent_env(server, tmp_path),
            cwd=str(tmp_path),
            encoding="utf-8",
            codec_errors="replace",
            dimensions=(40, 250),
            timeout=15,
            preexec_fn=interactive_signals,
        )
        self.child.logfile_read = self.log

    def expect(self, pattern: str, regex: bool = False) -> str:
        try:
            if regex:
                self.child.expect(pattern)
            else:
                self.child.expect_exact(pattern)
        except (pexpect.TIMEOUT, pexpect.EOF):
            raise AssertionError(
                f"did not see {pattern!r}; output:\n{self.log.getvalue()}"
            ) from None
        return self.child.before

    def say(self, line: str) -> None:
        self.expect("you> ")
        self.child.sendline(line)

    def quit(self) -> str:
        self.say("/quit")
        self.expect("resume with --session")
        self.child.expect(pexpect.EOF)
        self.child.close()
        output = self.log.getvalue()
        print(output)  # shown by pytest when a later assertion fails
        assert self.child.exitstatus == 0, output
        return output


def replay_json(transcript: Path, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    result = subprocess.run(
        [sys.executable, "-m", "stenograph", "replay", str(transcript), "--json"]
        + ["--state-dir", str(tmp_path / "replay-state")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def make_workdir(tmp_path: Path) -> Path:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "hello.py").write_text('print("Helo, world")\n')
    (workdir / "README.md").write_text("# demo\n")
    return workdir


def low_threshold_preset(tmp_path: Path) -> Path:
    """The default preset, with update-threshold low enough for a short session and the
    notes written through the (local) API."""
    path = tmp_path / "agent-test.toml"
    path.write_text(
        'name = "agent-test"\nextends = "default"\n'
        '[[handlers]]\nuse = "update-threshold"\nminimumMessageTokensToInit = 100\n'
        "minimumTokensBetweenUpdate = 100\ntoolCallsBetweenUpdates = 3\n"
        '[[handlers]]\nuse = "forked-extraction"\nbackend = "anthropic"\nmaxRetries = 0\n'
    )
    return path


# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------


def test_task_end_to_end_then_resume(server, tmp_path):
    workdir = make_workdir(tmp_path)
    model = Model(task_script())
    server.responder = model
    preset = str(low_threshold_preset(tmp_path))

    agent = Agent(server, tmp_path, workdir, "task", "--preset", preset)
    agent.say(TASK)
    agent.expect("Let me look around.")
    agent.expect(STATUS.pattern, regex=True)
    agent.expect("Run `touch refused.txt`? [y/N]")
    assert not (workdir / "ran.txt").exists()
    agent.child.sendline("n")
    agent.expect("the user declined to run this command")
    agent.expect("Run `echo ran > ran.txt && cat hello.py`? [y/N]")
    assert not (workdir / "ran.txt").exists()  # asked first, then run
    agent.child.sendline("y")
    agent.expect("Fixed the greeting in hello.py")
    output = agent.quit()

    # the tools did their work, in the workdir
    assert (workdir / "hello.py").read_text() == 'print("Hello, world")\n'
    assert (workdir / "ran.txt").read_text() == "ran\n"
    assert not (workdir / "refused.txt").exists()
    statuses = STATUS.findall(output)
    assert len(statuses) == 6  # one per model reply
    assert all(int(context.replace(",", "")) > 0 for context, _, _ in statuses)

    # what the model was told: the refusal as an error, the command's output
    main = [r.body for r in server.requests if r.path == "/v1/messages" and not is_fork(r.body)]
    assert len(main) == 6 == model.main_replies
    refused = tool_results(main[4]["messages"][-1])[0]
    assert refused["is_error"] is True and "declined" in json.dumps(refused["content"])
    ran = tool_results(main[5]["messages"][-1])[0]
    assert "is_error" not in ran and ran["content"] == 'exit status 0\nprint("Hello, world")'
    assert main[0]["tools"][3] == {
        "type": "text_editor_20250728",
        "name": "str_replace_based_edit_tool",
    }

    # forked-extraction wrote the notes with the host's text editor tool
    notes = tmp_path / "state" / "task" / "session-memory.md"
    assert model.fork_requests >= 2
    assert "Fixed the greeting typo in hello.py." in notes.read_text()
    assert int(re.search(r"notes updated (\d+) · transcript", output).group(1)) >= 1

    # the transcript: a JSON list of messages that `stenograph replay` reads
    transcript = tmp_path / "state" / "task" / "transcript.json"
    saved = json.loads(transcript.read_text())
    assert [m["role"] for m in saved][:3] == ["user", "assistant", "user"]
    assert all("timestamp" in m for m in saved)
    assert all("usage" in m for m in saved if m["role"] == "assistant")
    assert replay_json(transcript, tmp_path)["calls"] == 6

    # a second run with the same --session resumes; a 529 is shown in one line, then retried.
    # Its preset memorizes after any pause, so the earlier tool results are sent reduced.
    eager = tmp_path / "eager.toml"
    eager.write_text(
        f'extends = "{Path(preset).name}"\n'
        '[[handlers]]\nuse = "inactivity-memorize"\ninactivityThresholdSeconds = 0\n'
    )
    model.fail_next = 529
    before = len(server.requests)
    agent = Agent(server, tmp_path, workdir, "task", "--preset", str(eager))
    agent.expect("session task (resumed, 12 messages)")
    agent.say(FOLLOW_UP)
    line = agent.expect("press Enter to retry")
    assert "API error 529 overloaded_error: Overloaded" in line
    agent.say("")
    agent.expect("I changed Helo to Hello")
    agent.expect(STATUS.pattern, regex=True)
    assert STATUS.search(agent.quit().split(FOLLOW_UP)[-1]).group(2) == "10"

    resumed = [
        r.body for r in server.requests[before:] if r.path == "/v1/messages" and not is_fork(r.body)
    ]
    assert len(resumed) == 2  # the 529, then the retry: the same request
    assert resumed[0]["messages"] == resumed[1]["messages"]
    first = resumed[0]["messages"]
    assert text_of(first[0]) == TASK and text_of(first[-1]) == FOLLOW_UP
    assert len(first) == 13
    assert json.dumps(first).count("[memorized: ") == 5  # the five tool results
    final = json.loads(transcript.read_text())  # the transcript keeps the full history
    assert final[:12] == saved and "[memorized: " not in transcript.read_text()
    assert replay_json(transcript, tmp_path)["calls"] == 7 == model.main_replies


def test_paths_outside_the_workdir_are_refused(server, tmp_path):
    workdir = make_workdir(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (workdir / "link.txt").symlink_to(outside / "secret.txt")
    (workdir / "outdir").symlink_to(outside)
    probes = [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": str(outside / "secret.txt")}),
        ("read_file", {"path": "link.txt"}),
        ("read_file", {"path": "sub/../../outside/secret.txt"}),
        ("list_files", {"path": "outdir"}),
        ("search", {"pattern": "SECRET", "path": "outdir"}),
        ("str_replace_based_edit_tool", {"command": "view", "path": "/etc"}),
        (
            "str_replace_based_edit_tool",
            {"command": "str_replace", "path": "link.txt", "old_str": "TOP", "new_str": "NO"},
        ),
        (
            "str_replace_based_edit_tool",
            {"command": "create", "path": "outdir/new.txt", "file_text": "x"},
        ),
        ("search", {"pattern": "SECRET"}),  # allowed, but does not follow the symlinks out
        ("read_file", {"path": str(workdir / "README.md")}),  # absolute inside: allowed
    ]
    server.responder = Model(
        {"Probe.": [Reply.tool_uses(probes, text="Probing."), Reply.text("Probed.")]}
    )
    agent = Agent(server, tmp_path, workdir, "probe")
    agent.say("Probe.")
    agent.expect("Probed.")
    agent.quit()

    results = tool_results(server.requests[-1].body["messages"][-1])
    assert len(results) == len(probes)
    *refused, search_all, read_inside = results
    for (name, tool_input), result in zip(probes, refused, strict=False):
        assert result.get("is_error") is True, (name, tool_input, result)
        assert "outside the working directory" in result["content"], result
    assert search_all.get("is_error") is None and search_all["content"] == "no matches"
    assert read_inside.get("is_error") is None and "# demo" in read_inside["content"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_ctrl_c_during_a_model_call_keeps_the_session_whole(server, tmp_path):
    workdir = make_workdir(tmp_path)
    server.responder = Model(
        {
            "Take your time.": [Reply.text("Too late.", delay=30)],
            "Are you there?": [Reply.text("Yes, here.")],
        }
    )
    agent = Agent(server, tmp_path, workdir, "intr", "--preset", "inactivity-only")
    agent.say("Take your time.")
    assert server.wait_for_requests(1, timeout=10)
    agent.child.sendintr()
    agent.expect("interrupted: no reply was recorded")
    agent.say("Are you there?")
    agent.expect("Yes, here.")
    agent.quit()

    # the interrupted input went along with the next one, as one user message
    sent = server.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user"]
    assert "Take your time." in json.dumps(sent) and "Are you there?" in json.dumps(sent)
    engine = stenograph.Engine.from_preset("inactivity-only")
    with engine.open_session("intr", state_dir=tmp_path / "state") as session:
        assert [e.role for e in session.history] == ["user", "user", "assistant"]
    transcript = tmp_path / "state" / "intr" / "transcript.json"
    assert replay_json(transcript, tmp_path)["calls"] == 1


def load_tools_module():
    spec = importlib.util.spec_from_file_location(
        "workdir_tools", AGENT.parent / "workdir_tools.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_resolve_refuses_every_way_out(tmp_path):
    module = load_tools_module()
    workdir = make_workdir(tmp_path)
    (tmp_path / "outside").mkdir()
    (workdir / "loop").symlink_to(workdir / "loop")
    (workdir / "up").symlink_to(tmp_path)
    tools = module.WorkdirTools(workdir, approve=lambda command: False)
    assert tools.resolve("hello.py") == workdir.resolve() / "hello.py"
    assert tools.resolve(".") == workdir.resolve()
    assert tools.resolve("new/dir/file.txt") == workdir.resolve() / "new/dir/file.txt"
    for path in ("..", "../outside", "/", "/etc/passwd", "up/outside", "up", "a/../../x"):
        with pytest.raises(module.ToolError, match="outside the working directory"):
            tools.resolve(path)
    for bad in ("", None, 3, "a\x00b"):
        with pytest.raises(module.ToolError):
            tools.resolve(bad)
    with pytest.raises(module.ToolError):  # a symlink loop: an error, not a crash
        tools.run("read_file", {"path": "loop"})
    with pytest.raises(module.ToolError, match="declined"):
        tools.run("run_command", {"command": "touch x"})
    assert not (workdir / "x").exists()
