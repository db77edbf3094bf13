"""Presets and settings: loading, layering, and every kind of bad input."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

import stenograph
from stenograph import cli
from stenograph.engine.presets import builtin_names, load_preset

IM = "inactivity-memorize"


def write(tmp_path, text: str, name: str = "p.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def slot_settings(engine: stenograph.Engine, index: int = 0):
    return engine.slots[index].settings


def test_builtin_presets_load():
    assert {"default", "inactivity-only"} <= set(builtin_names())
    for name in builtin_names():
        engine = stenograph.Engine.from_preset(name)
        assert engine.slots and engine.preset.description


def test_layers_defaults_preset_env_overrides(tmp_path, monkeypatch):
    path = write(
        tmp_path, f'[[handlers]]\nuse = "{IM}"\ninactivityThresholdSeconds = 60\nkeep_recent = 1\n'
    )
    monkeypatch.setenv("STENOGRAPH_INACTIVITY_MEMORIZE__KEEP_RECENT", "2")
    monkeypatch.setenv("stenograph_inactivity_memorize__min_tokens_saved", "500")
    engine = stenograph.Engine.from_preset(path, overrides={IM: {"minTokensSaved": 9}})
    resolved = slot_settings(engine)
    values = resolved.values
    assert (values.inactivity_threshold_seconds, values.keep_recent, values.min_tokens_saved) == (
        60,
        2,
        9,
    )
    assert resolved.origins["inactivity_threshold_seconds"] == f"preset {path} (handlers[0])"
    assert resolved.origins["keep_recent"] == "env STENOGRAPH_INACTIVITY_MEMORIZE__KEEP_RECENT"
    assert resolved.origins["min_tokens_saved"] == "overrides"
    assert resolved.origins["reduce_tool_inputs"] == "default"


def test_extends_overrides_matching_slots_and_appends_new(tmp_path):
    write(
        tmp_path,
        f'name = "base"\ndescription = "b"\n[[handlers]]\nuse = "{IM}"\n'
        "keepRecent = 3\nminTokensSaved = 7\n",
        "base.toml",
    )
    child = write(
        tmp_path,
        f'extends = "base.toml"\n[[handlers]]\nuse = "{IM}"\n'
        f'keepRecent = 4\n[[handlers]]\nuse = "{IM}"\n',
        "child.toml",
    )
    engine = stenograph.Engine.from_preset(child)
    assert [s.name for s in engine.slots] == [IM, IM]
    first = slot_settings(engine, 0)
    assert (first.values.keep_recent, first.values.min_tokens_saved) == (4, 7)
    assert first.origins["min_tokens_saved"].endswith("base.toml (handlers[0])")
    assert first.origins["keep_recent"].endswith("child.toml (handlers[0])")
    assert engine.preset.description == "b" and engine.preset.name == "child"


def test_extends_a_builtin_and_cycles(tmp_path):
    child = write(tmp_path, 'extends = "default"\nstrict = true\n')
    assert stenograph.Engine.from_preset(child).strict
    write(tmp_path, 'extends = "b.toml"\n', "a.toml")
    write(tmp_path, 'extends = "a.toml"\n', "b.toml")
    with pytest.raises(stenograph.PresetError, match="extends itself"):
        load_preset(tmp_path / "a.toml")


BAD = [
    (
        '[[handlers]]\nuse = "inactivity-memorise"\n',
        "Unknown handler 'inactivity-memorise' in {p} (handlers[0]). Available: ",
    ),
    (
        f'[[handlers]]\nuse = "{IM}"\ninactivityTreshold = 5\n',
        "Unknown setting 'inactivityTreshold' for handler 'inactivity-memorize'"
        " in {p} (handlers[0])",
    ),
    (
        f'[[handlers]]\nuse = "{IM}"\ninactivityThresholdSeconds = "soon"\n',
        "Invalid value for 'inactivityThresholdSeconds' of handler 'inactivity-memorize' in {p}",
    ),
    (
        f'[[handlers]]\nuse = "{IM}"\ninactivityThresholdSeconds = -1\n',
        'must be from 0 to 2,592,000 seconds, or "auto"; got -1',
    ),
    (f'[[handlers]]\nuse = "{IM}"\nexcludeTools = "Bash"\n', "'excludeTools'"),
    ('[[handlers]]\nuse = "inactivity-memorize"\nkeepRecent = 1\nkeep_recent = 2\n', "given twice"),
    ("[[handlers]\nuse = 1\n", "is not valid TOML"),
    ("handler = []\n", "Unknown key 'handler' in preset {p}. Allowed: "),
    ("[[handlers]]\nkeepRecent = 1\n", "{p} (handlers[0]) needs use ="),
    ('handlers = "x"\n', "'handlers' must be a list"),
    ("strict = 1\n", "'strict' must be true or false"),
    ('extends = "nowhere.toml"\n', "nowhere.toml not found"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_presets_are_refused_with_a_clear_message(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(stenograph.StenographError) as info:
        stenograph.Engine.from_preset(path)
    assert message.format(p=path) in str(info.value)


def test_unknown_names_get_the_closest_suggestion(tmp_path):
    with pytest.raises(stenograph.PluginError, match="Did you mean 'inactivity-memorize'"):
        stenograph.Engine.from_preset(write(tmp_path, BAD[0][0]))
    with pytest.raises(stenograph.PresetError, match="Did you mean 'inactivityThresholdSeconds'"):
        stenograph.Engine.from_preset(write(tmp_path, BAD[1][0]))


def test_missing_and_unreadable_presets(tmp_path):
    with pytest.raises(stenograph.PresetError, match="not a built-in preset"):
        stenograph.Engine.from_preset("no-such-preset")
    with pytest.raises(stenograph.PresetError, match="not found"):
        stenograph.Engine.from_preset(tmp_path / "missing.toml")
    with pytest.raises(stenograph.PresetError, match="cannot be read"):
        stenograph.Engine.from_preset(tmp_path)
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(stenograph.PresetError, match="cannot be read"):
        stenograph.Engine.from_preset(tmp_path / "binary.toml")


def test_bad_overrides_and_env(monkeypatch):
    with pytest.raises(stenograph.PresetError, match="not a handler or slot index"):
        stenograph.Engine.from_preset("default", overrides={"update-thresh": {}})
    with pytest.raises(stenograph.PresetError, match="Unknown setting 'nope'.*in overrides"):
        stenograph.Engine.from_preset("default", overrides={IM: {"nope": 1}})
    monkeypatch.setenv("STENOGRAPH_INACTIVITY_MEMORIZE__KEEP_RECENT", "many")
    with pytest.raises(stenograph.PresetError, match="set by env STENOGRAPH_INACTIVITY_MEMORIZE"):
        stenograph.Engine.from_preset("default")


def test_a_check_across_settings_names_who_set_each_of_them(monkeypatch):
    monkeypatch.setenv("STENOGRAPH_MEMORY_COMPACT__MAX_KEEP_TOKENS", "1")
    overrides = {"memory-compact": {"minKeepTextMessages": 1}}
    with pytest.raises(stenograph.PresetError) as raised:
        stenograph.Engine.from_preset("coding-agent", overrides=overrides)
    message = str(raised.value)
    assert message.startswith("Invalid settings of handler 'memory-compact' in ")
    assert "maxKeepTokens: env STENOGRAPH_MEMORY_COMPACT__MAX_KEEP_TOKENS" in message
    assert "minKeepTextMessages: overrides" in message
    assert "minKeepTokens: preset " in message  # the preset file's own layer
    assert "minKeepTokens must not exceed maxKeepTokens" in message


@pytest.mark.parametrize(("text", "message"), BAD[:4] + BAD[6:7])
def test_cli_check_gives_one_clear_line_and_exit_2(tmp_path, text, message):
    path = write(tmp_path, text)
    result = subprocess.run(
        [sys.executable, "-m", "stenograph", "check", path],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert message.format(p=path).split(" in ")[0] in " ".join(result.stderr.split())


def test_cli_check_prints_every_setting_with_its_layer(tmp_path):
    path = write(tmp_path, f'[[handlers]]\nuse = "{IM}"\nkeepRecent = 3\n')
    result = subprocess.run(
        [sys.executable, "-m", "stenograph", "check", path],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "STENOGRAPH_INACTIVITY_MEMORIZE__MIN_TOKENS_SAVED": "10",
            "COLUMNS": "200",
            "PATH": "",
        },
    )
    assert result.returncode == 0, result.stderr
    lines = {
        line.split("│")[1].strip(): line
        for line in result.stdout.splitlines()
        if line.count("│") >= 4
    }
    assert set(lines) >= {
        "inactivityThresholdSeconds",
        "keepRecent",
        "excludeTools",
        "minTokensSaved",
        "reduceToolInputs",
    }
    assert "preset" in lines["keepRecent"] and "default" in lines["excludeTools"]
    assert "env STENOGRAPH_INACTIVITY_MEMORIZE__MIN_TOKENS_SAVED" in lines["minTokensSaved"]


SETTING_KEYS = [
    "inactivityThresholdSeconds",
    "keepRecent",
    "minTokensSaved",
    "excludeTools",
    "reduceToolInputs",
    "reduce_tool_inputs",
    "bogus",
    "keep_recent",
    "toolCallsBetweenUpdates",
    "minimum_tokens_between_update",
]
VALUES = st.one_of(
    st.integers(-(10**6), 10**9),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.text(max_size=5), max_size=3),
)


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(value), repr(value))
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode().replace('"', '\\"') + '"'
    return str(value)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    slots=st.lists(st.dictionaries(st.sampled_from(SETTING_KEYS), VALUES, max_size=4), max_size=3),
    handler=st.sampled_from([IM, "inactivity-memorise", "update-threshold"]),
)
def test_property_preset_validation_is_all_or_nothing(tmp_path, slots, handler):
    text = "".join(
        f'[[handlers]]\nuse = "{handler}"\n'
        + "".join(f"{k} = {_toml(v)}\n" for k, v in slot.items())
        for slot in slots
    )
    path = write(tmp_path, text)
    try:
        engine = stenograph.Engine.from_preset(path)
    except stenograph.StenographError as exc:
        assert str(path) in str(exc) or "Unknown handler" in str(exc)
        return
    for slot in engine.slots:
        values = slot.settings.values
        assert type(values).model_validate(values.model_dump()) == values
        if slot.name == IM:
            assert values.inactivity_threshold_seconds >= 0 and values.keep_recent >= 0
            assert values.min_tokens_saved >= 0 and isinstance(values.exclude_tools, list)
        else:
            limits = (
                values.minimum_message_tokens_to_init,
                values.tool_calls_between_updates,
                values.minimum_tokens_between_update,
            )
            assert min(limits) >= 1


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=200))
def test_property_any_text_is_a_preset_or_a_preset_error(tmp_path, text):
    path = tmp_path / "fuzz.toml"
    path.write_text(text, encoding="utf-8")
    with contextlib.suppress(stenograph.StenographError):
        stenograph.Engine.from_preset(path)


SPELLINGS = ("keepRecent", "keep_recent")


@pytest.mark.parametrize(
    "keys",
    [(a, b, c) for a in SPELLINGS for b in SPELLINGS for c in SPELLINGS],
    ids=lambda keys: "-".join(keys),
)
def test_the_nearest_file_of_an_extends_chain_wins_in_any_spelling(
    tmp_path, keys, capsys, monkeypatch
):
    """gp.toml < p2.toml (extends gp) < c2.toml (extends p2), each setting keepRecent in
    either spelling: the child's value wins, and check names the child as its layer."""
    wide = Console(width=300, highlight=False)
    monkeypatch.setattr(cli, "_out", lambda: wide)
    for n, (name, parent) in enumerate((("gp", None), ("p2", "gp"), ("c2", "p2"))):
        extends = f'extends = "{parent}.toml"\n' if parent else ""
        (tmp_path / f"{name}.toml").write_text(
            f'{extends}[[handlers]]\nuse = "{IM}"\n{keys[n]} = {n + 1}\n'
        )
    child = tmp_path / "c2.toml"
    settings = stenograph.Engine.from_preset(child).slots[0].settings
    assert settings.values.keep_recent == 3
    assert settings.origins["keep_recent"] == f"preset {child} (handlers[0])"
    assert cli.main(["check", str(child)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "keepRecent" in line)
    assert "│ 3 " in row and "c2.toml (handlers[0])" in row


def test_a_key_in_both_spellings_in_one_file_is_refused(tmp_path):
    path = tmp_path / "twice.toml"
    path.write_text(f'[[handlers]]\nuse = "{IM}"\nkeepRecent = 1\nkeep_recent = 2\n')
    with pytest.raises(stenograph.PresetError, match=r"given twice in .*twice.toml \(handlers"):
        stenograph.Engine.from_preset(path)


def test_a_misspelled_extends_names_the_file_and_the_closest_preset(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('extends = "defualt"\n')
    with pytest.raises(stenograph.PresetError) as raised:
        stenograph.Engine.from_preset(path)
    message = str(raised.value)
    assert f"Preset {path}: extends = 'defualt'" in message
    assert "coding-agent, default, inactivity-only" in message
    assert "Did you mean 'default'?" in message


@pytest.mark.parametrize(
    ("variable", "hint"),
    [
        ("STENOGRAPH_INACTIVITY_MEMORIZE__keepRecent", "__KEEP_RECENT?"),
        ("STENOGRAPH_INACTIVITY_MEMORIZE__KEEP_RECNT", "__KEEP_RECENT?"),
        ("STENOGRAPH_INACTIVITY_MEMORISE__KEEP_RECENT", "STENOGRAPH_INACTIVITY_MEMORIZE__"),
    ],
)
def test_an_environment_variable_that_sets_nothing_is_warned_and_fails_check(
    monkeypatch, capsys, variable, hint
):
    monkeypatch.setenv(variable, "2")
    monkeypatch.setenv("STENOGRAPH_REQUIRE_SERVERS", "1")  # no "__": another tool's variable
    engine = stenograph.Engine.from_preset("inactivity-only")
    (warning,) = engine.warnings
    assert variable in warning and "is ignored" in warning and hint in warning
    assert engine.slots[0].settings.values.keep_recent == 0
    assert cli.main(["check", "inactivity-only"]) == 1
    assert "1 STENOGRAPH_* variable(s) set nothing" in capsys.readouterr().err


def test_check_and_handlers_print_values_as_they_are(tmp_path, capsys):
    """Values are not read as rich markup: a "[email]" stays "[email]"."""
    path = tmp_path / "brackets.toml"
    path.write_text(f'[[handlers]]\nuse = "{IM}"\nexcludeTools = ["[email]", "[bold]x"]\n')
    assert cli.main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "['[email]', '[bold]x']" in out
    assert cli.main(["handlers"]) == 0
    assert "[]" in capsys.readouterr().out  # excludeTools' default, a list, printed whole
