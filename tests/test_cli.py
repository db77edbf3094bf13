"""The command line: --version, -v anywhere, help, exit statuses, warnings, and no traceback
on any input."""

from __future__ import annotations

import json

import pytest
from conftest import DEMO
from helpers import run_cli as run

from stenograph import __version__, cli
from stenograph.integrations.transcripts import format_descriptions


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"stenograph {__version__}"


@pytest.mark.parametrize("where", ["before", "after", "end"])
def test_verbose_works_anywhere(tmp_path, where):
    args = ["replay", str(DEMO), "--json", "--state-dir", str(tmp_path)]
    args.insert({"before": 0, "after": 1, "end": len(args)}[where], "-v")
    result = run(*args)
    assert result.returncode == 0, result.stderr
    assert "memorized 14 entries" in result.stderr  # an INFO line
    assert json.loads(result.stdout)["calls"] == 11


def test_replay_help_names_every_format_and_the_defaults():
    result = run("replay", "--help")
    text = "".join(result.stdout.split())  # help text wraps anywhere, even at a hyphen
    assert all("".join(d.split()) in text for d in format_descriptions().values())
    assert "(default:default)" in text and "(default:.stenograph)" in text


def test_explain_uses_replays_preset_and_keeps_no_state(tmp_path):
    result = run("explain", str(DEMO), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    decisions = json.loads(result.stdout)
    replayed = json.loads(run("replay", str(DEMO), "--json", cwd=tmp_path).stdout)
    assert len(decisions) == replayed["calls"] == 11
    assert [p.name for p in tmp_path.iterdir()] == [".stenograph"]  # replay's, not explain's
    assert [p.name for p in (tmp_path / ".stenograph").iterdir()] == ["replay-demo-session"]


def test_an_unrecognised_file_lists_the_accepted_formats(tmp_path, capsys):
    path = tmp_path / "notes.json"
    path.write_text('{"hello": "world"}')
    assert cli.main(["replay", str(path), "--state-dir", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "not a recognised transcript format" in err
    assert all(" ".join(d.split()) in err for d in format_descriptions().values())


def test_an_empty_transcript_says_so_and_exits_1(tmp_path, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert cli.main(["replay", str(path), "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "the file is empty: nothing to replay" in err and "no model call to replay" in err


def test_text_mode_shows_every_warning_json_holds(tmp_path, capsys):
    lines = DEMO.read_text().splitlines()
    lines[3:3] = ["{not json", '{"type": "user", "uuid": 5}']
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    assert cli.main(["replay", str(broken), "--json", "--state-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["exit_status"] == 1 and data["lost"] == 2 and data["warnings"]
    assert cli.main(["replay", str(broken), "--state-dir", str(tmp_path)]) == 1
    text = capsys.readouterr()
    shown = " ".join(text.err.split())
    assert all(" ".join(w.split()) in shown for w in data["warnings"])
    assert "2 not replayed: unreadable record" in shown
    assert "not replayed" in text.out and "unreadable record" in text.out


GARBAGE = {
    "binary.jsonl": b"\x00\xff\xfe\x80garbage\n\x89PNG",
    "number.json": b"42",
    "deep.json": b"[" * 100_000,
    "strange.jsonl": b'{"type": "assistant", "uuid": "a", "message": {"content": 7}}\n'
    b'{"type": "user", "uuid": "b", "parentUuid": "a", "message": {"content": [{"type": 1}]}}\n'
    b'{"type": "system", "subtype": "compact_boundary", "uuid": "c", "logicalParentUuid": 5}\n'
    b'{"type": "queue-operation", "operation": "enqueue", "content": {"x": 1}}\n'
    b'{"type": "attachment", "uuid": "d", "attachment": [1]}\n',
    "messages.json": b'{"messages": [{"role": "user", "content": [{"type": "tool_result"}]},'
    b' {"role": "assistant", "content": "  "}, {"role": "assistant", "content": [{}]}]}',
    "openhands.jsonl": b'{"history": [{"source": "agent", "action": "run",'
    b' "tool_call_metadata": {"model_response": {"choices": 5}}}]}\n{"history": 3}\n',
    "swe.traj": b'{"trajectory": [{"response": null}], "history": [{"role": "tool"}]}',
}


@pytest.mark.parametrize("command", ["replay", "explain"])
@pytest.mark.parametrize("name", [*GARBAGE, "missing.jsonl", "a-folder"])
def test_no_input_ends_in_a_traceback(tmp_path, capsys, command, name):
    path = tmp_path / name
    if name in GARBAGE:
        path.write_bytes(GARBAGE[name])
    elif name == "a-folder":
        path.mkdir()
    status = cli.main([command, str(path), "--state-dir", str(tmp_path / "state")])
    captured = capsys.readouterr()
    assert status in (0, 1, 2)
    assert "Traceback" not in captured.err and "internal error" not in captured.err


@pytest.mark.parametrize(
    "text",
    [
        "not = [toml",
        "extends = 3\n",
        '[[handlers]]\nuse = "inactivity-memorize"\nkeepRecent = "x"\n',
        '[[handlers]]\nuse = "nope"\n',
        "handlers = 5\n",
        '[[handlers]]\nuse = "inactivity-memorize"\n[handlers.nested]\nx = 1\n',
    ],
)
def test_check_never_ends_in_a_traceback(tmp_path, capsys, text):
    path = tmp_path / "p.toml"
    path.write_text(text)
    assert cli.main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err and "internal error" not in err
