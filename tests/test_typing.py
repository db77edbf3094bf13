"""The typed API, checked by mypy --strict: the package itself, the README's examples, and
a user script that misuses the wrapped client (mypy must report the misuse)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".mypy_cache"
EXTRAS = {"langchain": "langchain_anthropic", "pydantic_ai": "pydantic_ai"}
#: What the README's snippets leave to the host application.
PRELUDE = """\
from typing import Any

import anthropic
import stenograph
from anthropic.types import Message, MessageParam, ToolParam, ToolResultBlockParam

SYSTEM: str = "You are a careful coding agent."
TOOLS: list[ToolParam] = []
raw: anthropic.Anthropic
engine: stenograph.Engine
wrap: Any


def run_tools(response: Message) -> list[ToolResultBlockParam]:
    raise NotImplementedError


def load_my_transcript() -> list[MessageParam]:
    raise NotImplementedError
"""


def mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(CACHE)]
    return subprocess.run(
        [*command, *map(str, paths)], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def missing_extras() -> list[str]:
    """The framework extras that are not installed (none in CI)."""
    missing = [name for name, module in EXTRAS.items() if not importlib.util.find_spec(module)]
    if missing and os.environ.get("STENOGRAPH_REQUIRE_EXTRAS") == "1":
        pytest.fail(f"extras missing although STENOGRAPH_REQUIRE_EXTRAS=1: {missing}")
    return missing


def test_the_package_checks_under_mypy_strict():
    skip = {f"stenograph.integrations.{name}" for name in missing_extras()}
    paths = [
        p
        for p in (ROOT / "stenograph").rglob("*.py")
        if ".".join(p.relative_to(ROOT).with_suffix("").parts) not in skip
    ]
    done = mypy(*paths)
    assert done.returncode == 0, done.stdout + done.stderr


def readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_readme_examples_check_under_mypy_strict(tmp_path):
    missing = missing_extras()
    files = []
    for i, code in enumerate(readme_examples()):
        if any(f"from {name}" in code for name in missing):
            continue
        if "import my_plugin" in code or "from my_plugin" in code:
            (tmp_path / "my_plugin.py").write_text(
                "import stenograph\n\nclass MyHandler(stenograph.Handler):\n    name = 'mine'\n"
            )
        path = tmp_path / f"readme_example_{i}.py"
        prelude = "" if code.startswith(("from __future__", "# conftest")) else PRELUDE
        path.write_text(prelude + "\n" + code, encoding="utf-8")
        files.append(path)
    assert len(files) >= 5
    done = mypy(*files)
    assert done.returncode == 0, done.stdout + done.stderr


MISUSE = """\
import anthropic
import stenograph
from stenograph.integrations.anthropic import wrap

session = stenograph.Engine.from_preset("default").open_session("s", state_dir=None)
client = wrap(anthropic.Anthropic(), session)
client.messages.create(model="m", max_tokens="ten", messages=[])
async_client: anthropic.AsyncAnthropic = wrap(anthropic.Anthropic(), session)
request = session.pre_call(model="m")
request["modle"]


async def main() -> None:
    aclient = wrap(anthropic.AsyncAnthropic(), session)
    await aclient.messages.create(model="m", max_tokens=10, messages=[], temprature=0.5)
"""


def test_mypy_reports_a_misuse_of_the_wrapped_client(tmp_path):
    script = tmp_path / "misuse.py"
    script.write_text(MISUSE)
    done = mypy(script)
    assert done.returncode == 1
    lines = {int(m) for m in re.findall(r"misuse\.py:(\d+): error", done.stdout)}
    assert lines == {7, 8, 10, 15}, done.stdout
