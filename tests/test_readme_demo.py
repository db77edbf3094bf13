"""The README's demo figures are what the demo prints: the test runs the demo's command and
finds every line of the README's demo block in its output, in order."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import DEMO

README = Path(__file__).parent.parent / "README.md"
MAKEFILE = Path(__file__).parent.parent / "Makefile"


def squeeze(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def demo_block() -> list[str]:
    """The first fenced block after the quickstart's demo paragraph."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```\n", text.index("The demo is a synthetic coding session")) + 4
    return [squeeze(line) for line in text[start : text.index("```", start)].splitlines()]


def test_the_demo_target_replays_the_bundled_transcript():
    recipe = MAKEFILE.read_text().split("\ndemo:", 1)[1].splitlines()[1].strip()
    assert recipe == "$(BIN)/stenograph replay examples/demo-session.jsonl"


def test_the_readme_demo_block_is_what_the_demo_prints(tmp_path):
    (tmp_path / "examples").mkdir()
    shutil.copy(DEMO, tmp_path / "examples" / DEMO.name)
    env = {**os.environ, "COLUMNS": "120"}
    env.pop("ANTHROPIC_API_KEY", None)  # the README shows the offline notes
    result = subprocess.run(
        [sys.executable, "-m", "stenograph", "replay", "examples/demo-session.jsonl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    printed = [squeeze(line) for line in result.stdout.splitlines()]
    position = 0
    for line in demo_block():
        assert line in printed[position:], f"README line {line!r} not printed:\n{result.stdout}"
        position = printed.index(line, position) + 1
