"""The tool gate ("handcuffs"): the fork keeps the host's whole tool list, but only edits
of the exact memory file go through, applied to an in-memory working copy."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEXT_EDITOR_NAMES = ("str_replace_based_edit_tool", "str_replace_editor")
CLAUDE_CODE_EDIT = "Edit"
OWN_TOOL_NAME = "session_notes_edit"
OWN_TOOL = {
    "name": OWN_TOOL_NAME,
    "description": "Edit the session notes file: replace old_string (which must occur exactly"
    " once) with new_string.",
    "input_schema": {
        "type": "object",
        "properties": {
            "old_string": {"type": "string", "description": "Exact text to replace."},
            "new_string": {"type": "string", "description": "The replacement text."},
        },
        "required": ["old_string", "new_string"],
    },
}


class EditError(ValueError):
    """An allowed edit that cannot be applied; the message is shown to the model."""


def tool_names(tools: list[Any] | None) -> set[str]:
    """Names of the tools in a request's tool list."""
    return {str(t["name"]) for t in tools or () if isinstance(t, dict) and t.get("name")}


def edit_tool_of(tools: list[Any] | None) -> str | None:
    """The host's file-edit tool the fork can use, if any."""
    names = tool_names(tools)
    for name in (*TEXT_EDITOR_NAMES, CLAUDE_CODE_EDIT):
        if name in names:
            return name
    return None


@dataclass
class Workspace:
    """The notes being edited by one fork: the content read at fork start, the working
    copy, and the successful edits (to re-apply them if the file changed meanwhile)."""

    path: Path
    original: str
    text: str = ""
    edits: list[Callable[[str], str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    rewritten: bool = False
    max_chars: int = 200_000

    def __post_init__(self) -> None:
        self.text = self.original

    @property
    def refusal(self) -> str:
        """The answer to every call the gate refuses."""
        return f"only editing {self.path} is allowed"

    def allows_path(self, value: Any) -> bool:
        """Only the exact memory file: absolute, no ``..``, not a symlink, same real path."""
        if not isinstance(value, str) or "\0" in value or not os.path.isabs(value):
            return False
        try:
            if ".." in Path(value).parts or os.path.islink(value):
                return False
            return os.path.realpath(value) == os.path.realpath(self.path)
        except (OSError, ValueError):  # a path the system refuses is not the notes file
            return False

    def call(self, name: str, tool_input: Any) -> tuple[str, bool]:
        """Run one tool call through the gate: (result text, is_error)."""
        handler = self._handler(name, tool_input)
        if handler is None:
            self.refused.append(f"{name}: {str(tool_input)[:120]}")
            return self.refusal, True
        try:
            return handler(tool_input), False
        except EditError as exc:
            return str(exc), True

    def _handler(self, name: str, tool_input: Any) -> Callable[[dict[str, Any]], str] | None:
        if not isinstance(tool_input, dict):
            return None
        if name == OWN_TOOL_NAME:
            return self._own
        if name in TEXT_EDITOR_NAMES and self.allows_path(tool_input.get("path")):
            return self._editor
        if name == CLAUDE_CODE_EDIT and self.allows_path(tool_input.get("file_path")):
            return self._claude_code_edit
        return None

    def rewrite(self, text: str) -> None:
        """Replace the whole working copy (such a change cannot be re-applied on a conflict)."""
        self._apply(lambda _old: text)
        self.rewritten = True

    def merged_onto(self, current: str) -> str:
        """The edits re-applied to ``current`` (the file as someone else left it)."""
        if self.rewritten:
            raise EditError("the notes were rewritten whole while the file changed")
        for edit in self.edits:
            current = edit(current)
        return current

    def _apply(self, edit: Callable[[str], str]) -> None:
        text = edit(self.text)
        self.check_size(len(text))
        self.text = text
        self.edits.append(edit)

    def check_size(self, chars: int) -> None:
        """Refuse an edit that would make the notes longer than the cap."""
        if chars > self.max_chars:
            raise EditError(
                f"Refused: the notes would grow to {chars:,} characters, over the cap of"
                f" {self.max_chars:,}. Condense the notes instead."
            )

    def _own(self, args: dict[str, Any]) -> str:
        old, new = _strings(args, "old_string", "new_string")
        self._apply(lambda text: replace_once(text, old, new, self.path))
        return f"The file {self.path} has been updated."

    def _claude_code_edit(self, args: dict[str, Any]) -> str:
        old, new = _strings(args, "old_string", "new_string")
        if args.get("replace_all") is True:
            self.check_size(len(self.text) + self.text.count(old) * (len(new) - len(old)))
            self._apply(lambda text: replace_all(text, old, new, self.path))
        else:
            self._apply(lambda text: replace_once(text, old, new, self.path))
        return f"The file {self.path} has been updated successfully."

    def _editor(self, args: dict[str, Any]) -> str:
        command = args.get("command")
        if command == "view":
            return numbered(self.text)
        if command == "str_replace":
            old = _strings(args, "old_str")[0]
            new = args.get("new_str", "")
            if not isinstance(new, str):
                raise EditError("new_str must be a string")
            self._apply(lambda text: replace_once(text, old, new, self.path))
            return f"The file {self.path} has been edited."
        if command == "insert":
            line = args.get("insert_line")
            new = args.get("new_str", args.get("insert_text"))
            if not isinstance(line, int) or isinstance(line, bool) or not isinstance(new, str):
                raise EditError("insert needs insert_line (integer) and new_str (string)")
            self._apply(lambda text: insert_after(text, line, new))
            return f"The file {self.path} has been edited."
        if command == "create":
            content = _strings(args, "file_text")[0]
            self.rewrite(content)
            return f"File {self.path} has been written."
        raise EditError(f"unsupported command {command!r}: use view, str_replace, insert or create")


def _strings(args: dict[str, Any], *keys: str) -> list[str]:
    values = [args.get(k) for k in keys]
    bad = [k for k, v in zip(keys, values, strict=True) if not isinstance(v, str)]
    if bad:
        raise EditError(f"{', '.join(bad)} must be given as a string")
    return values  # type: ignore[return-value]


def replace_once(text: str, old: str, new: str, path: Path) -> str:
    """Replace ``old`` when it occurs exactly once; otherwise an error the model can act on."""
    if not old:
        raise EditError("old_str must not be empty")
    count = text.count(old)
    if count == 0:
        raise EditError(f"No replacement was performed: old_str did not appear verbatim in {path}.")
    if count > 1:
        raise EditError(
            f"No replacement was performed: old_str occurs {count} times in {path};"
            " include more context to make it unique."
        )
    return text.replace(old, new, 1)


def replace_all(text: str, old: str, new: str, path: Path) -> str:
    """Replace every occurrence of ``old`` (at least one)."""
    if not old or old not in text:
        raise EditError(f"No replacement was performed: old_string not found in {path}.")
    return text.replace(old, new)


def insert_after(text: str, line: int, new: str) -> str:
    """Insert ``new`` after line ``line`` (0: at the top)."""
    lines = text.splitlines(keepends=True)
    if not 0 <= line <= len(lines):
        raise EditError(f"insert_line {line} is outside 0..{len(lines)}")
    block = new if new.endswith("\n") else new + "\n"
    if line and not lines[line - 1].endswith("\n"):
        block = "\n" + block
    return "".join(lines[:line]) + block + "".join(lines[line:])


def numbered(text: str) -> str:
    """The file as the text editor tool's ``view`` shows it."""
    return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(text.splitlines(), 1))
