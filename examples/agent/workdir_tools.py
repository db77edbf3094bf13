"""The agent's tools, confined to one working directory.

Every path is resolved to its real path (``..``, absolute paths and symlinks included) and
refused unless it lies inside the root; listings and searches do not follow symlinks out;
shell commands run only after ``approve(command)`` says yes, with a timeout, in their own
process group, and with bounded output. A failed call raises ``ToolError``: its message goes
back to the model as a ``tool_result`` with ``is_error: true``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MAX_OUTPUT_CHARS = 30_000  # any tool result sent to the model, at most
MAX_READ_LINES = 2_000
MAX_LINE_CHARS = 2_000
MAX_LIST_ENTRIES = 1_000
MAX_SEARCH_MATCHES = 200
MAX_SEARCH_FILE_BYTES = 2_000_000
MAX_FILE_BYTES = 10_000_000  # read or edited
COMMAND_TIMEOUT = 120
MAX_COMMAND_TIMEOUT = 600
SKIPPED_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".stenograph"}
SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")

TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_files",
        "description": "List the files and folders under a folder of the working directory"
        " (folders end with '/', symlinks with '@'). When recursive, .git, node_modules,"
        " .venv and the like are skipped.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Folder; default '.'."},
                "recursive": {"type": "boolean", "description": "Walk sub-folders too."},
            },
        },
    },
    {
        "name": "read_file",
        "description": "Read a text file of the working directory, with line numbers.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "description": "First line (1-based)."},
                "limit": {"type": "integer", "description": f"Lines, at most {MAX_READ_LINES}."},
            },
            "required": ["path"],
        },
    },
    {
        "name": "search",
        "description": "Search the text files under a path for a substring (or a Python"
        f" regular expression); returns up to {MAX_SEARCH_MATCHES} 'file:line: text' matches.",
        "input_schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string", "description": "File or folder; default '.'."},
                "regex": {"type": "boolean", "description": "pattern is a regular expression."},
                "ignore_case": {"type": "boolean"},
                "glob": {"type": "string", "description": "Only files matching, e.g. '*.py'."},
            },
            "required": ["pattern"],
        },
    },
    {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    {
        "name": "run_command",
        "description": "Run a shell command in the working directory after the user approves"
        f" it. Returns the exit status and the output (stdout and stderr, cut to"
        f" {MAX_OUTPUT_CHARS:,} characters). No input is given to the command.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout": {
                    "type": "integer",
                    "description": f"Seconds (default {COMMAND_TIMEOUT},"
                    f" at most {MAX_COMMAND_TIMEOUT}).",
                },
            },
            "required": ["command"],
        },
    },
]


# ---------------------------------------------------------------------------------------
# Tools, confined to the working directory
# ---------------------------------------------------------------------------------------


class ToolError(Exception):
    """A tool call that cannot be carried out; the message goes back with is_error."""


class Interrupted(Exception):
    """The user pressed Ctrl-C while a tool was running."""


def cut(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """``text`` kept whole up to ``limit`` characters, else its head and tail."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters left out ...]\n{text[-half:]}"


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{n:6}\t{line[:MAX_LINE_CHARS]}" for n, line in enumerate(lines, first))


def _arg(tool_input: dict[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    """``tool_input[key]`` checked to be a ``kind``; ``default`` when absent (or a ToolError
    when there is none)."""
    value = tool_input.get(key)
    if value is None:
        if default is ...:
            raise ToolError(f"missing required parameter {key!r}")
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolError(f"parameter {key!r} must be of type {kind.__name__}")
    return value


class WorkdirTools:
    """The agent's tools. Every path is resolved (symlinks included) and must stay inside
    ``root``; ``approve(command)`` asks the user before a command runs."""

    def __init__(self, root: str | Path, approve: Callable[[str], bool]) -> None:
        self.root = Path(os.path.realpath(root))
        self.approve = approve

    def run(self, name: str, tool_input: Any) -> str:
        """Run one tool call: its result text, or ToolError / Interrupted."""
        if not isinstance(tool_input, dict):
            raise ToolError("the tool input must be an object")
        tools = {
            "list_files": self.list_files,
            "read_file": self.read_file,
            "search": self.search,
            "str_replace_based_edit_tool": self.edit,
            "run_command": self.run_command,
        }
        if name not in tools:
            raise ToolError(f"unknown tool {name!r}")
        return tools[name](tool_input)

    # paths ---------------------------------------------------------------------------

    def resolve(self, path: Any) -> Path:
        """The real path of ``path`` (relative to the root, or absolute); refused when it
        leaves the root, through ``..``, an absolute path or a symlink."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("a non-empty 'path' is required")
        if "\x00" in path:
            raise ToolError("the path holds a NUL character")
        given = Path(path)
        real = Path(os.path.realpath(given if given.is_absolute() else self.root / given))
        if real != self.root and self.root not in real.parents:
            raise ToolError(
                f"{path}: outside the working directory {self.root}; refused"
                " (paths must stay inside it, symlinks included)"
            )
        return real

    def shown(self, path: Path) -> str:
        """``path`` as the model sees it: relative to the root."""
        return "." if path == self.root else str(path.relative_to(self.root))

    def inside(self, path: Path) -> bool:
        """Whether ``path`` (following symlinks) is inside the root."""
        real = Path(os.path.realpath(path))
        return real == self.root or self.root in real.parents

    def _text(self, path: Path) -> str:
        if path.is_dir():
            raise ToolError(f"{self.shown(path)} is a folder")
        if path.exists() and not path.is_file():  # a FIFO or a device would block or flood
            raise ToolError(f"{self.shown(path)} is not a regular file")
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise ToolError(f"{self.shown(path)} is over {MAX_FILE_BYTES:,} bytes")
            data = path.read_bytes()
        except FileNotFoundError:
            raise ToolError(f"{self.shown(path)} does not exist") from None
        except OSError as exc:
            raise ToolError(f"{self.shown(path)}: {exc.strerror or exc}") from None
        if b"\x00" in data[:8192]:
            raise ToolError(f"{self.shown(path)} is not a text file")
        return data.decode("utf-8", errors="replace")

    def _write(self, path: Path, text: str) -> None:
        """Replace ``path`` atomically (a symlink in its place is replaced, not followed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # read_file, list_files, search ---------------------------------------------------

    def read_file(self, args: dict[str, Any]) -> str:
        path = self.resolve(_arg(args, "path", str))
        offset = max(1, _arg(args, "offset", int, 1) or 1)
        limit = min(MAX_READ_LINES, max(1, _arg(args, "limit", int, MAX_READ_LINES) or 1))
        lines = self._text(path).splitlines()
        if not lines:
            return f"({self.shown(path)} is empty)"
        chunk = lines[offset - 1 : offset - 1 + limit]
        result = _numbered(chunk, offset)
        if offset - 1 + limit < len(lines):
            result += f"\n[{len(lines) - (offset - 1 + limit):,} more lines: use offset]"
        return cut(result)

    def list_files(self, args: dict[str, Any]) -> str:
        folder = self.resolve(_arg(args, "path", str, ".") or ".")
        if not folder.is_dir():
            raise ToolError(f"{self.shown(folder)} is not a folder")
        names = []
        if _arg(args, "recursive", bool, False):
            for top, dirs, files in os.walk(folder):  # symlinked folders are not entered
                dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
                base = Path(top)
                names += [self._entry(base / d) for d in dirs]
                names += [self._entry(base / f) for f in sorted(files)]
                if len(names) > MAX_LIST_ENTRIES:
                    break
        else:
            names = [self._entry(p) for p in sorted(folder.iterdir())]
        more = len(names) - MAX_LIST_ENTRIES
        listing = "\n".join(sorted(names[:MAX_LIST_ENTRIES]))
        if more > 0:
            listing += f"\n[{more:,}+ more entries left out]"
        return listing or f"({self.shown(folder)} is empty)"

    def _entry(self, path: Path) -> str:
        name = self.shown(path)
        if path.is_symlink():
            return name + "@"
        return name + "/" if path.is_dir() else name

    def search(self, args: dict[str, Any]) -> str:
        pattern = _arg(args, "pattern", str)
        start = self.resolve(_arg(args, "path", str, ".") or ".")
        glob = _arg(args, "glob", str, None)
        flags = re.IGNORECASE if _arg(args, "ignore_case", bool, False) else 0
        source = pattern if _arg(args, "regex", bool, False) else re.escape(pattern)
        try:
            matcher = re.compile(source, flags)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from None
        matches: list[str] = []
        for path in self._files(start):
            if glob and not fnmatch.fnmatch(path.name, glob):
                continue
            for number, line in self._lines(path):
                if matcher.search(line):
                    matches.append(f"{self.shown(path)}:{number}: {line.strip()[:300]}")
                    if len(matches) >= MAX_SEARCH_MATCHES:
                        note = f"\n[stopped at {MAX_SEARCH_MATCHES} matches: narrow the search]"
                        return cut("\n".join(matches) + note)
        return cut("\n".join(matches)) if matches else "no matches"

    def _files(self, start: Path) -> Iterator[Path]:
        if start.is_file():
            yield start
            return
        for top, dirs, files in os.walk(start):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(files):
                path = Path(top) / name
                if not path.is_symlink() or self.inside(path):
                    yield path

    @staticmethod
    def _lines(path: Path) -> Iterator[tuple[int, str]]:
        try:
            if path.stat().st_size > MAX_SEARCH_FILE_BYTES:
                return
            data = path.read_bytes()
        except OSError:
            return
        if b"\x00" in data[:8192]:
            return
        yield from enumerate(data.decode("utf-8", errors="replace").splitlines(), 1)

    # the text editor tool ------------------------------------------------------------

    def edit(self, args: dict[str, Any]) -> str:
        """Anthropic's text editor tool (text_editor_20250728): view, str_replace, create,
        insert."""
        command = _arg(args, "command", str)
        path = self.resolve(_arg(args, "path", str))
        if command == "view":
            return self._view(path, _arg(args, "view_range", list, None))
        if command == "create":
            if path.exists():
                raise ToolError(f"{self.shown(path)} already exists: use str_replace to edit it")
            self._write(path, _arg(args, "file_text", str))
            return f"File created: {self.shown(path)}"
        if command == "str_replace":
            old = _arg(args, "old_str", str)
            new = _arg(args, "new_str", str, "") or ""
            text = self._text(path)
            count = text.count(old) if old else 0
            if count != 1:
                how = "did not appear verbatim" if not count else f"appears {count} times"
                raise ToolError(
                    f"No replacement was performed: old_str {how} in {self.shown(path)}."
                )
            self._write(path, text.replace(old, new, 1))
            return f"The file {self.shown(path)} has been edited."
        if command == "insert":
            line = _arg(args, "insert_line", int)
            new = args.get("insert_text", args.get("new_str"))
            if not isinstance(new, str):
                raise ToolError("insert needs 'insert_text' (a string)")
            lines = self._text(path).splitlines(keepends=True)
            if not 0 <= line <= len(lines):
                raise ToolError(f"insert_line {line} is outside 0..{len(lines)}")
            if line and not lines[line - 1].endswith("\n"):
                lines[line - 1] += "\n"
            lines.insert(line, new if new.endswith("\n") else new + "\n")
            self._write(path, "".join(lines))
            return f"The file {self.shown(path)} has been edited."
        raise ToolError(f"unknown command {command!r}: use view, create, str_replace or insert")

    def _view(self, path: Path, view_range: list[Any] | None) -> str:
        if path.is_dir():
            return self.list_files({"path": str(path), "recursive": True})
        lines = self._text(path).splitlines()
        first, last = 1, len(lines)
        if view_range is not None:
            if len(view_range) != 2 or not all(isinstance(n, int) for n in view_range):
                raise ToolError("view_range must be [first_line, last_line] (last -1: to the end)")
            first, last = max(1, view_range[0]), view_range[1]
            last = len(lines) if last == -1 else min(last, len(lines))
        return cut(_numbered(lines[first - 1 : last], first))

    # run_command ---------------------------------------------------------------------

    def run_command(self, args: dict[str, Any]) -> str:
        command = _arg(args, "command", str)
        timeout = _arg(args, "timeout", int, COMMAND_TIMEOUT) or COMMAND_TIMEOUT
        timeout = min(max(1, timeout), MAX_COMMAND_TIMEOUT)
        if not command.strip():
            raise ToolError("the command is empty")
        if not self.approve(command):
            raise ToolError("the user declined to run this command")
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed whole on timeout or Ctrl-C
        )
        output = _BoundedReader(process.stdout)
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            output.join()
            raise ToolError(
                f"timed out after {timeout} s; output so far:\n{output.text()}"
            ) from None
        except KeyboardInterrupt:
            _kill_group(process)
            output.join()
            raise Interrupted from None
        output.join()
        return f"exit status {status}\n{output.text()}".rstrip()


class _BoundedReader:
    """Reads a pipe to its end on a thread, keeping only the head and the tail."""

    def __init__(self, pipe: Any, limit: int = MAX_OUTPUT_CHARS) -> None:
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
        self._pipe, self._limit = pipe, limit // 2
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self._pipe:
            for chunk in iter(lambda: self._pipe.read1(65536), b""):
                room = self._limit - len(self.head)
                self.head += chunk[:room]
                self.tail += chunk[room:] if room > 0 else chunk
                if len(self.tail) > self._limit:
                    self.dropped += len(self.tail) - self._limit
                    del self.tail[: len(self.tail) - self._limit]

    def join(self) -> None:
        self._thread.join(timeout=5)

    def text(self) -> str:
        middle = f"\n[... {self.dropped:,} bytes left out ...]\n" if self.dropped else ""
        return (
            bytes(self.head).decode(errors="replace")
            + middle
            + bytes(self.tail).decode(errors="replace")
        )


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
