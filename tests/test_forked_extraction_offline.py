"""forked-extraction without a network: the memory file, the gate, the offline writer."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from conftest import DEMO, real_transcripts

import stenograph
from stenograph.engine.notes import NotesConflict, NotesRejected, headings
from stenograph.handlers.forked_extraction import ForkedExtraction
from stenograph.handlers.forked_extraction.gate import Workspace, edit_tool_of
from stenograph.integrations.transcripts import read_transcript
from stenograph.replay import replay
from stenograph.stores.notes_file import NotesFile

TEMPLATE = ForkedExtraction(ForkedExtraction.Settings()).template
HEADINGS = headings(TEMPLATE)


def test_template_has_the_ten_sections_each_with_a_description():
    assert [h[2:] for h in HEADINGS] == [
        "Session Title",
        "Current State",
        "Task specification",
        "Files and Functions",
        "Workflow",
        "Errors & Corrections",
        "Codebase and System Documentation",
        "Learnings",
        "Key results",
        "Worklog",
    ]
    lines = TEMPLATE.splitlines()
    for heading in HEADINGS:
        description = lines[lines.index(heading) + 1]
        assert description.startswith("_") and description.endswith("_")


def test_memory_file_is_created_once_private(tmp_path):
    memory = NotesFile(tmp_path / "s" / "session-memory.md", TEMPLATE)
    assert memory.ensure() is True and memory.ensure() is False
    assert stat.S_IMODE(memory.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(memory.path.parent.stat().st_mode) == 0o700
    assert memory.read() == TEMPLATE


def test_compare_and_swap_and_heading_check(tmp_path):
    memory = NotesFile(tmp_path / "m.md", TEMPLATE)
    memory.ensure()
    new = TEMPLATE.replace("# Worklog\n", "# Worklog\n- did a thing\n")
    memory.replace(TEMPLATE, new)
    assert memory.read() == new
    with pytest.raises(NotesConflict):
        memory.replace(TEMPLATE, TEMPLATE)
    with pytest.raises(NotesRejected, match="# Learnings"):
        memory.replace(new, new.replace("# Learnings", "# Lessons"))
    assert memory.read() == new
    assert [p.name for p in tmp_path.iterdir()] == ["m.md.lock", "m.md"] or set(
        p.name for p in tmp_path.iterdir()
    ) == {"m.md", "m.md.lock"}


def workspace(tmp_path) -> Workspace:
    path = tmp_path / "notes.md"
    path.write_text(TEMPLATE)
    return Workspace(path, TEMPLATE)


def test_gate_allows_only_edits_of_the_exact_file(tmp_path):
    ws = workspace(tmp_path)
    other = tmp_path / "other.md"
    other.write_text("x")
    link = tmp_path / "link.md"
    link.symlink_to(ws.path)
    refused = [
        (
            "str_replace_based_edit_tool",
            {"command": "str_replace", "path": str(other), "old_str": "x", "new_str": "y"},
        ),
        (
            "str_replace_based_edit_tool",
            {
                "command": "str_replace",
                "path": f"{tmp_path}/sub/../notes.md",
                "old_str": "# Worklog",
                "new_str": "# W",
            },
        ),
        ("str_replace_based_edit_tool", {"command": "view", "path": str(link)}),
        ("str_replace_based_edit_tool", {"command": "view", "path": "notes.md"}),
        ("Edit", {"file_path": "/etc/passwd", "old_string": "root", "new_string": "x"}),
        ("Bash", {"command": f"rm {ws.path}"}),
        ("Write", {"file_path": str(ws.path), "content": "gone"}),
        ("Edit", "not a dict"),
        ("Edit", {"file_path": 5}),
    ]
    for name, args in refused:
        assert ws.call(name, args) == (f"only editing {ws.path} is allowed", True)
    assert len(ws.refused) == len(refused) and ws.text == TEMPLATE and not ws.edits
    text, error = ws.call(
        "Edit",
        {
            "file_path": str(ws.path),
            "old_string": "# Worklog\n",
            "new_string": "# Worklog\n- step\n",
        },
    )
    assert not error and "- step" in ws.text and other.read_text() == "x"


def test_text_editor_commands_and_errors_the_model_can_act_on(tmp_path):
    ws = workspace(tmp_path)
    p = str(ws.path)
    view, error = ws.call("str_replace_based_edit_tool", {"command": "view", "path": p})
    assert not error and view.splitlines()[0] == "     1\t# Session Title"
    missing = ws.call(
        "str_replace_based_edit_tool",
        {"command": "str_replace", "path": p, "old_str": "nope", "new_str": "x"},
    )
    assert missing[1] and "did not appear verbatim" in missing[0]
    twice = ws.call(
        "str_replace_based_edit_tool",
        {"command": "str_replace", "path": p, "old_str": "_", "new_str": "x"},
    )
    assert twice[1] and "occurs" in twice[0] and "times" in twice[0]
    bad = ws.call("str_replace_based_edit_tool", {"command": "str_replace", "path": p})
    assert bad == ("old_str must be given as a string", True)
    ok = ws.call(
        "str_replace_based_edit_tool",
        {"command": "insert", "path": p, "insert_line": 2, "new_str": "Invoice bug"},
    )
    assert not ok[1] and ws.text.splitlines()[2] == "Invoice bug"
    assert ws.call("str_replace_based_edit_tool", {"command": "delete", "path": p})[1]


def test_edits_are_reapplied_on_a_changed_file(tmp_path):
    ws = workspace(tmp_path)
    ws.call(
        "Edit",
        {
            "file_path": str(ws.path),
            "old_string": "# Worklog\n",
            "new_string": "# Worklog\n- fork step\n",
        },
    )
    changed = TEMPLATE.replace("# Learnings\n", "# Learnings\n- by hand\n")
    merged = ws.merged_onto(changed)
    assert "- by hand" in merged and "- fork step" in merged


def test_edit_tool_detection():
    assert edit_tool_of([{"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}])
    assert edit_tool_of([{"name": "Read"}, {"name": "Edit"}]) == "Edit"
    assert edit_tool_of([{"name": "Read"}]) is None and edit_tool_of(None) is None


def test_template_and_prompt_overrides_are_checked_at_load(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[[handlers]]\nuse = "forked-extraction"\ntemplatePath = "/nope/t.md"\n')
    with pytest.raises(stenograph.PresetError, match="templatePath.*cannot read /nope/t.md"):
        stenograph.Engine.from_preset(path)


def test_demo_replay_writes_useful_notes_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    report = replay(DEMO, "default", state_dir=tmp_path)
    assert report.notes_backend == "offline"
    assert [e["status"] for e in report.extractions] == ["written", "written"]
    notes = Path(report.memory_file).read_text()
    assert headings(notes) == HEADINGS
    for fact in ("invoicer/calc.py", "python -m pytest", "AssertionError", "negative invoice"):
        assert fact in notes


def touched_files(path: Path, upto_assistant: int) -> set[str]:
    files, seen = set(), -1
    for message in read_transcript(path).messages:
        if message["role"] != "assistant":
            continue
        seen += 1
        if seen > upto_assistant:
            break
        for block in message["content"] if isinstance(message["content"], list) else []:
            args = block.get("input") if block.get("type") == "tool_use" else None
            if isinstance(args, dict) and isinstance(args.get("file_path"), str):
                files.add(args["file_path"].strip())
    return {f for f in files if f}


@pytest.mark.parametrize("path", real_transcripts(), ids=lambda p: p.name[:24])
def test_every_real_session_gets_notes_offline(tmp_path, monkeypatch, path):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    report = replay(path, "default", state_dir=tmp_path)
    if not report.extractions:
        assert report.memory_file is None
        return
    assert all(e["status"] == "written" for e in report.extractions)
    notes = Path(report.memory_file).read_text()
    assert headings(notes) == HEADINGS
    last = report.extractions[-1]["after_assistant_index"]
    for file in touched_files(path, last):
        assert f"`{file}`" in notes
    assert os.path.basename(report.memory_file) == "session-memory.md"


def test_prompt_names_the_path_the_notes_and_the_largest_sections_when_over_budget(tmp_path):
    from stenograph.handlers.forked_extraction.fork import ForkContext
    from stenograph.handlers.forked_extraction.job import job_settings, render_prompt

    handler = ForkedExtraction(ForkedExtraction.Settings(section_budget_tokens=100))
    context = ForkContext("m", None, [{"name": "Edit"}], [], {})
    settings = job_settings(handler.settings)
    small = Workspace(tmp_path / "n.md", TEMPLATE)
    prompt = render_prompt(handler.prompt, settings, small, "host-tool", context)
    assert str(tmp_path / "n.md") in prompt and TEMPLATE.strip() in prompt
    assert "over budget" not in prompt and "the Edit tool (file_path" in prompt
    big = TEMPLATE.replace("# Worklog\n", "# Worklog\n" + "- step done\n" * 200)
    big = big.replace("# Learnings\n", "# Learnings\n" + "- lesson\n" * 100)
    prompt = render_prompt(
        handler.prompt, settings, Workspace(tmp_path / "n.md", big), "host-tool", context
    )
    assert "over budget" in prompt and "largest sections are Worklog" in prompt
    assert prompt.index("Worklog (~") < prompt.index("Learnings (~")
    assert "{{" not in prompt


def test_an_offline_notes_request_copies_nothing_of_the_history_on_the_call_path(
    tmp_path, monkeypatch
):
    from helpers import open_session, run_tool_calls

    import stenograph.engine.history as history_module

    eager = {"minimum_message_tokens_to_init": 1, "minimum_tokens_between_update": 1}
    overrides = {"forked-extraction": {"backend": "offline"}, "update-threshold": eager}
    session, clock = open_session("default", state_dir=tmp_path, overrides=overrides)
    copies, lists = [], []
    messages = session.history.messages
    session.history.messages = lambda: (copies.append(1), messages())[1]  # type: ignore[method-assign]
    made = history_module.RequestMessages
    monkeypatch.setattr(history_module, "RequestMessages", lambda m: (lists.append(1), made(m))[1])
    run_tool_calls(session, clock, 4)
    assert session.wait_for_background()
    started = [e for e in session.events if isinstance(e, stenograph.ExtractionStarted)]
    # the first request's list alone: the later requests bring it up to date (the host let
    # each go), and no notes job copies the history
    assert started and len(lists) == 1 and not copies
    assert "Read" in session.notes_at(started[-1].path).read()[0]
