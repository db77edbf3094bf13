"""``stenograph init``: a commented preset for chosen handlers, or a plugin package skeleton."""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic.alias_generators import to_camel

from .engine.errors import StenographError

if TYPE_CHECKING:
    from .engine.discovery import HandlerCatalog

HANDLER_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
WIDTH = 96


def preset_text(name: str, handlers: list[str], catalog: HandlerCatalog) -> str:
    """A preset running ``handlers`` in order, each setting commented out at its default
    under its description."""
    lines = [
        f"# {name}: a stenograph preset. Every setting is listed, commented out at its default:",
        "# uncomment a line to change it. `stenograph check <this file>` shows what applies.",
        f"name = {_toml(name)}",
        'description = ""',
    ]
    for use in handlers:
        handler = catalog.get(use, "the handlers to write")
        lines += ["", "[[handlers]]", f"use = {_toml(use)}"]
        if handler.summary:
            lines += _comment(handler.summary)
        for field_name, info in handler.Settings.model_fields.items():
            key = to_camel(field_name)
            lines += ["#", *_comment(info.description or key)]
            default = info.get_default(call_default_factory=True)
            if info.is_required():
                lines.append(f"# {key} =  (required: no default, set a value)")
            elif default is None:
                lines.append(f"#   {key}: unset by default")
            else:
                lines.append(f"# {key} = {_toml(default)}")
    return "\n".join(lines) + "\n"


def write_preset(path: Path, text: str, force: bool) -> None:
    """Write ``text`` to ``path``; an existing file is kept unless ``force``."""
    _refuse_existing(path, force)
    path.write_text(text, encoding="utf-8")


def write_plugin(folder: Path, handler_name: str, force: bool) -> list[Path]:
    """A plugin package for a handler named ``handler_name`` in ``folder``; returns the files."""
    if not HANDLER_NAME.fullmatch(handler_name):
        raise StenographError(
            f"Handler name '{handler_name}' is not allowed: lowercase letters and digits in"
            " words joined by '-' (e.g. 'trim-huge')."
        )
    _refuse_existing(folder, force)
    words = {
        "name": handler_name,
        "dist": f"stenograph-{handler_name}",
        "module": "stenograph_" + handler_name.replace("-", "_"),
        "cls": "".join(part.capitalize() for part in handler_name.split("-")),
    }
    written = []
    for relative, template in PLUGIN_FILES.items():
        path = folder / relative.format(**words)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**words).lstrip("\n"), encoding="utf-8")
        written.append(path)
    return written


def _refuse_existing(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise StenographError(f"{path} already exists: choose another name or pass --force.")


def _comment(text: str) -> list[str]:
    return ["# " + line for line in textwrap.wrap(text, WIDTH - 2, break_on_hyphens=False)]


def _toml(value: Any) -> str:
    """A TOML literal for a default value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value), ensure_ascii=False)


PLUGIN_FILES = {
    "pyproject.toml": """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "A stenograph handler: {name}."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["stenograph"]

[project.optional-dependencies]
test = ["pytest>=8"]

[project.entry-points."stenograph.handlers"]
{name} = "{module}:{cls}"

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
""",
    "README.md": """
# {dist}

A [stenograph](https://pypi.org/project/stenograph/) handler plugin: `{name}` sends tool
results longer than `maxChars` cut to that length (the history keeps them whole).

```sh
pip install -e '.[test]'
stenograph handlers        # lists {name}
stenograph check {name}.toml
pytest
```
""",
    "{name}.toml": """
name = "{name}"
description = "The default preset, then {name}"
extends = "default"

[[handlers]]
use = "{name}"
maxChars = 20000
""",
    "src/{module}/__init__.py": '''
"""{dist}: the `{name}` stenograph handler, found through its entry point."""

from __future__ import annotations

import logging

from pydantic import Field

import stenograph

log = logging.getLogger("{module}")


class {cls}Settings(stenograph.HandlerSettings):
    """Settings of {name}."""

    max_chars: int = Field(
        20_000, ge=100, description="Tool results longer than this are sent cut to it."
    )


class {cls}(stenograph.Handler[{cls}Settings]):
    """Sends long tool results cut to ``maxChars``; the history keeps them whole."""

    name = "{name}"
    phase = "pre-call"
    summary = "Sends tool results longer than maxChars cut to that length."
    Settings = {cls}Settings

    @stenograph.hookimpl
    def pre_call(self, call: stenograph.PreCallCall) -> None:
        limit = self.settings.max_chars
        for entry in call.unseen_entries:
            content = call.sent_content(entry)
            if isinstance(content, str):
                continue
            blocks = [_cut(block, limit) for block in content]
            if blocks != content:
                log.debug("cut a tool result of entry %s", entry.uuid)
                call.replace_sent_content(entry, blocks)


def _cut(block: dict, limit: int) -> dict:
    text = block.get("content")
    if block.get("type") != "tool_result" or not isinstance(text, str) or len(text) <= limit:
        return block
    return {{**block, "content": text[:limit] + f"\\n[cut: {{len(text) - limit:,}} more chars]"}}
''',
    "tests/conftest.py": '''
"""The kit stenograph gives handler authors: manual clock, Messages API test server."""

pytest_plugins = ["stenograph.testing.fixtures"]
''',
    "tests/test_{module}.py": '''
"""{name}, driven through a real session as a host would."""

from stenograph.testing import Conversation, single_handler_session

from {module} import {cls}


def test_long_tool_results_are_sent_cut_and_kept_whole():
    session = single_handler_session({cls}, {{"maxChars": 100}})
    talk = Conversation(session).user("Show the log.")
    talk.tool("Bash", {{"command": "cat big.log"}}, "x" * 5000).reply("Done.")
    request = str(talk.user("Thanks").request())
    assert "x" * 101 not in request and "[cut: 4,900 more chars]" in request
    assert any(e.content[0].get("content") == "x" * 5000 for e in session.history
               if isinstance(e.content, list))


def test_short_tool_results_are_sent_as_they_are():
    session = single_handler_session({cls}, {{"maxChars": 100}})
    talk = Conversation(session).user("Show the file.")
    talk.tool("Read", {{"file_path": "a.py"}}, "short").reply("Done.")
    assert "[cut:" not in str(talk.user("Thanks").request())


def test_installed_it_is_found_by_name():
    session = single_handler_session("{name}", {{"maxChars": 100}})
    assert type(session.engine.slots[0].handler) is {cls}
''',
}
