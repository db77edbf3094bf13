"""Builders for small histories used across the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import stenograph

_ids = count(1)


def tool_turn(name: str = "Read", **tool_input: Any) -> tuple[dict[str, Any], str]:
    """An assistant message with one tool_use, and the tool_use id."""
    tool_id = f"toolu_{next(_ids):04d}"
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"Calling {name}."},
            {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input or {"x": 1}},
        ],
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }
    return message, tool_id


def tool_result(tool_id: str, text: str, is_error: bool = False) -> dict[str, Any]:
    """A user message answering ``tool_id``."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": text}
    if is_error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def text_reply(text: str = "Done.") -> dict[str, Any]:
    """An assistant message with text only (a quiet moment)."""
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def run_tool_calls(
    session: stenograph.Session,
    clock: stenograph.ManualClock,
    n: int,
    size: int = 4000,
    name: str = "Read",
    step: float = 5.0,
) -> list[str]:
    """``n`` rounds of: pre_call, a response calling ``name``, its result. Returns tool ids."""
    ids = []
    for _ in range(n):
        session.pre_call(model="m")
        clock.advance(step)
        message, tool_id = tool_turn(name, path=f"/src/file{len(ids)}.py")
        session.post_sampling(message)
        clock.advance(step)
        session.append(tool_result(tool_id, "x" * size))
        ids.append(tool_id)
    return ids


def open_session(
    preset: str = "default", state_dir: Any = None, **kwargs: Any
) -> tuple[stenograph.Session, stenograph.ManualClock]:
    """A session on ``preset`` with a manual clock at t=1,000,000."""
    clock = stenograph.ManualClock(1_000_000.0)
    engine = stenograph.Engine.from_preset(preset, **kwargs)
    session = engine.open_session("test", state_dir=state_dir, clock=clock)
    session.append({"role": "user", "content": "Fix the failing test."})
    return session, clock


def talk(session: stenograph.Session, rounds: int, words: int) -> None:
    """``rounds`` of: a user question of ``words`` words, pre_call, a text answer."""
    for i in range(rounds):
        session.append({"role": "user", "content": f"question {i} " + "word " * words})
        session.pre_call(model="m")
        session.post_sampling(text_reply(f"answer {i}"))


def compiled_twins() -> Any:
    """``stenograph._speedups``, its twins set up as at import (also when
    ``STENOGRAPH_PURE_PYTHON=1`` turned them off); the calling test module is skipped when
    the install built no C module (no compiler), or fails under ``STENOGRAPH_REQUIRE_EXTRAS=1``."""
    import pytest

    from stenograph.engine import entries, request

    try:
        from stenograph import _speedups
    except ImportError as exc:
        if os.environ.get("STENOGRAPH_REQUIRE_EXTRAS") == "1":
            raise AssertionError(f"stenograph._speedups is not built: {exc}") from exc
        pytest.skip(f"stenograph._speedups is not built: {exc}", allow_module_level=True)
    entries.setup_twins(_speedups)
    if request._ALONE is not None:
        request.setup_twin(_speedups)
    return _speedups


@contextmanager
def session_twins(compiled: Any) -> Iterator[None]:
    """The session's C twins while the block runs: ``compiled`` (``stenograph._speedups``)
    or None for the Python ones, whatever ``STENOGRAPH_PURE_PYTHON`` says."""
    from stenograph.engine import session

    saved, session.C = session.C, compiled
    try:
        yield
    finally:
        session.C = saved


def under_debug_allocator(code: str) -> str:
    """What ``code`` prints, run in a new interpreter under the debug allocator (freed memory
    poisoned, so a C twin's reference-count error shows) in development mode; it must exit
    cleanly."""
    env = {**os.environ, "PYTHONMALLOC": "debug"}
    out = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "ignore", "-c", code],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def run_cli(*args: str, cwd: Any = None, env: dict[str, str] | None = None):
    """``python -m stenograph ARGS`` in a subprocess (text output captured)."""
    return subprocess.run(
        [sys.executable, "-m", "stenograph", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


class NotesHeard(stenograph.Handler):
    """Keeps every notes record announced to it (``notes_written``), in order."""

    name = "notes-heard"

    def __init__(self, settings, slot=0):
        super().__init__(settings, slot)
        self.heard: list[stenograph.NotesRecord] = []

    @stenograph.hookimpl
    def notes_written(self, notes):
        self.heard.append(notes)


def listening_engine(tmp_path, preset: str = "default") -> stenograph.Engine:
    """``preset`` with a ``notes-heard`` slot after its handlers."""
    path = tmp_path / "listening.toml"
    path.write_text(f'extends = "{preset}"\n[[handlers]]\nuse = "notes-heard"\n')
    return stenograph.Engine.from_preset(path, handlers=[NotesHeard])


def install(tmp_path: Path, dist: str, module: str, source: str, entry_points: str) -> Path:
    """``module`` (with ``source``) pip-installed as ``dist`` into a fresh folder."""
    project = tmp_path / dist
    (project / module).mkdir(parents=True)
    (project / module / "__init__.py").write_text(source)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(f"""
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "{dist}"
            version = "0.1.0"
            [tool.setuptools]
            packages = ["{module}"]
            """)
        + entry_points
    )
    site = tmp_path / f"{dist}-site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    command += ["--no-build-isolation", "--target", str(site), str(project)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    return site
