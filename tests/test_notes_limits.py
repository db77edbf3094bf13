"""The notes under a hostile fork or a hostile folder: a size cap on every edit, refused
tool paths, no symbolic link followed, private modes."""

from __future__ import annotations

import os
import stat

import pytest
from helpers import text_reply

import stenograph
from stenograph.engine.notes import NotesUnreadable, read_notes
from stenograph.handlers.forked_extraction import ForkedExtraction
from stenograph.handlers.forked_extraction.gate import Workspace
from stenograph.stores.notes_file import NotesFile

TEMPLATE = ForkedExtraction(ForkedExtraction.Settings()).template


def test_replace_all_doubling_is_refused_at_the_cap(tmp_path):
    ws = Workspace(tmp_path / "n.md", TEMPLATE, max_chars=20_000)
    path = str(ws.path)
    results = []
    for _ in range(30):  # K doublings of every newline: 2**30 times the file otherwise
        edit = {"file_path": path, "old_string": "\n", "new_string": "\n\n", "replace_all": True}
        results.append(ws.call("Edit", edit))
    assert len(ws.text) <= 20_000
    refused = [text for text, is_error in results if is_error]
    assert refused and "over the cap of 20,000" in refused[0]
    big = {"command": "create", "path": path, "file_text": "# x\n" * 10_000}
    text, is_error = ws.call("str_replace_based_edit_tool", big)
    assert is_error and "Condense" in text and len(ws.text) <= 20_000


def test_the_cap_is_a_setting_and_an_oversized_file_is_not_read(tmp_path):
    with pytest.raises(stenograph.PresetError, match="maxNotesChars"):
        stenograph.Engine.from_preset(
            "default", overrides={"forked-extraction": {"maxNotesChars": 10}}
        )
    big = tmp_path / "big.md"
    big.write_text(TEMPLATE + "x" * 5000)
    with pytest.raises(NotesUnreadable, match="more than 4,000 characters"):
        read_notes(big, max_chars=4000)
    assert read_notes(big, max_chars=10_000).startswith(TEMPLATE)


def test_a_nul_byte_in_a_tool_path_is_a_refused_call_not_a_failure(tmp_path):
    ws = Workspace(tmp_path / "n.md", TEMPLATE)
    for name, key in (("Edit", "file_path"), ("str_replace_based_edit_tool", "path")):
        tool_input = {
            key: str(ws.path) + "\0.txt",
            "old_string": "#",
            "new_string": "x",
            "command": "str_replace",
            "old_str": "#",
            "new_str": "x",
        }
        text, is_error = ws.call(name, tool_input)
        assert is_error and text == ws.refusal
    assert len(ws.refused) == 2 and ws.text == TEMPLATE


def test_notes_are_never_read_through_a_symbolic_link(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("# Session Title\nhunter2\n")
    link = tmp_path / "notes.md"
    link.symlink_to(secret)
    with pytest.raises(NotesUnreadable, match="symbolic link"):
        read_notes(link)
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    with pytest.raises(NotesUnreadable, match="not a regular file"):
        read_notes(fifo)  # and no hang
    assert NotesFile(link, TEMPLATE).ensure() is False and secret.read_text().endswith("2\n")


def test_a_planted_lock_link_creates_nothing_outside_the_folder(tmp_path):
    folder = tmp_path / "session"
    memory = NotesFile(folder / "session-memory.md", TEMPLATE)
    memory.ensure()
    outside = tmp_path / "outside.txt"
    (folder / "session-memory.md.lock").symlink_to(outside)
    with pytest.raises(NotesUnreadable, match="lock"):
        memory.replace(TEMPLATE, TEMPLATE + "\n- more\n")
    assert not outside.exists() and memory.read() == TEMPLATE


def test_memory_compact_never_sends_a_linked_notes_target(tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("# Current State\n- the secret is hunter2\n")
    engine = stenograph.Engine.from_preset(
        "coding-agent",
        overrides={
            "memory-compact": {
                "maxContextTokens": 1000,
                "minKeepTokens": 0,
                "minKeepTextMessages": 1,
            },
            "forked-extraction": {"backend": "offline"},
        },
    )
    session = engine.open_session("l", state_dir=tmp_path)
    session.append({"role": "user", "content": "word " * 3000})
    session.post_sampling(text_reply("ok"))
    link = tmp_path / "l" / "session-memory.md"  # the notes file itself, planted as a link
    link.symlink_to(secret)
    session.announce_notes(stenograph.NotesRecord(str(link), session.history[0].uuid))
    session.append({"role": "user", "content": "next"})
    request = session.pre_call(model="m")
    assert "hunter2" not in str(request)


def test_an_existing_session_folder_and_journal_become_private(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    (folder / "journal.jsonl").write_text("")
    os.chmod(folder / "journal.jsonl", 0o644)
    session = stenograph.Engine.from_preset("inactivity-only").open_session("p", state_dir=tmp_path)
    session.append({"role": "user", "content": "x"})
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "journal.jsonl").stat().st_mode) == 0o600
    session.close()
    fresh = stenograph.Engine.from_preset("inactivity-only").open_session("q", state_dir=tmp_path)
    fresh.append({"role": "user", "content": "x"})
    assert stat.S_IMODE((tmp_path / "q" / "journal.jsonl").stat().st_mode) == 0o600
