"""Hand-corrupted state never makes a session unopenable or broken: each bad part is
reported by file, handler and field, a copy is kept aside, and that part is reset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import talk, text_reply

import stenograph
from stenograph.engine.events import HandlerFailed, StateReset


def engine() -> stenograph.Engine:
    return stenograph.Engine.from_preset(
        "coding-agent", overrides={"forked-extraction": {"backend": "offline"}}
    )


def saved_session(tmp_path: Path) -> Path:
    session = engine().open_session("s", state_dir=tmp_path)
    talk(session, 3, 4000)
    session.close()
    return tmp_path / "s"


def reopen_and_use(tmp_path: Path) -> stenograph.Session:
    session = engine().open_session("s", state_dir=tmp_path)
    session.append({"role": "user", "content": "and now?"})
    session.pre_call(model="m")
    session.post_sampling(text_reply("fine"))
    session.append({"role": "user", "content": "again"})
    session.pre_call(model="m")
    assert not [e for e in session.events if isinstance(e, HandlerFailed)], session.events
    return session


def edit_state(folder: Path, change) -> dict:
    state = json.loads((folder / "state.json").read_text())
    change(state)
    (folder / "state.json").write_text(json.dumps(state))
    return state


CORRUPTIONS = {
    "tokensAtLastExtraction abc": (
        lambda s: s["handlers"]["update-threshold"].__setitem__("tokensAtLastExtraction", "abc"),
        "handlers.update-threshold",
        "tokensAtLastExtraction",
    ),
    "tokensAtLastExtraction Infinity": (
        lambda s: s["handlers"]["update-threshold"].__setitem__(
            "tokensAtLastExtraction", float("inf")
        ),
        "handlers.update-threshold",
        "tokensAtLastExtraction",
    ),
    "a slot's state a string": (
        lambda s: s["handlers"].__setitem__("update-threshold", "abc"),
        "handlers.update-threshold",
        "not an object",
    ),
    "handlers a string": (lambda s: s.__setitem__("handlers", "abc"), "handlers", "str"),
    "handlers a number": (lambda s: s.__setitem__("handlers", 5), "handlers", "int"),
    "memory-compact overhead negative": (
        lambda s: s["handlers"].setdefault("memory-compact", {}).__setitem__("overhead", -3),
        "handlers.memory-compact",
        "overhead",
    ),
    "notes record broken": (lambda s: s.__setitem__("notes", {"path": 3}), "notes", "malformed"),
    "window naming nothing": (
        lambda s: s.__setitem__("window", {"start": "gone", "preamble": []}),
        "window",
        "not in the history",
    ),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_a_bad_part_is_reported_kept_aside_and_reset(tmp_path, name):
    change, part, detail = CORRUPTIONS[name]
    folder = saved_session(tmp_path)
    bad = edit_state(folder, change)
    session = reopen_and_use(tmp_path)
    resets = [e for e in session.events if isinstance(e, StateReset)]
    assert len(resets) == 1 and resets[0].part.startswith(part)
    assert detail in resets[0].part + resets[0].reason
    assert resets[0].path == str(folder / "state.json")
    assert json.loads(Path(resets[0].copy).read_text()) == json.loads(json.dumps(bad))
    session.close()
    again = engine().open_session("s", state_dir=tmp_path)  # saved clean: no second reset
    assert not [e for e in again.events if isinstance(e, StateReset)]


@pytest.mark.parametrize(
    "content",
    [b"\x89PNG\r\n\x1a\n\x00\xff binary", b"{not json", b"[1, 2]", b"", b"[" * 100_000],
    ids=["binary", "bad json", "a list", "empty", "nested too deep"],
)
def test_an_unreadable_state_file_opens_with_a_fresh_state(tmp_path, content):
    folder = saved_session(tmp_path)
    (folder / "state.json").write_bytes(content)
    session = reopen_and_use(tmp_path)
    resets = [e for e in session.events if isinstance(e, StateReset)]
    assert [r.part for r in resets] == ["state.json"]
    assert Path(resets[0].copy).read_bytes() == content
    assert len(session.history) == 9


def test_a_journal_line_nested_too_deep_is_skipped(tmp_path):
    folder = saved_session(tmp_path)
    with (folder / "journal.jsonl").open("a") as handle:
        handle.write('{"op": "append", "entry": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    session = reopen_and_use(tmp_path)
    assert len(session.history) == 9
