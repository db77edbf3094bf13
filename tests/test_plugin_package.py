"""The redact-secrets example plugin: pip-installed for real, found through its entry point."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic.alias_generators import to_camel

import stenograph

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIR = ROOT / "examples" / "redact-secrets"
PRESET = PLUGIN_DIR / "redact.toml"
MODEL = "claude-sonnet-4-5"
START = 1_700_000_000.0
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
ANTHROPIC_KEY = "sk-ant-api03-" + "Zz9_" * 8
GITHUB_TOKEN = "ghp_" + "a1B2c3" * 6
SECRETS = (AWS_KEY, ANTHROPIC_KEY, GITHUB_TOKEN)
needs_cli = pytest.mark.skipif(
    importlib.util.find_spec("stenograph.cli") is None, reason="stenograph.cli not written yet"
)


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The plugin pip-installed into a fresh folder, first on ``sys.path`` for this module."""
    root = tmp_path_factory.mktemp("redact-plugin")
    source, site = root / "source", root / "site"
    # pip builds in the source tree: build from a copy to keep the repository clean
    shutil.copytree(PLUGIN_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    command += ["--no-build-isolation", "--target", str(site), str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    yield site
    sys.path.remove(str(site))
    for name in [n for n in sys.modules if n.partition(".")[0] == "stenograph_redact"]:
        del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture
def plugin(plugin_site: Path) -> ModuleType:
    """The installed ``stenograph_redact`` module."""
    return importlib.import_module("stenograph_redact")


def _open(engine: stenograph.Engine, state_dir: Path) -> stenograph.Session:
    return engine.open_session("s", state_dir=state_dir, clock=stenograph.ManualClock(START))


def _tool_use(tool_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "bash", "input": {"command": command}}


def _tool_result(tool_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


def _converse(session: stenograph.Session) -> dict[str, Any]:
    """A tool call with a GitHub token in its input, answered with an AWS and an Anthropic
    key; returns the request of the call after it."""
    session.append({"role": "user", "content": "Set up the deploy."})
    session.pre_call(model=MODEL)
    command = f"git clone https://{GITHUB_TOKEN}@github.com/acme/app && cat app/.env"
    session.post_sampling({"role": "assistant", "content": [_tool_use("toolu_1", command)]})
    env = f"AWS_ACCESS_KEY_ID={AWS_KEY}\nANTHROPIC_API_KEY={ANTHROPIC_KEY}\nREGION=eu-west-1"
    session.append({"role": "user", "content": [_tool_result("toolu_1", env)]})
    return session.pre_call(model=MODEL)


def _redactions(plugin: ModuleType, session: stenograph.Session) -> list[Any]:
    return [e for e in session.events if isinstance(e, plugin.SecretsRedacted)]


def test_preset_redacts_what_is_sent(
    plugin: ModuleType, plugin_site: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Secrets leave the request, stay in the history, and the bytes sent never change."""
    caplog.set_level(logging.INFO, logger="stenograph_redact")
    engine = stenograph.Engine.from_preset(PRESET)
    assert [slot.name for slot in engine.slots] == ["redact-secrets", "inactivity-memorize"]
    assert engine.catalog.origin("redact-secrets") == "package 'stenograph-redact'"
    assert Path(inspect.getfile(type(engine.slots[0].handler))).is_relative_to(plugin_site)
    session = _open(engine, tmp_path)
    request = _converse(session)
    sent = json.dumps(request["messages"])
    assert not any(secret in sent for secret in SECRETS)
    assert request["messages"][2]["content"][0]["content"] == (
        "AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key-id]\n"
        "ANTHROPIC_API_KEY=[REDACTED:anthropic-api-key]\nREGION=eu-west-1"
    )
    assert "https://[REDACTED:github-token]@github.com" in sent
    assert all(secret in json.dumps([e.content for e in session.history]) for secret in SECRETS)
    events = _redactions(plugin, session)
    assert [(e.uuid, e.count, e.kinds) for e in events] == [
        (session.history[1].uuid, 1, ("github-token",)),
        (session.history[2].uuid, 2, ("anthropic-api-key", "aws-access-key-id")),
    ]
    assert {(e.handler, e.slot) for e in events} == {("redact-secrets", 0)}
    assert json.dumps(session.pre_call(model=MODEL)) == json.dumps(request)
    assert len(_redactions(plugin, session)) == 2
    assert "redacted 2 secret(s)" in caplog.text
    assert not any(secret in caplog.text for secret in SECRETS)


def test_reopened_session_keeps_redaction(plugin: ModuleType, tmp_path: Path) -> None:
    """The journal replays the sent content: same bytes, nothing redacted again."""
    with _open(stenograph.Engine.from_preset(PRESET), tmp_path) as session:
        before = json.dumps(_converse(session))
    reopened = _open(stenograph.Engine.from_preset(PRESET), tmp_path)
    assert json.dumps(reopened.pre_call(model=MODEL)) == before
    assert AWS_KEY in json.dumps(reopened.history[2].content)
    assert reopened.events == []


def _replay_then_pause(session: stenograph.Session, clock: stenograph.ManualClock) -> Any:
    """A host replays an earlier exchange, then a user comes back an hour later."""
    session.append({"role": "user", "content": "Show the env."})
    session.append({"role": "assistant", "content": [_tool_use("toolu_1", "cat .env")]})
    session.append({"role": "user", "content": [_tool_result("toolu_1", f"KEY_ID={AWS_KEY}")]})
    session.append({"role": "assistant", "content": "Done."})
    clock.advance(3600)
    session.append({"role": "user", "content": "Next step?"})
    return session.pre_call(model=MODEL)["messages"][2]["content"][0]["content"]


@pytest.mark.parametrize(
    ("order", "kinds"),
    [
        (("redact-secrets", "inactivity-memorize"), ["SecretsRedacted", "EntriesMemorized"]),
        (("inactivity-memorize", "redact-secrets"), ["EntriesMemorized", "SecretsRedacted"]),
    ],
)
def test_handlers_run_in_preset_order(
    plugin: ModuleType, tmp_path: Path, order: tuple[str, ...], kinds: list[str]
) -> None:
    """Both act in the same call, in the preset's order; either way the memorized result is
    sent as a placeholder built from the redacted content."""
    path = tmp_path / "order.toml"
    path.write_text("".join(f'[[handlers]]\nuse = "{name}"\n\n' for name in order))
    engine = stenograph.Engine.from_preset(path)
    assert tuple(slot.name for slot in engine.slots) == order
    clock = stenograph.ManualClock(START)
    session = engine.open_session("s", state_dir=tmp_path, clock=clock)
    assert _replay_then_pause(session, clock).startswith("[memorized: bash result left out")
    assert [event.kind for event in session.events] == kinds
    assert AWS_KEY not in json.dumps(session.pre_call(model=MODEL))


@pytest.mark.parametrize(
    ("line", "key", "reason"),
    [
        ("patterns = ['(unclosed']", "patterns", "not a valid regex"),
        ("colour = 'red'", "colour", "Unknown setting"),
        ("redactToolInputs = 'sometimes'", "redactToolInputs", "valid boolean"),
    ],
)
def test_bad_settings_name_file_slot_and_key(
    plugin: ModuleType, tmp_path: Path, line: str, key: str, reason: str
) -> None:
    """Each settings error is a PresetError naming the file, the slot and the key."""
    path = tmp_path / "bad.toml"
    slots = '[[handlers]]\nuse = "inactivity-memorize"\n\n[[handlers]]\nuse = "redact-secrets"\n'
    path.write_text(f"{slots}{line}\n")
    with pytest.raises(stenograph.PresetError) as info:
        stenograph.Engine.from_preset(path)
    message = str(info.value)
    for part in (str(path), "handlers[1]", f"'{key}'", reason):
        assert part in message


def test_long_tool_output_is_redacted_in_linear_time(plugin: ModuleType) -> None:
    """No built-in rule backtracks on a long unbroken word (quadratic: ~10 s here)."""
    redactor = plugin.Redactor.build([], builtin=True)
    found: list[str] = []
    started = time.perf_counter()
    redacted = redactor.text("x" * 20_000 + f" token={AWS_KEY}", found)
    assert time.perf_counter() - started < 1.0
    assert redacted.endswith(" token=[REDACTED:aws-access-key-id]")
    assert found == ["aws-access-key-id"]


def _cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}
    command = [sys.executable, "-m", "stenograph.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@needs_cli
def test_cli_lists_the_plugin(plugin_site: Path) -> None:
    """``stenograph handlers`` shows each handler name with where it comes from."""
    result = _cli(plugin_site, "handlers")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("redact-secrets" in line and "stenograph-redact" in line for line in lines)
    assert any("inactivity-memorize" in line and "built-in" in line for line in lines)


@needs_cli
def test_cli_checks_the_preset(plugin: ModuleType, plugin_site: Path) -> None:
    """``stenograph check`` accepts the example preset and prints every resolved setting."""
    result = _cli(plugin_site, "check", str(PRESET))
    assert result.returncode == 0, result.stderr
    for slot in stenograph.Engine.from_preset(PRESET).slots:
        for field in type(slot.settings.values).model_fields:
            assert to_camel(field) in result.stdout or field in result.stdout


def test_the_plugins_own_tests_pass_with_the_testing_kit(plugin_site: Path) -> None:
    """A plugin author's suite, written with stenograph.testing, run as they would run it."""
    env = {**os.environ, "PYTHONPATH": str(plugin_site)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "tests"],
        cwd=PLUGIN_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout
