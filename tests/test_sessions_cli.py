"""``stenograph sessions`` and ``stenograph migrate`` on every store."""

from __future__ import annotations

import json

from conftest import DEMO

from stenograph.cli import main
from stenograph.replay import replay
from stenograph.stores import open_store


def export(url: str, sid: str, path) -> dict:
    assert main(["sessions", "export", sid, "--store", url, "-o", str(path)]) == 0
    return json.loads(path.read_text())


def test_migrate_from_the_folder_store_and_back_gives_an_identical_export(
    store_url, tmp_path, capsys
):
    folder = f"file:{tmp_path / 'origin'}"
    replay(DEMO, "default", store=folder)
    (sid,) = open_store(folder).sessions()
    before = export(folder, sid, tmp_path / "before.json")
    assert len(before["messages"]) > 4
    if not store_url.startswith("file:"):
        assert main(["migrate", "--from", folder, "--to", store_url]) == 0
        assert export(store_url, sid, tmp_path / "there.json") == before
    back = f"file:{tmp_path / 'back'}"
    source = store_url if not store_url.startswith("file:") else folder
    assert main(["migrate", "--from", source, "--to", back]) == 0
    assert export(back, sid, tmp_path / "after.json") == before
    capsys.readouterr()
    assert main(["sessions", "list", "--store", back]) == 0
    assert capsys.readouterr().out.startswith(sid)
    assert main(["sessions", "show", sid, "--store", back]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["entries"] == len(before["messages"]) and shown["state_version"] >= 1


def test_an_export_replays_and_delete_removes_every_trace(store_url, tmp_path, capsys):
    replay(DEMO, "default", store=store_url)
    (sid,) = open_store(store_url).sessions()
    path = tmp_path / "export.json"
    messages = export(store_url, sid, path)["messages"]
    report = replay(path, "default", state_dir=None)
    assert report.calls == sum(m["role"] == "assistant" for m in messages)
    assert main(["sessions", "delete", sid, "--store", store_url]) == 0
    assert open_store(store_url).sessions() == []
    if store_url.startswith("file:"):
        assert not (tmp_path / "store" / sid).exists()
    assert main(["sessions", "delete", sid, "--store", store_url]) == 2
    assert f"no session '{sid}' to delete" in capsys.readouterr().err
