"""The notes writer survives every fault of its file: an error event names the file, the
session stays able to extract, and the next trigger writes the notes."""

from __future__ import annotations

import errno
import types

import pytest
from helpers import text_reply

import stenograph
from stenograph import CompactionSkipped, ExtractionFailed, ExtractionFinished
from stenograph.stores import notes_file


def preset(tmp_path) -> str:
    path = tmp_path / "notes.toml"
    path.write_text(
        '[[handlers]]\nuse = "update-threshold"\nminimumMessageTokensToInit = 100\n'
        "minimumTokensBetweenUpdate = 50\n"
        '[[handlers]]\nuse = "forked-extraction"\nbackend = "offline"\n'
        '[[handlers]]\nuse = "memory-compact"\nmaxContextTokens = 1000000\nwaitSeconds = 30\n'
    )
    return str(path)


def turn(session: stenograph.Session, i: int) -> None:
    session.append({"role": "user", "content": f"step {i}: " + "context " * 200})
    session.pre_call(model="m")
    session.post_sampling(text_reply(f"done {i}"))
    session.wait_for_background(10)


def raising(code: int):
    def fail(*args, **kwargs):
        raise OSError(code, f"simulated: {errno.errorcode[code]}")

    return fail


def break_with(kind: str, notes, monkeypatch) -> None:
    """Make the next notes write fail the way ``kind`` says."""
    if kind == "bad bytes":
        notes.write_bytes(b"# Session Title\n\xff\xfe caf\xe9\n")
    elif kind == "enospc at the write":
        monkeypatch.setattr(notes_file, "atomic_write", raising(errno.ENOSPC))
        monkeypatch.setattr(
            notes_file, "tempfile", types.SimpleNamespace(mkstemp=raising(errno.ENOSPC))
        )
    elif kind in ("read-only folder", "permission denied"):
        code = errno.EROFS if kind == "read-only folder" else errno.EACCES
        monkeypatch.setattr(notes_file, "tempfile", types.SimpleNamespace(mkstemp=raising(code)))
        notes.unlink(missing_ok=True)  # the first create fails
    elif kind == "symlink":
        secret = notes.parent.parent / "secret.txt"
        secret.write_text("hunter2")
        notes.unlink(missing_ok=True)
        notes.symlink_to(secret)


def repair(kind: str, notes, monkeypatch) -> None:
    monkeypatch.undo()
    if kind in ("bad bytes", "symlink"):
        notes.unlink()


@pytest.mark.parametrize(
    "kind",
    ["bad bytes", "enospc at the write", "read-only folder", "permission denied", "symlink"],
)
def test_the_notes_writer_recovers_after_a_fault(tmp_path, monkeypatch, kind):
    engine = stenograph.Engine.from_preset(preset(tmp_path))
    session = engine.open_session("n", state_dir=tmp_path / "state")
    notes = tmp_path / "state" / "n" / "session-memory.md"
    turn(session, 0)
    assert any(isinstance(e, ExtractionFinished) for e in session.events)
    before = len(session.events)
    break_with(kind, notes, monkeypatch)
    turn(session, 1)
    failed = [e for e in session.events[before:] if isinstance(e, ExtractionFailed)]
    assert failed and failed[0].path == str(notes), session.events[before:]
    if kind == "bad bytes":
        assert "not valid UTF-8" in failed[0].error and "delete it" in failed[0].error
    if kind == "symlink":
        assert "symbolic link" in failed[0].error
        assert "hunter2" not in str(session.last_request)
    assert session.hook.extraction_idle(timeout=0, stale_after=60)  # no wait to come
    repair(kind, notes, monkeypatch)
    mark = len(session.events)
    turn(session, 2)
    assert any(isinstance(e, ExtractionFinished) for e in session.events[mark:])
    assert "step 2" in notes.read_text() or "done 2" in notes.read_text()
    waits = [e for e in session.events if isinstance(e, CompactionSkipped)]
    assert not any("still running" in e.reason for e in waits)
    session.close()


def test_temp_files_of_a_killed_writer_are_removed_at_open_and_not_written_again(
    tmp_path, monkeypatch
):
    engine = stenograph.Engine.from_preset(preset(tmp_path))
    session = engine.open_session("k", state_dir=tmp_path)
    turn(session, 0)
    session.close()
    folder = tmp_path / "k"
    for i in range(3):
        (folder / f".session-memory.md.abc{i}.new").write_text("partial")
        (folder / f".state.json.abc{i}.tmp").write_text("partial")
    session = engine.open_session("k", state_dir=tmp_path)
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []
    made = []
    real = notes_file.tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        made.append(kwargs.get("suffix"))
        return real(*args, **kwargs)

    monkeypatch.setattr(notes_file.tempfile, "mkstemp", mkstemp)
    turn(session, 1)
    assert ".new" not in made and ".tmp" in made  # notes replaced; no template copy made
    session.close()
