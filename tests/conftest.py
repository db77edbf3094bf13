"""Shared fixtures: the real transcripts beside the project, clocks, small histories."""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["stenograph.testing.fixtures", "store_fixtures"]

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
TRANSCRIPTS = SHARED_DATA / "transcripts"
DEMO = ROOT / "examples" / "demo-session.jsonl"


def real_transcripts() -> list[Path]:
    """Every file of the development set (none when ../shared/data is absent)."""
    if not TRANSCRIPTS.is_dir():
        return []
    suffixes = {".jsonl", ".json", ".traj"}
    return sorted(p for p in TRANSCRIPTS.rglob("*") if p.is_file() and p.suffix in suffixes)


@pytest.fixture
def shared_data() -> Path:
    """The real transcripts folder, or a skip when this checkout has no ../shared/data."""
    if not TRANSCRIPTS.is_dir():
        pytest.skip("../shared/data/transcripts is absent (fresh clone without shared data)")
    return TRANSCRIPTS


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector off (after one collection): what reference counting
    alone frees, and only that, is gone."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@pytest.fixture
def on_path(monkeypatch):
    """Put an installed folder first on ``sys.path``; forget its modules afterwards."""
    added: list[Path] = []

    def put(site: Path) -> None:
        monkeypatch.syspath_prepend(str(site))
        importlib.invalidate_caches()
        added.append(site)

    yield put
    for name in [n for n in sys.modules if n.startswith("acme_")]:
        del sys.modules[name]
    importlib.invalidate_caches()
