"""The README's LangChain and pydantic-ai examples run as written, against the local
Messages-API server (``ANTHROPIC_BASE_URL``), in a fresh folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from framework_agents import require_extra

from stenograph.testing import Reply

README = Path(__file__).resolve().parent.parent / "README.md"


def example(first_import: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return next(b for b in blocks if b.startswith(first_import) or f"\n{first_import}" in b)


def model(request) -> Reply:
    last = request.body["messages"][-1]["content"]
    blocks = [last] if isinstance(last, str) else last
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
        return Reply.text("It installs the package.")
    return Reply.tool_use("read_file", {"path": "setup.py"})


@pytest.mark.parametrize(
    ("extra", "module", "first_import"),
    [
        ("langchain", "langchain_anthropic", "from langchain.agents import create_agent"),
        ("pydantic-ai", "pydantic_ai", "from pydantic_ai import Agent"),
    ],
)
def test_the_framework_example_runs(messages_server, tmp_path, extra, module, first_import):
    require_extra(module, extra)
    messages_server.responder = model
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "README").write_text("A project.\n")
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": messages_server.url,
    }
    done = subprocess.run(
        [sys.executable, "-c", example(first_import)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    bodies = [r.body for r in messages_server.requests]
    assert len(bodies) == 4  # two turns, each a tool call and an answer
    assert "from setuptools import setup" in json.dumps(bodies[1]["messages"])
    assert (tmp_path / ".stenograph" / "session-42" / "journal.jsonl").is_file()
