"""One discovery path: built-in handlers and transcript formats are entry-point-like
sources of the same lazy catalogs as installed plugins (pip-installed here, for real)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import install, run_cli

import stenograph
from stenograph.engine.discovery import ENTRY_POINT_GROUP, HandlerCatalog
from stenograph.integrations.transcripts import (
    TranscriptError,
    format_descriptions,
    read_transcript,
)
from stenograph.integrations.transcripts.formats import ENTRY_POINT_GROUP as FORMATS_GROUP
from stenograph.integrations.transcripts.formats import FormatCatalog

ACME_FORMAT = '''
"""A chat log format: {"acme": [{"who": "user"|"bot", "said": "..."}]}."""

from stenograph.integrations.transcripts import TranscriptFormat


def _read(document, log):
    value = document.value
    if not (isinstance(value, dict) and isinstance(value.get("acme"), list)):
        return None
    roles = {"user": "user", "bot": "assistant"}
    return [[{"role": roles[turn["who"]], "content": turn["said"]} for turn in value["acme"]]]


FORMAT = TranscriptFormat("acme-chat", "Acme chat log (JSON)", _read)
NOT_A_FORMAT = 42
'''


def test_an_inactivity_only_engine_imports_only_the_handler_it_uses():
    code = (
        "import sys, stenograph\n"
        "session = stenograph.Engine.from_preset('inactivity-only').open_session('s', None)\n"
        "session.append({'role': 'user', 'content': 'hi'})\n"
        "session.pre_call(model='m')\n"
        "print(sorted(m for m in sys.modules if m.startswith('stenograph.handlers.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['stenograph.handlers.inactivity_memorize']"


def test_builtins_load_through_the_entry_point_path_with_its_errors():
    class Broken(HandlerCatalog):
        builtins = {
            **HandlerCatalog.builtins,
            "broken": "stenograph.no_such_module:Broken",
            "not-a-class": "stenograph.engine.errors:PluginError",
        }

    catalog = Broken()
    assert catalog.origin("broken") == "built-in"
    with pytest.raises(stenograph.PluginError) as info:
        catalog.get("broken")
    assert str(info.value).startswith(
        "Handler 'broken' from built-in failed to load (stenograph.no_such_module:Broken):"
        " ModuleNotFoundError("
    )
    with pytest.raises(stenograph.PluginError, match="from built-in is .*not a subclass"):
        catalog.get("not-a-class")
    assert catalog.get("inactivity-memorize").name == "inactivity-memorize"


def test_an_installed_package_claiming_a_builtin_name_is_refused(tmp_path, on_path):
    entry = f'[project.entry-points."{ENTRY_POINT_GROUP}"]\ninactivity-memorize = "acme_clash:X"\n'
    on_path(install(tmp_path, "acme-clash", "acme_clash", "X = 1\n", entry))
    with pytest.raises(stenograph.PluginError) as info:
        stenograph.Engine.from_preset("inactivity-only")
    assert str(info.value) == (
        "Handler name 'inactivity-memorize' is claimed twice: by built-in and by package"
        " 'acme-clash' (acme_clash:X). Uninstall one of them."
    )


@pytest.fixture(scope="module")
def acme_formats(tmp_path_factory):
    """A package registering the ``acme-chat`` transcript format, pip-installed once."""
    entry = f'[project.entry-points."{FORMATS_GROUP}"]\nacme-chat = "acme_formats:FORMAT"\n'
    folder = tmp_path_factory.mktemp("acme")
    return install(folder, "acme-formats", "acme_formats", ACME_FORMAT, entry)


def test_a_transcript_format_is_one_module_and_one_registration(tmp_path, on_path, acme_formats):
    site = acme_formats
    log = tmp_path / "chat.json"
    turns = [{"who": "user", "said": "hello"}, {"who": "bot", "said": "hi there"}]
    log.write_text(json.dumps({"acme": turns}))
    with pytest.raises(TranscriptError, match="not a recognised transcript format"):
        read_transcript(log)
    on_path(site)
    transcript = read_transcript(log)
    assert transcript.format == "acme-chat"
    assert [m["content"] for m in transcript.messages] == ["hello", "hi there"]
    assert FormatCatalog().origin("acme-chat") == "package 'acme-formats'"
    assert list(format_descriptions())[-1] == "anthropic-messages-json"  # the broad one last
    assert format_descriptions()["acme-chat"] == "Acme chat log (JSON)"


def test_replay_help_lists_an_installed_format(acme_formats):
    env = {**os.environ, "PYTHONPATH": str(acme_formats)}
    result = run_cli("replay", "--help", env=env)
    assert result.returncode == 0, result.stderr
    assert "Acme chat log (JSON)" in " ".join(result.stdout.split())


def test_a_bad_or_clashing_transcript_format_is_named(tmp_path, on_path):
    entry = f'[project.entry-points."{FORMATS_GROUP}"]\nswe-agent-traj = "acme_bad:FORMAT"\n'
    on_path(install(tmp_path, "acme-bad", "acme_bad", ACME_FORMAT, entry))
    with pytest.raises(
        stenograph.PluginError,
        match="Transcript format name 'swe-agent-traj'"
        " is claimed twice: by built-in and by package 'acme-bad'",
    ):
        FormatCatalog()


def test_a_transcript_format_that_is_not_one_is_refused():
    class Odd(FormatCatalog):
        builtins = {"odd": "stenograph.engine.errors:PluginError"}

    with pytest.raises(stenograph.PluginError, match="'odd' from built-in is .*not a stenograph"):
        Odd().get("odd")

    class Misnamed(FormatCatalog):
        builtins = {"chat": "stenograph.integrations.transcripts.claude_code:FORMAT"}

    with pytest.raises(stenograph.PluginError, match="calls itself 'claude-code-jsonl'"):
        Misnamed().get("chat")


@pytest.mark.parametrize(
    ("event", "module"),
    [
        ("EntriesMemorized", "stenograph.handlers.inactivity_memorize"),
        ("MemorizeSkipped", "stenograph.handlers.inactivity_memorize"),
        ("CacheTtlDetected", "stenograph.handlers.inactivity_memorize"),
        ("ThresholdDecision", "stenograph.handlers.update_threshold"),
        ("ExtractionStarted", "stenograph.handlers.forked_extraction.events"),
        ("ExtractionFinished", "stenograph.handlers.forked_extraction.events"),
        ("ExtractionFailed", "stenograph.handlers.forked_extraction.events"),
        ("ToolCallRefused", "stenograph.handlers.forked_extraction.events"),
        ("Compacted", "stenograph.handlers.memory_compact"),
        ("CompactionSkipped", "stenograph.handlers.memory_compact"),
    ],
)
def test_each_handlers_events_live_with_the_handler(event, module):
    from stenograph.engine import events

    assert getattr(stenograph, event).__module__ == module
    assert not hasattr(events, event)
