"""The offline backend: notes filled from the history itself, deterministically, with no
model and no network — files from tool inputs, commands, failed tool results, a worklog."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from ...engine.entries import Entry
from ...engine.notes import sections

SECTION_CHARS = 6000
STEPS_SHOWN, COMMANDS_SHOWN, FAILURES_SHOWN = 60, 25, 20  # the newest, in their sections
PATH_KEYS = ("file_path", "path", "notebook_path")
COMMAND_TOOLS = ("Bash", "bash", "shell", "run_command", "execute_command")
ERROR_PATTERNS = (
    re.compile(r"\w(Error|Exception)\b:"),
    re.compile(r"error|failed|exception|denied|not found|invalid", re.IGNORECASE),
)
TOP_HEADING = re.compile(r"^(# )", re.MULTILINE)
META_TEXT = re.compile(r"^\s*(<[a-z-]+>|Caveat:)")


def offline_notes(template: str, facts: Facts) -> str:
    """The template with every section it can fill written from ``facts``."""
    bodies = {
        "Session Title": facts.title(),
        "Current State": facts.current_state(),
        "Task specification": facts.task(),
        "Files and Functions": facts.files(),
        "Workflow": facts.commands(),
        "Errors & Corrections": facts.errors(),
        "Codebase and System Documentation": facts.folders(),
        "Learnings": facts.learnings(),
        "Key results": facts.key_result(),
        "Worklog": facts.worklog(),
    }
    parts = []
    for section in sections(template):
        name = section.heading[2:].strip()
        body = _cap(bodies.get(name, ""))
        description = section.body.strip("\n")
        parts.append(f"{section.heading}\n{description}\n" + (f"\n{body}\n" if body else "") + "\n")
    return "".join(parts).rstrip("\n") + "\n"


class Facts:
    """What the history says, gathered incrementally: ``feed`` each entry once. Only what
    the notes can show is kept (the newest steps, failures and commands, the follow-up
    requests that fit in their section, the calls still unanswered), so the facts do not
    grow with the session."""

    def __init__(self) -> None:
        self.upto = 0
        self.first_request: str | None = None
        self.latest_request = ""  # its first line
        self.follow_ups: list[str] = []  # the first lines the task section can show
        self._task_chars = 0
        self.latest_reply: str | None = None
        self.paths: dict[str, list[str]] = {}
        self.shell: dict[str, str] = {}  # the newest commands, oldest first
        self.failures: deque[str] = deque(maxlen=FAILURES_SHOWN)
        self.failed = 0
        self.steps: deque[str] = deque(maxlen=STEPS_SHOWN)
        self.stepped = 0
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}  # tool calls not answered yet

    def feed(self, entries: Sequence[Entry]) -> Facts:
        """Take in the entries after the ones already seen."""
        for entry in entries[self.upto :]:
            (self._assistant if entry.role == "assistant" else self._user)(entry)
        self.upto = max(self.upto, len(entries))
        return self

    def _user(self, entry: Entry) -> None:
        for block in entry.blocks():
            if block.get("type") == "text" and not META_TEXT.match(block.get("text", "")):
                self._request(block["text"].strip())
            elif block.get("type") == "tool_result":
                name, args = self.calls.pop(block.get("tool_use_id", ""), ("tool", {}))
                if block.get("is_error"):
                    self.failures.append(f"{name} {_summary(args)}: {_error_line(_text(block))}")
                    self.failed += 1

    def _request(self, text: str) -> None:
        """A user request: the first is kept whole, later ones by their first line while
        the task section has room for them (later lines would be cut from it)."""
        self.latest_request = _first_line(text, 300)
        if self.first_request is None:
            self.first_request = text
            self._task_chars = len(text[:1500]) + len("\n\nFollow-up requests:")
        elif self._task_chars <= SECTION_CHARS:
            self.follow_ups.append(f"- {self.latest_request}")
            self._task_chars += 1 + len(self.follow_ups[-1])

    def _assistant(self, entry: Entry) -> None:
        texts, tools = [], []
        for block in entry.blocks():
            if block.get("type") == "text" and block.get("text", "").strip():
                texts.append(block["text"].strip())
            elif block.get("type") == "tool_use":
                given = block.get("input")
                args: dict[str, Any] = given if isinstance(given, dict) else {}
                self._tool(str(block.get("id")), str(block.get("name")), args)
                tools.append(f"{block.get('name')} {_summary(args)}".strip())
        if texts:
            self.latest_reply = "\n".join(texts)
        what = "; ".join(tools) if tools else _first_line(" ".join(texts))
        if what:
            self.steps.append(f"- {_clock(entry.timestamp)}{what}")
            self.stepped += 1

    def _tool(self, tool_id: str, name: str, args: dict[str, Any]) -> None:
        self.calls[tool_id] = (name, args)
        for key in PATH_KEYS:
            if isinstance(args.get(key), str) and args[key].strip():
                tools = self.paths.setdefault(args[key].strip(), [])
                if name not in tools:
                    tools.append(name)
        command = args.get("command")
        if name in COMMAND_TOOLS and isinstance(command, str) and command.strip():
            self.shell.pop(command.strip(), None)
            self.shell[command.strip()] = str(args.get("description") or "")
            if len(self.shell) > COMMANDS_SHOWN:
                del self.shell[next(iter(self.shell))]

    def title(self) -> str:
        return "" if self.first_request is None else _first_line(self.first_request, 80)

    def current_state(self) -> str:
        lines = []
        if self.first_request is not None:
            lines.append(f"Latest request: {self.latest_request}")
        if self.latest_reply is not None:
            lines.append(f"Latest response: {_first_line(self.latest_reply, 400)}")
        if self.steps:
            lines.append(f"Last step: {self.steps[-1][2:]}")
        return "\n".join(lines)

    def task(self) -> str:
        if self.first_request is None:
            return ""
        later = ["", "Follow-up requests:", *self.follow_ups] if self.follow_ups else []
        return "\n".join([self.first_request[:1500], *later])

    def files(self) -> str:
        return _bullets(f"`{path}` ({', '.join(tools)})" for path, tools in self.paths.items())

    def commands(self) -> str:
        return _bullets(
            f"`{_first_line(cmd, 200)}`" + (f" — {desc}" if desc else "")
            for cmd, desc in self.shell.items()
        )

    def errors(self) -> str:
        return _bullets(self.failures)

    def folders(self) -> str:
        counts: dict[str, int] = {}
        for path in self.paths:
            folder = path.rsplit("/", 1)[0] if "/" in path else "."
            counts[folder] = counts.get(folder, 0) + 1
        return _bullets(f"`{folder}/`: {n} file(s) touched" for folder, n in counts.items())

    def learnings(self) -> str:
        if not self.failed:
            return ""
        return f"{self.failed} tool call(s) failed; see Errors & Corrections."

    def key_result(self) -> str:
        return "" if self.latest_reply is None else self.latest_reply[:1500]

    def worklog(self) -> str:
        skipped = self.stepped - len(self.steps)
        return "\n".join([*([f"- ({skipped} earlier steps)"] if skipped else []), *self.steps])


def _text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


def _summary(args: dict[str, Any]) -> str:
    for key in (*PATH_KEYS, "command", "pattern", "url", "query"):
        if isinstance(args.get(key), str):
            return _first_line(args[key], 120)
    return ""


def _first_line(text: str, limit: int = 160) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _error_line(text: str) -> str:
    """The most telling line of an error output: an ``XxxError:`` line, else one that
    says it failed, else the first line."""
    lines = [line.strip(" =") for line in text.splitlines()]
    for pattern in ERROR_PATTERNS:
        for line in lines:
            if pattern.search(line):
                return _first_line(line)
    return _first_line(text)


def _clock(timestamp: float | None) -> str:
    return "" if timestamp is None else datetime.fromtimestamp(timestamp, UTC).strftime("%H:%M ")


def _bullets(items: Iterable[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def _cap(text: str) -> str:
    """Within the section budget, and with no line that would read as a section heading."""
    text = TOP_HEADING.sub(r"\\\1", text)
    if len(text) <= SECTION_CHARS:
        return text
    return text[:SECTION_CHARS].rsplit("\n", 1)[0] + "\n- … (cut to the section budget)"
