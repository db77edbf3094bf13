"""--json on check, handlers and presets: the same facts as the tables, machine-readable."""

from __future__ import annotations

import json
import subprocess
import sys


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stenograph", *args], capture_output=True, text=True, timeout=60
    )


def test_presets_json():
    done = cli("presets", "--json")
    assert done.returncode == 0
    presets = {p["name"]: p for p in json.loads(done.stdout)}
    assert {"default", "inactivity-only", "coding-agent"} <= set(presets)
    assert presets["default"]["handlers"][0] == "inactivity-memorize"
    assert presets["default"]["description"]


def test_handlers_json():
    done = cli("handlers", "--json")
    assert done.returncode == 0
    handlers = {h["name"]: h for h in json.loads(done.stdout)}
    memorize = handlers["inactivity-memorize"]
    assert (memorize["phase"], memorize["origin"]) == ("pre-call", "built-in")
    settings = {s["name"]: s for s in memorize["settings"]}
    assert settings["inactivityThresholdSeconds"]["default"] == 300
    assert "auto" in settings["inactivityThresholdSeconds"]["description"]


def test_check_json_gives_every_value_and_its_layer(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(
        'extends = "default"\n[[handlers]]\nuse = "inactivity-memorize"\nkeepRecent = 2\n'
    )
    done = cli("check", str(path), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] is True and data["preset"] == "mine" and len(data["files"]) == 2
    memorize = data["slots"][0]
    assert memorize["handler"] == "inactivity-memorize"
    keep = memorize["settings"]["keepRecent"]
    assert keep["value"] == 2 and keep["set_by"].startswith(f"preset {path}")
    assert memorize["settings"]["inactivityThresholdSeconds"]["value"] == "auto"


def test_check_json_reports_a_bad_preset_as_json(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("x = 1\n")
    done = cli("check", str(path), "--json")
    assert done.returncode == 2
    data = json.loads(done.stdout)
    assert data["ok"] is False and "Unknown key 'x'" in data["error"]
