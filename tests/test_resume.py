"""Reopening a stored session: what the load builds is not walked by the collector (it is
moved to the oldest generation at once, a host's frozen objects left frozen), and a bad
journal record is still skipped with a warning while the good ones load."""

from __future__ import annotations

import gc
import json
import logging
from pathlib import Path

import pytest

import stenograph

ENTRIES = 400


def engine() -> stenograph.Engine:
    return stenograph.Engine.from_preset("inactivity-only")


def stored(tmp_path: Path) -> Path:
    """A session of ``ENTRIES`` entries (tool calls and results) in ``tmp_path``, closed."""
    session = engine().open_session("s", state_dir=tmp_path)
    for n in range(ENTRIES // 2):
        use = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"path": f"f{n}"}}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * 50}
        session.append({"role": "user", "content": [result] if n else "start"})
        session.append({"role": "assistant", "content": [use], "usage": {"output_tokens": 3}})
    session.close()
    return tmp_path / "s" / "journal.jsonl"


def test_the_loaded_history_is_in_the_oldest_generation(tmp_path):
    stored(tmp_path)
    gc.collect()
    session = engine().open_session("s", state_dir=tmp_path)
    old = {id(o) for o in gc.get_objects(generation=2)}
    loaded = [o for e in session.history for o in (e, *e.blocks()) if gc.is_tracked(o)]
    assert len(session.history) == ENTRIES and len(loaded) > ENTRIES
    assert all(id(o) in old for o in loaded)
    session.close()


def test_objects_a_host_froze_stay_frozen(tmp_path):
    stored(tmp_path)
    kept = [["a host's object"]]
    gc.collect()
    gc.freeze()
    try:
        session = engine().open_session("s", state_dir=tmp_path)
        assert len(session.history) == ENTRIES
        assert not any(o is kept[0] for o in gc.get_objects())  # still in the permanent one
        session.close()
    finally:
        gc.unfreeze()


BAD_RECORDS = [
    {"op": "append", "entry": {"role": "system", "content": "x", "uuid": "b1"}},
    {"op": "append", "entry": {"role": "user", "content": 5, "uuid": "b2"}},
    {"op": "append", "entry": {"role": "user", "content": ["text"], "uuid": "b3"}},
    {"op": "append", "entry": "not an object"},
    {"op": "memorize", "uuids": ["nowhere"]},
]


def test_a_bad_record_is_skipped_with_a_warning_and_the_rest_loads(tmp_path, caplog):
    journal = stored(tmp_path)
    odd = {"role": "user", "content": "late", "uuid": "ok", "timestamp": "not a time"}
    lines = [json.dumps(r) for r in [*BAD_RECORDS, {"op": "append", "entry": odd}]]
    with journal.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="stenograph.engine.session"):
        session = engine().open_session("s", state_dir=tmp_path)
    skipped = [r for r in caplog.records if "skipped a journal record" in r.getMessage()]
    assert len(skipped) == len(BAD_RECORDS)
    assert len(session.history) == ENTRIES + 1
    last = session.history[-1]
    assert last.timestamp is None and last.meta == {"invalid_timestamp": "'not a time'"}
    assert session.history[1].usage == {"output_tokens": 3}
    assert session.history.tool_use_entry["t3"] is session.history[7]
    session.close()


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_a_journal_with_either_line_ending_loads_whole(tmp_path, ending):
    journal = stored(tmp_path)
    journal.write_bytes(journal.read_bytes().replace(b"\n", ending))
    session = engine().open_session("s", state_dir=tmp_path)
    assert len(session.history) == ENTRIES
    session.close()
