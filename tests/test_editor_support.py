"""`stenograph schema` and `stenograph init`: presets described for editors, written for
users, and a plugin package skeleton that installs and passes its own test."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
from helpers import run_cli as cli
from pydantic.alias_generators import to_camel
from test_presets import BAD

import stenograph
from stenograph.engine.discovery import HandlerCatalog
from stenograph.engine.presets import builtin_names
from stenograph.schema import preset_schema

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ROOT / "stenograph" / "presets"
REDACT = ROOT / "examples" / "redact-secrets"
ALL_HANDLERS = "inactivity-memorize,update-threshold,forked-extraction,memory-compact"


@pytest.fixture(scope="module")
def schema() -> dict:
    result = cli("schema")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def validator(schema: dict) -> jsonschema.Draft7Validator:
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def test_the_schema_is_draft_7_and_matches_the_settings_models(schema):
    validator(schema)
    for name in ALL_HANDLERS.split(","):
        model = HandlerCatalog().get(name).Settings
        properties = schema["definitions"][name]["properties"]
        assert set(properties) == {"use"} | {to_camel(f) for f in model.model_fields}
        for field_name, info in model.model_fields.items():
            assert properties[to_camel(field_name)]["description"] == info.description


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_preset_is_valid(schema, name):
    preset = tomllib.loads((PRESETS / f"{name}.toml").read_text())
    assert list(validator(schema).iter_errors(preset)) == []


@pytest.fixture
def redact_source(monkeypatch):
    """The example plugin imported from its source folder, forgotten afterwards."""
    monkeypatch.syspath_prepend(str(REDACT / "src"))
    yield importlib.import_module("stenograph_redact")
    for name in [n for n in sys.modules if n.partition(".")[0] == "stenograph_redact"]:
        del sys.modules[name]


def test_the_example_plugin_preset_is_valid_with_the_plugin_known(redact_source):
    RedactSecrets = redact_source.RedactSecrets

    catalog = HandlerCatalog()
    catalog.add_handler(RedactSecrets, "package 'stenograph-redact'")
    preset = tomllib.loads((REDACT / "redact.toml").read_text())
    assert list(validator(preset_schema(catalog)).iter_errors(preset)) == []
    without = list(validator(preset_schema(HandlerCatalog())).iter_errors(preset))
    assert "'redact-secrets' is not one of" in " ".join(e.message for e in without)


def _quoted(text: str) -> set[str]:
    return set(re.findall(r"'([^']+)'", text))


def _schema_names(error: jsonschema.ValidationError) -> set[str]:
    path = {str(p) for p in error.absolute_path if not isinstance(p, int)}
    names = path | _quoted(error.message)
    return names | {"use"} if "'use' is a required property" in error.message else names


SCHEMA_CASES = [
    (text, message) for text, message in BAD if "TOML" not in message and "not found" not in message
]


@pytest.mark.parametrize(("text", "message"), SCHEMA_CASES)
def test_the_bad_presets_are_rejected_naming_the_same_key(schema, tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(stenograph.StenographError) as info:
        stenograph.Engine.from_preset(path)
    errors = list(validator(schema).iter_errors(tomllib.loads(text)))
    assert errors, f"the schema accepts {text!r}"
    named = set().union(*(_schema_names(e) for e in errors))
    engine_names = _quoted(str(info.value)) | (
        {"use"} if "needs use =" in str(info.value) else set()
    )
    assert named & engine_names, (str(info.value), [e.message for e in errors])


def test_the_schema_goes_to_a_file(tmp_path, schema):
    out = tmp_path / "preset.schema.json"
    result = cli("schema", "-o", str(out))
    assert result.returncode == 0 and result.stdout == ""
    assert json.loads(out.read_text()) == schema


def test_init_lists_every_setting_and_passes_check_unchanged(tmp_path, schema):
    result = cli("init", "my-agent", "--handlers", ALL_HANDLERS, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    path = tmp_path / "my-agent.toml"
    text = path.read_text()
    catalog = HandlerCatalog()
    for name in ALL_HANDLERS.split(","):
        for field_name, info in catalog.get(name).Settings.model_fields.items():
            key = to_camel(field_name)
            assert key in text, key
            words = " ".join(text.split())
            assert " ".join((info.description or "").split()).replace("# ", "") in words.replace(
                "# ", ""
            )
    check = cli("check", str(path))
    assert check.returncode == 0, check.stderr
    assert list(validator(schema).iter_errors(tomllib.loads(text))) == []
    preset = stenograph.Engine.from_preset(path)
    assert [s.name for s in preset.slots] == ALL_HANDLERS.split(",")


def test_init_defaults_are_the_models_defaults_once_uncommented(tmp_path, schema):
    assert cli("init", "--handlers", ALL_HANDLERS, cwd=tmp_path).returncode == 0
    path = tmp_path / "my-preset.toml"
    text = re.sub(r"^# (\w+ = )", r"\1", path.read_text(), flags=re.M)
    path.write_text(text)
    assert list(validator(schema).iter_errors(tomllib.loads(text))) == []
    engine = stenograph.Engine.from_preset(path)
    for slot in engine.slots:
        defaults = type(slot.settings.values)()
        assert slot.settings.values == defaults
        for field_name, origin in slot.settings.origins.items():
            unset = getattr(defaults, field_name) is None
            layer = f"preset {path} (handlers[{slot.index}])"
            assert origin == ("default" if unset else layer), field_name


def test_init_by_default_writes_the_default_presets_handlers_and_keeps_files(tmp_path):
    assert cli("init", cwd=tmp_path).returncode == 0
    engine = stenograph.Engine.from_preset(tmp_path / "my-preset.toml")
    assert [s.name for s in engine.slots] == [
        s.name for s in stenograph.Engine.from_preset("default").slots
    ]
    again = cli("init", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr and "--force" in again.stderr
    assert cli("init", "--force", cwd=tmp_path).returncode == 0
    bad = cli("init", "--handlers", "inactivity-memorise", cwd=tmp_path)
    assert bad.returncode == 2 and "Did you mean 'inactivity-memorize'" in bad.stderr


def test_init_plugin_installs_with_pip_and_its_tests_pass(tmp_path):
    assert cli("init", "--plugin", "trim-huge", cwd=tmp_path).returncode == 0
    source, site = tmp_path / "stenograph-trim-huge", tmp_path / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    command += ["--no-build-isolation", "--target", str(site), str(source)]
    installed = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {**os.environ, "PYTHONPATH": str(site)}
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=source,
        env=env,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout
    listed = cli("handlers", env=env)
    assert "trim-huge" in listed.stdout and "stenograph-trim-huge" in listed.stdout
    check = cli("check", str(source / "trim-huge.toml"), env=env)
    assert check.returncode == 0, check.stderr


def test_init_plugin_refuses_a_bad_handler_name(tmp_path):
    result = cli("init", "--plugin", "Trim_Huge", cwd=tmp_path)
    assert result.returncode == 2 and "'Trim_Huge' is not allowed" in result.stderr
    assert list(tmp_path.iterdir()) == []
