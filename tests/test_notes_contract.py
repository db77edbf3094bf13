"""The notes protocol is a contract of hooks: a package of another author, speaking only the
declared hooks, replaces update-threshold, forked-extraction or memory-compact in a preset,
and the other two built-ins keep working with it (pip-installed, real files, offline notes)."""

from __future__ import annotations

import json

import pytest
from helpers import install, talk

import stenograph
from stenograph import Compacted, ExtractionFinished, ThresholdDecision

ACME_NOTES = '''
"""Three handlers of another package, each speaking only stenograph's notes hooks."""

from pathlib import Path

import stenograph

FIXED = "# Current State\\n_What is going on._\\n- acme notes: the parser is half done\\n"


class EveryOtherState(stenograph.HandlerState):
    calls: int = 0
    covered: str = ""


class EveryOther(stenograph.Handler):
    """Asks for fresh notes after every second response."""

    name = "acme-every-other"
    State = EveryOtherState

    @stenograph.hookimpl
    def post_sampling(self, session, call, state):
        state.calls += 1
        if state.calls % 2:
            return

        def covered(request):
            state.covered = request.upto_uuid

        response = call.response
        request = stenograph.ExtractionRequest(
            response.uuid, response.index, 0, 0, "every other call", call.now, covered
        )
        stenograph.request_extraction(session, request)


class FixedNotes(stenograph.Handler):
    """Writes the same notes for every request, at once."""

    name = "acme-fixed-notes"

    @stenograph.hookimpl
    def extraction_requested(self, session, request):
        path = Path(session.folder) / "acme-notes.md"
        path.write_text(FIXED)
        session.announce_notes(stenograph.NotesRecord(str(path), request.upto_uuid))
        request.settle(session, ok=True)
        return True

    @stenograph.hookimpl
    def notes_current(self, session):
        path = Path(session.folder) / "acme-notes.md"
        return path.read_text() if path.exists() else ""


HEARD = stenograph.StateKey[stenograph.NotesRecord]("acme-compactor")


class Compactor(stenograph.Handler):
    """Sends the newest notes instead of the history they cover."""

    name = "acme-compactor"

    @stenograph.hookimpl
    def notes_written(self, session, notes):
        session.stash[HEARD] = notes

    @stenograph.hookimpl
    def pre_call(self, session):
        notes = session.stash.get(HEARD, None)
        covered = session.history.by_uuid.get(notes.upto_uuid) if notes else None
        if covered is None or covered.index + 1 >= len(session.history):
            return
        text = session.hook.notes_current()
        preamble = [{"role": "user", "content": "Notes so far:\\n" + text}]
        session.set_window(session.history[covered.index + 1], preamble)
'''
ENTRY_POINTS = """
[project.entry-points."stenograph.handlers"]
acme-every-other = "acme_notes:EveryOther"
acme-fixed-notes = "acme_notes:FixedNotes"
acme-compactor = "acme_notes:Compactor"
"""
THRESHOLD = (
    'use = "update-threshold"\nminimumMessageTokensToInit = 1000\nminimumTokensBetweenUpdate = 500'
)
WRITER = 'use = "forked-extraction"\nbackend = "offline"'
COMPACT = (
    'use = "memory-compact"\nmaxContextTokens = 3000\nminKeepTokens = 0\n'
    "minKeepTextMessages = 1\nmaxKeepTokens = 1500"
)


@pytest.fixture(scope="module")
def acme_site(tmp_path_factory):
    return install(
        tmp_path_factory.mktemp("acme"), "acme-notes", "acme_notes", ACME_NOTES, ENTRY_POINTS
    )


def open_with(tmp_path, *slots: str) -> stenograph.Session:
    """A session on a strict preset of ``slots`` (each a slot's TOML lines), kept on disk."""
    preset = tmp_path / "preset.toml"
    preset.write_text("strict = true\n" + "".join(f"[[handlers]]\n{s}\n" for s in slots))
    return stenograph.Engine.from_preset(preset).open_session("s", state_dir=tmp_path)


def converse(session: stenograph.Session, rounds: int = 12) -> list[dict]:
    """``rounds`` questions and answers of ~400 tokens each; the requests sent."""
    requests = []
    for _ in range(rounds):  # strict: a handler failure raises
        talk(session, 1, 400)
        requests.append(session.last_request)
        session.wait_for_background()
    return requests


def of(session, kind) -> list:
    return [e for e in session.events if isinstance(e, kind)]


def test_a_third_party_threshold_drives_the_builtin_writer_and_compactor(
    tmp_path, on_path, acme_site
):
    on_path(acme_site)
    session = open_with(tmp_path, 'use = "acme-every-other"', WRITER, COMPACT)
    requests = converse(session)
    written = of(session, ExtractionFinished)
    assert len(written) >= 3 and all(e.backend == "offline" for e in written)
    assert session.handler_state("acme-every-other")["covered"] == written[-1].upto_uuid
    compacted = of(session, Compacted)
    assert compacted and compacted[0].tokens_after < compacted[0].tokens_before
    first = str(requests[-1]["messages"][0]["content"])
    assert "<session-notes>" in first and written[-1].path in first and "# Worklog" in first


def test_a_third_party_extractor_feeds_the_builtin_threshold_and_compactor(
    tmp_path, on_path, acme_site
):
    on_path(acme_site)
    slots = (THRESHOLD, 'use = "acme-fixed-notes"', COMPACT)
    session = open_with(tmp_path, *slots)
    requests = converse(session)
    positive = [e for e in of(session, ThresholdDecision) if e.extract]
    assert len(positive) >= 2
    state = session.handler_state("update-threshold")
    assert state["tokensAtLastExtraction"] == positive[-1].tokens
    assert state["lastExtractedUuid"] == positive[-1].response_uuid
    assert of(session, Compacted)
    assert "acme notes: the parser is half done" in str(requests[-1]["messages"][0]["content"])
    session.close()
    again = open_with(tmp_path, *slots)  # the notes record survives a reopen
    compact = again.engine.slot("memory-compact").handler
    assert again.stash[compact.notes_key].upto_uuid == positive[-1].response_uuid


def test_a_third_party_compactor_uses_the_builtin_threshold_and_writer(
    tmp_path, on_path, acme_site
):
    on_path(acme_site)
    session = open_with(tmp_path, THRESHOLD, WRITER, 'use = "acme-compactor"')
    requests = converse(session)
    written = of(session, ExtractionFinished)
    assert written
    state = session.handler_state("update-threshold")
    assert state["lastExtractedUuid"] == written[-1].upto_uuid
    messages = requests[-1]["messages"]
    assert messages[0]["content"][0]["text"].startswith("Notes so far:\n# Session Title")
    assert len(messages) < len(session.history)
    assert stenograph.check_request(messages) == []


def test_a_state_folder_of_an_older_version_keeps_its_notes(tmp_path):
    """Older versions kept the notes record in state.json too (``"notes"``); a folder that
    has it only there still announces it when the session opens, and saves it no more."""
    slots = (THRESHOLD, WRITER, COMPACT)
    session = open_with(tmp_path, *slots)
    converse(session, rounds=4)
    written = of(session, ExtractionFinished)[-1]
    session.close()
    folder = tmp_path / "s"
    journal = folder / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(line for line in lines if '"op":"notes"' not in line))
    state = json.loads((folder / "state.json").read_text())
    state["notes"] = {"path": written.path, "upto_uuid": written.upto_uuid}
    state["journalBytes"] = journal.stat().st_size
    (folder / "state.json").write_text(json.dumps(state))
    again = open_with(tmp_path, *slots)
    notes = again.stash[again.engine.slot("memory-compact").handler.notes_key]
    assert (notes.label, notes.upto_uuid) == (written.path, written.upto_uuid)
    assert not [e for e in again.events if e.kind == "StateReset"]
    again.close()
    assert "notes" not in json.loads((folder / "state.json").read_text())


def test_a_misspelt_hook_is_named_with_the_nearest_one(tmp_path):
    session = open_with(tmp_path, COMPACT)
    with pytest.raises(
        AttributeError, match="no hook 'notes_curent'.*Did you mean 'notes_current'"
    ):
        session.hook.notes_curent()
    assert session.hook.notes_current() is None  # no slot writes notes
    assert session.hook.extraction_idle(timeout=0, stale_after=1) is None
