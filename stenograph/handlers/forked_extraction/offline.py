"""The offline backend: notes filled from the history itself, deterministically, with no
model and no network — files from tool inputs, commands, failed tool results, a worklog."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from ...engine.clock import parse_timestamp
from ...engine.entries import Entry
from ...engine.notes import sections

SECTION_CHARS = 6000
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


def snapshot(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """What the offline writer reads of each entry, as JSON-able data (a job's
    ``entries``): the content itself, not a copy."""
    return [{"role": e.role, "content": e.content, "timestamp": e.timestamp} for e in entries]


def facts_of(records: Iterable[dict[str, Any]]) -> Facts:
    """The facts of a :func:`snapshot` (or of journal records: an ISO time is read too)."""
    entries = [
        Entry(r["role"], r["content"], "", parse_timestamp(r.get("timestamp"))) for r in records
    ]
    return Facts().feed(entries)


class Facts:
    """What the history says, gathered incrementally: ``feed`` each entry once."""

    def __init__(self) -> None:
        self.upto = 0
        self.requests: list[str] = []
        self.replies: list[str] = []
        self.paths: dict[str, list[str]] = {}
        self.shell: dict[str, str] = {}
        self.failures: list[str] = []
        self.steps: list[str] = []
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}

    def feed(self, entries: Sequence[Entry]) -> Facts:
        """Take in the entries after the ones already seen."""
        for entry in entries[self.upto :]:
            (self._assistant if entry.role == "assistant" else self._user)(entry)
        self.upto = max(self.upto, len(entries))
        return self

    def _user(self, entry: Entry) -> None:
        for block in entry.blocks():
            if block.get("type") == "text" and not META_TEXT.match(block.get("text", "")):
                self.requests.append(block["text"].strip())
            elif block.get("type") == "tool_result" and block.get("is_error"):
                name, args = self.calls.get(block.get("tool_use_id", ""), ("tool", {}))
                self.failures.append(f"{name} {_summary(args)}: {_error_line(_text(block))}")

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
            self.replies.append("\n".join(texts))
        what = "; ".join(tools) if tools else _first_line(" ".join(texts))
        if what:
            self.steps.append(f"- {_clock(entry.timestamp)}{what}")

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

    def title(self) -> str:
        return _first_line(self.requests[0], 80) if self.requests else ""

    def current_state(self) -> str:
        lines = []
        if self.requests:
            lines.append(f"Latest request: {_first_line(self.requests[-1], 300)}")
        if self.replies:
            lines.append(f"Latest response: {_first_line(self.replies[-1], 400)}")
        if self.steps:
            lines.append(f"Last step: {self.steps[-1][2:]}")
        return "\n".join(lines)

    def task(self) -> str:
        if not self.requests:
            return ""
        later = [f"- {_first_line(r, 300)}" for r in self.requests[1:]]
        return "\n".join(
            [self.requests[0][:1500], *(["", "Follow-up requests:"] + later if later else [])]
        )

    def files(self) -> str:
        return _bullets(f"`{path}` ({', '.join(tools)})" for path, tools in self.paths.items())

    def commands(self) -> str:
        return _bullets(
            f"`{_first_line(cmd, 200)}`" + (f" — {desc}" if desc else "")
            for cmd, desc in list(self.shell.items())[-25:]
        )

    def errors(self) -> str:
        return _bullets(self.failures[-20:])

    def folders(self) -> str:
        counts: dict[str, int] = {}
        for path in self.paths:
            folder = path.rsplit("/", 1)[0] if "/" in path else "."
            counts[folder] = counts.get(folder, 0) + 1
        return _bullets(f"`{folder}/`: {n} file(s) touched" for folder, n in counts.items())

    def learnings(self) -> str:
        if not self.failures:
            return ""
        return f"{len(self.failures)} tool call(s) failed; see Errors & Corrections."

    def key_result(self) -> str:
        return self.replies[-1][:1500] if self.replies else ""

    def worklog(self) -> str:
        shown = self.steps[-60:]
        skipped = len(self.steps) - len(shown)
        return "\n".join(([f"- ({skipped} earlier steps)"] if skipped else []) + shown)


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
