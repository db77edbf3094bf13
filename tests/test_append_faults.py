"""An append is all or nothing: bad input is refused whole, a failed write leaves no trace,
and after reopening the history is exactly the appends that returned."""

from __future__ import annotations

import datetime
import errno
import json
import os
import random
from pathlib import Path

import pytest
from helpers import listening_engine, talk, text_reply

import stenograph
from stenograph.engine import store as store_module

BAD_MESSAGES = {
    "lone surrogate": ({"role": "user", "content": "caf\udce9"}, "lone surrogate"),
    "bytes in a block": (
        {"role": "user", "content": [{"type": "text", "text": "x", "data": b"\x00"}]},
        r"content\[0\].data: bytes",
    ),
    "set in a block": (
        {"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {1}}]},
        r"content\[0\].input: set",
    ),
    "datetime in meta": (
        {"role": "user", "content": "x", "meta": {"when": datetime.datetime(2026, 1, 1)}},
        "meta.when: datetime",
    ),
    "nan": (
        {
            "role": "user",
            "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"x": float("nan")}}],
        },
        "input.x: nan",
    ),
    "timestamp 1e20": ({"role": "user", "content": "x", "timestamp": 1e20}, "timestamp"),
    "timestamp -1e12": ({"role": "user", "content": "x", "timestamp": -1e12}, "timestamp"),
    "year 1 with an offset": (
        {"role": "user", "content": "x", "timestamp": "0001-01-01T00:00:00+05:00"},
        "timestamp",
    ),
    "year 9999 with an offset": (
        {"role": "user", "content": "x", "timestamp": "9999-12-31T23:30:00-05:00"},
        "timestamp",
    ),
}


@pytest.fixture
def bare_engine(tmp_path) -> stenograph.Engine:
    """An engine with no handler: only the history and the journal."""
    path = tmp_path / "bare.toml"
    path.write_text('name = "bare"\n')
    return stenograph.Engine.from_preset(path)


@pytest.mark.parametrize("on_disk", [True, False], ids=["disk", "memory"])
@pytest.mark.parametrize("name", list(BAD_MESSAGES))
def test_bad_input_is_refused_whole_and_does_not_poison_the_session(
    tmp_path, bare_engine, name, on_disk
):
    message, field = BAD_MESSAGES[name]
    state_dir = tmp_path / "state" if on_disk else None
    session = bare_engine.open_session("s", state_dir=state_dir)
    session.append({"role": "user", "content": "hello"})
    with pytest.raises(stenograph.EntryError, match=field):
        session.append(message)
    if "meta" not in message:  # a response's meta is taken from id/model/stop_reason
        with pytest.raises(stenograph.EntryError, match=field):
            session.post_sampling(message)
    assert len(session.history) == 1
    session.post_sampling(text_reply("hi"))
    json.dumps(session.pre_call(model="m"))  # the request still serialises
    session.close()
    if on_disk:
        again = bare_engine.open_session("s", state_dir=state_dir)
        assert [e.content for e in again.history] == ["hello", [{"type": "text", "text": "hi"}]]


class FailingWrites:
    """Fault injection at the one function that writes journal bytes: with probability
    ``rate`` a write puts a random strict prefix of its bytes on disk and raises ENOSPC or
    EIO, as a full or failing disk does."""

    def __init__(self, rng: random.Random, rate: float) -> None:
        self.rng, self.rate, self.failed = rng, rate, 0
        self.real = store_module.write_fd

    def __call__(self, fd: int, data: bytes) -> None:
        if self.rng.random() < self.rate:
            self.failed += 1
            os.write(fd, data[: self.rng.randrange(len(data))])
            code = self.rng.choice([errno.ENOSPC, errno.EIO])
            raise OSError(code, os.strerror(code))
        self.real(fd, data)


def test_failed_writes_leave_exactly_the_appends_that_returned(tmp_path, bare_engine, monkeypatch):
    rng = random.Random(1212)
    faults = FailingWrites(rng, rate=0.3)
    monkeypatch.setattr(store_module, "write_fd", faults)
    trials, appended, raised = 300, 0, 0
    for trial in range(trials):
        session = bare_engine.open_session(f"t{trial}", state_dir=tmp_path)
        kept: list[tuple[str, object]] = []
        for step in range(rng.randrange(5, 25)):
            uid = f"u{trial}-{step}"
            role = rng.choice(["user", "assistant"])
            content = rng.choice(["text", [{"type": "text", "text": f"step {step}"}]])
            try:
                if role == "user":
                    entry = session.append({"role": role, "content": content, "uuid": uid})
                else:
                    entry = session.post_sampling({"content": [], "uuid": uid})
            except OSError as exc:
                assert exc.errno in (errno.ENOSPC, errno.EIO)
                raised += 1
                if rng.random() < 0.5:  # a retry with the same uuid works (or fails whole)
                    try:
                        entry = session.append({"role": "user", "content": "again", "uuid": uid})
                    except OSError:
                        raised += 1
                        continue
                else:
                    continue
            kept.append((entry.uuid, entry.content))
            appended += 1
        assert [(e.uuid, e.content) for e in session.history] == kept
        session.close()
        reopened = bare_engine.open_session(f"t{trial}", state_dir=tmp_path)
        assert [(e.uuid, e.content) for e in reopened.history] == kept, f"trial {trial}"
        reopened.close()
    assert faults.failed == raised > 100 and appended > 1000


def test_memorize_that_fails_to_persist_marks_nothing(tmp_path, bare_engine, monkeypatch):
    session = bare_engine.open_session("m", state_dir=tmp_path)
    entry = session.append({"role": "user", "content": "x"})

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module, "write_fd", full)
    with pytest.raises(OSError):
        session.memorize([entry])
    with pytest.raises(OSError):
        session.replace_sent_content(entry, "y")
    assert not entry.memorized and entry.sent_content is None


def test_state_is_never_ahead_of_the_journal(tmp_path, monkeypatch):
    """The journal is fsynced before the state that refers to it is replaced."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        target = os.readlink(f"/proc/self/fd/{fd}")
        synced.append(os.path.basename(target))
        real_fsync(fd)

    engine = stenograph.Engine.from_preset("default")
    session = engine.open_session("d", state_dir=tmp_path)
    monkeypatch.setattr(os, "fsync", fsync)
    session.append({"role": "user", "content": "x" * 60_000})
    session.pre_call(model="m")
    session.post_sampling(text_reply())
    session.close()
    first_state = next(i for i, name in enumerate(synced) if name.startswith(".state.json"))
    assert "journal.jsonl" in synced[:first_state], synced


def test_a_journal_cut_behind_the_saved_state_is_reconciled_at_open(tmp_path):
    engine = listening_engine(tmp_path)
    session = engine.open_session("r", state_dir=tmp_path)
    talk(session, 6, 3000)
    session.wait_for_background()
    session.close()
    folder = tmp_path / "r"
    state = json.loads((folder / "state.json").read_text())
    assert state["journalBytes"] == (folder / "journal.jsonl").stat().st_size
    assert state["handlers"]["update-threshold"]["initialized"] is True
    journal = (folder / "journal.jsonl").read_bytes()
    (folder / "journal.jsonl").write_bytes(journal[: len(journal) // 3])  # a lost tail

    heard = engine.slot("notes-heard").handler.heard
    heard.clear()
    reopened = engine.open_session("r", state_dir=tmp_path)
    resets = [e for e in reopened.events if isinstance(e, stenograph.StateReset)]
    assert resets and "journal is shorter" in resets[0].reason
    assert resets[0].copy and json.loads(Path(resets[0].copy).read_text()) == state
    assert reopened.handler_state("update-threshold") == {}
    assert all(notes.upto_uuid in reopened.history.by_uuid for notes in heard)
    assert 0 < len(reopened.history) < 12
    reopened.append({"role": "user", "content": "go on"})
    request = reopened.pre_call(model="m")
    assert stenograph.check_pairing(request["messages"]) == []
    reopened.close()
    again = engine.open_session("r", state_dir=tmp_path)  # saved again: consistent now
    assert not any(isinstance(e, stenograph.StateReset) for e in again.events)
