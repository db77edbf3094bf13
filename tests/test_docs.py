"""The README cannot drift (datasette's documentation tests): every hook, built-in handler
setting (with its default), built-in preset and CLI command and option is documented."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic.alias_generators import to_camel

from stenograph.cli import _parser
from stenograph.engine import hookspecs
from stenograph.engine.discovery import HandlerCatalog
from stenograph.engine.presets import builtin_names

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
CATALOG = HandlerCatalog()
BUILTINS = [name for name in CATALOG.names() if CATALOG.origin(name) == "built-in"]
HOOKS = {
    name: function
    for name, function in vars(hookspecs).items()
    if inspect.isfunction(function) and hasattr(function, f"{hookspecs.PROJECT}_spec")
}


def section(heading: str) -> str:
    """The README text under the heading starting with ``heading``, up to the next heading
    of the same or a higher level."""
    level = heading.split(" ")[0]
    match = re.search(rf"^{re.escape(heading)}.*$", README, re.M)
    assert match, f"README has no heading {heading!r}"
    rest = README[match.end() :]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def table_rows(text: str, header: str) -> list[list[str]]:
    """The rows of the table whose header row starts with ``header``."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert starts, f"no table with header {header!r}"
    rows = []
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


# hooks


def test_the_hook_table_lists_every_hookspec_with_its_arguments():
    rows = table_rows(section("## Writing a handler plugin"), "| hook |")
    documented = {ticked(row[0])[0]: row for row in rows}
    assert set(documented) == set(HOOKS)
    for name, function in HOOKS.items():
        arguments = set(inspect.signature(function).parameters)
        assert arguments <= set(ticked(documented[name][2])), name


def test_the_architecture_diagram_shows_every_hook_and_builtin_handler():
    diagram = re.search(r"```\n(.*?)```", section("## Architecture"), re.S)
    assert diagram
    for name in [*HOOKS, *BUILTINS]:
        assert name in diagram.group(1), name


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_hookspec_documents_each_argument(name):
    doc = inspect.getdoc(HOOKS[name]) or ""
    for argument in inspect.signature(HOOKS[name]).parameters:
        assert re.search(rf"^:param {argument}: \S", doc, re.M), f"{name}: :param {argument}:"


# handler settings


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_setting_is_documented_with_its_default(name):
    rows = table_rows(section(f"### {name} "), "| setting | default |")
    documented: dict[str, str] = {}
    for row in rows:
        keys, defaults = ticked(row[0]), [d.strip() for d in row[1].split(" / ")]
        assert len(defaults) in (1, len(keys)), row
        documented |= {key: defaults[min(i, len(defaults) - 1)] for i, key in enumerate(keys)}
    fields = CATALOG.get(name).Settings.model_fields
    assert set(documented) == {to_camel(f) for f in fields}
    for field_name, info in fields.items():
        key = to_camel(field_name)
        default = info.get_default(call_default_factory=True)
        assert readme_value(documented[key], default) == default, f"{name} {key}"


def readme_value(cell: str, default: Any) -> Any:
    """A default as the README writes it: ``300``, ``10,000``, ``false``, `` `[]` ``,
    `` `tiktoken` ``; an unset (None) default is words (``unset``, ``the main call's``)."""
    text = cell.replace("`", "").strip().strip('"')
    literals: dict[str, Any] = {"true": True, "false": False, "[]": []}
    if re.fullmatch(r"-?[\d,]+(\.\d+)?", text):
        return float(text.replace(",", ""))
    if text in literals:
        return literals[text]
    return None if default is None else text


# presets and commands


def test_every_builtin_preset_is_in_the_preset_table():
    rows = table_rows(section("## Presets"), "| preset |")
    assert {ticked(row[0])[0] for row in rows} == set(builtin_names())


def commands() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_command_and_option_is_in_the_command_line_section():
    text = section("## Command line")
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block
    usage: dict[str, str] = {}
    for part in re.split(r"^(?=stenograph )", block.group(1), flags=re.M):
        if part.startswith("stenograph ") and not part.split()[1].startswith("-"):
            usage[part.split()[1]] = part
    assert set(usage) == set(commands())
    for action in _parser()._actions:
        if action.option_strings and action.dest != "help":
            assert any(o in text for o in action.option_strings), action.dest
    for name, parser in commands().items():
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert any(o in usage[name] for o in action.option_strings), (name, action.dest)
