"""Reading a journal: a line is taken as ``json.loads`` takes it (the parser is called
straight for a line that is one object), a line only ``bytes.strip`` calls blank is
skipped silently, and the folder store applies each record as it parses it, following
the stored uuids as ``read`` does."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

from stenograph.engine.clock import parse_timestamp
from stenograph.engine.store import parse_line
from stenograph.stores.folder import FolderStorage

LINES = [
    '{"op": "append"}\n',
    '{"op": "append"}',
    '{"op": "append"}\r\n',
    '{"op": "append"}  \n',
    ' {"op": "append"}\n',
    '{"op": "append"} {"op": "sent"}\n',
    '{"op": "append"}\n\n',
    '{"op": "append"}x',
    '{"op": "append", "n": NaN}\n',
    '{"op": "app',
    '{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n",
    "[1, 2]\n",
    "5\n",
    "{}\n",
    '{"op": "\u2028"}\n',
]


def loads(line: str) -> object:
    """``json.loads(line)``, or the type of what it raises."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        return type(exc)


def parsed(line: str) -> object:
    try:
        return parse_line(line)
    except (ValueError, RecursionError) as exc:
        return type(exc)


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_line_parses_as_json_loads_takes_it(line):
    expected = loads(line)
    got = parsed(line)
    assert got == expected and type(got) is type(expected)


def storage(tmp_path, body: bytes) -> FolderStorage:
    folder = tmp_path / "s"
    folder.mkdir(parents=True)
    (folder / "journal.jsonl").write_bytes(body)
    return FolderStorage(folder, "s")


def append(uuid: str) -> bytes:
    entry = {"role": "user", "content": "x", "uuid": uuid}
    return json.dumps({"op": "append", "entry": entry}).encode() + b"\n"


def test_odd_lines_are_skipped_as_bytes_lines_were(tmp_path, caplog):
    body = b"".join(
        [
            append("a"),
            b" \t\x0b\x0c\r\n",  # blank to bytes.strip: skipped silently
            "\u00a0\n".encode(),  # not blank to bytes.strip: a corrupt line
            b'{"op": "sent", "uuid": "\xff"}\n',  # not UTF-8: replaced
            b'{"no": "op"}\n',
            append("b"),
            b'{"op": "append", "entry": {"ro',  # torn
        ]
    )
    store = storage(tmp_path, body)
    with caplog.at_level(logging.WARNING):
        records, end = store.read(0)
    assert end == len(body)
    assert [r.get("uuid") or r["entry"]["uuid"] for r in records] == ["a", "\ufffd", "b"]
    assert caplog.text.count("skipped a corrupt journal line") == 2


def test_replay_applies_what_read_returns_and_follows_the_uuids(tmp_path):
    body = append("a") + append("b") + b'{"op": "truncate", "after": "a"}\n' + append("c")
    applied: list[dict] = []
    store = storage(tmp_path, body)
    assert store.replay(0, applied.append) == len(body)
    assert applied == storage(tmp_path / "other", body).read(0)[0]
    before, after = store.append([json.loads(append("c"))], None)
    assert before == after  # stored already: skipped
    before, after = store.append([json.loads(append("b"))], None)
    assert after > before  # its name was freed by the truncate


STAMPS = [
    "2025-06-15T15:07:00Z",
    "2025-06-15T15:07:00.250000Z",
    "2025-06-15T15:07:00z",
    " 2025-06-15T15:07:00Z ",
    "2025-06-15T17:07:00+02:00",
    "2025-06-15T15:07:00",
    "20250615T150700Z",
]


@pytest.mark.parametrize("stamp", STAMPS)
def test_a_timestamp_names_the_same_instant_in_every_form(stamp):
    fraction = 0.25 if ".25" in stamp else 0.0
    expected = datetime(2025, 6, 15, 15, 7, tzinfo=UTC).timestamp() + fraction
    assert parse_timestamp(stamp) == expected


@pytest.mark.parametrize("stamp", ["", "  ", "soon", "2025-13-01T00:00:00Z"])
def test_a_timestamp_that_is_none_is_none(stamp):
    assert parse_timestamp(stamp) is None
