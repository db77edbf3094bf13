"""memory-compact: compaction from the notes on real sessions, and every fall-back path."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from conftest import real_transcripts
from helpers import text_reply, tool_result, tool_turn

import stenograph
from stenograph import Compacted, CompactionSkipped
from stenograph.engine.clock import parse_timestamp
from stenograph.engine.notes import read_notes
from stenograph.handlers.forked_extraction.desk import ExtractionDesk
from stenograph.integrations.transcripts import read_transcript
from stenograph.replay import replay

MC = "memory-compact"


class HandNotes(stenograph.Handler):
    """Notes written by hand (a test's file) through the notes hooks: the newest announced
    file is the current notes; ``desk`` says when an extraction runs."""

    name = "hand-notes"

    def __init__(self, settings, slot=0):
        super().__init__(settings, slot)
        self.desk = ExtractionDesk()

    @stenograph.hookimpl
    def notes_written(self, session, notes):
        session.stash[HAND] = notes

    @stenograph.hookimpl
    def notes_current(self, session):
        notes = session.stash.get(HAND, None)
        return read_notes(Path(notes.label)) if notes else None

    @stenograph.hookimpl
    def extraction_idle(self, timeout, stale_after):
        return self.desk.wait_idle(timeout, stale_after)


HAND = stenograph.StateKey[stenograph.NotesRecord]()


def notes_of(session) -> stenograph.NotesRecord | None:
    """The notes memory-compact knows of."""
    return session.stash.get(session.engine.slot(MC).handler.notes_key, None)


def compact_preset(tmp_path, **settings) -> str:
    values = {
        "maxContextTokens": 30_000,
        "minKeepTokens": 5_000,
        "maxKeepTokens": 15_000,
        **settings,
    }
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())
    path = tmp_path / "compact.toml"
    path.write_text(
        'extends = "coding-agent"\nstrict = true\n[[handlers]]\nuse = '
        '"update-threshold"\n[[handlers]]\nuse = "forked-extraction"\n'
        f'[[handlers]]\nuse = "{MC}"\n{lines}'
    )
    return str(path)


def plain_start(history, first_uncovered: int, min_tokens=5_000, min_texts=5, max_tokens=15_000):
    """Where the kept part should start, by the documented rule, written out plainly."""

    def tokens(a, b):
        return sum(history.sent_tokens(e) for e in history.entries[a:b])

    def texts(a):
        return sum(any(b.get("type") == "text" for b in e.blocks()) for e in history.entries[a:])

    start = first_uncovered
    while start > 0 and (tokens(start, None) < min_tokens or texts(start) < min_texts):
        if tokens(start - 1, None) > max_tokens:
            break
        start -= 1
    for candidate in range(start, 0, -1):
        if tokens(candidate, None) > max_tokens:
            break
        if history.safe_start(candidate):
            return candidate
    return next(c for c in range(start + 1, first_uncovered + 1) if history.safe_start(c))


def drive(path, preset: str, state_dir) -> tuple[stenograph.Session, list[tuple[dict, list]]]:
    """Replay ``path`` by hand, keeping every request and the events of its pre-call; at
    each compaction, the kept part must start where the documented rule says."""
    session = stenograph.Engine.from_preset(preset).open_session(
        "c", state_dir=state_dir, clock=stenograph.ManualClock(0)
    )
    calls = []
    for message in read_transcript(path).messages:
        moment = parse_timestamp(message.get("timestamp"))
        if moment is not None and moment > session.clock():
            session.clock.set(moment)
        if message["role"] != "assistant":
            session.append(message)
            continue
        seen = len(session.events)
        request = session.pre_call(model="m")
        calls.append((request, session.events[seen:]))
        if any(isinstance(e, Compacted) for e in session.events[seen:]):
            covered = session.history.by_uuid[notes_of(session).upto_uuid].index
            assert session.history.window_start == plain_start(session.history, covered + 1)
        session.post_sampling(message)
        session.wait_for_background()
    return session, calls


def big_sessions() -> list:
    return [p for p in real_transcripts() if p.stat().st_size > 150_000 and p.suffix == ".jsonl"]


@pytest.mark.parametrize("path", big_sessions(), ids=lambda p: p.name[:24])
def test_compacted_requests_on_real_sessions(tmp_path, path):
    session, calls = drive(path, compact_preset(tmp_path), tmp_path)
    compacted = [
        i for i, (_, events) in enumerate(calls) if any(isinstance(e, Compacted) for e in events)
    ]
    notes_path = getattr(notes_of(session), "label", "")
    previous = None
    for i, (request, _events) in enumerate(calls):
        messages = request["messages"]
        assert stenograph.check_request(messages) == []
        if session.history.preamble and i >= (compacted[0] if compacted else len(calls)):
            assert "<session-notes>" in str(messages[0]["content"]) and notes_path in str(
                messages[0]["content"]
            )
        if previous is not None and i not in compacted:
            assert json.dumps(messages[: len(previous)]) == json.dumps(previous)
        previous = messages
    for i in compacted:
        event = next(e for e in calls[i][1] if isinstance(e, Compacted))
        assert event.tokens_after < event.tokens_before and event.kept_messages >= 1
    if compacted:
        report = replay(path, compact_preset(tmp_path), state_dir=tmp_path)
        assert report.compactions and report.tokens_sent < report.tokens_full
        assert set(report.compactions[0]) == {
            "before_assistant_index",
            "tokens_before",
            "tokens_after",
            "kept_messages",
        }


def test_some_real_sessions_compact(shared_data, tmp_path):
    report = replay(
        shared_data / "chiphuyen-sniffly" / "d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl",
        compact_preset(tmp_path),
        state_dir=tmp_path,
    )
    assert len(report.compactions) >= 3 and report.handler_errors == []


class Fixture:
    """A session whose history and notes are built by hand."""

    def __init__(self, tmp_path, notes: str | None = "real", **settings):
        values = {
            "maxContextTokens": 2_000,
            "minKeepTokens": 0,
            "minKeepTextMessages": 1,
            "maxKeepTokens": 1_000,
            "waitSeconds": 0.2,
            **settings,
        }
        path = tmp_path / "mc.toml"
        path.write_text(
            '[[handlers]]\nuse = "hand-notes"\n'
            f'[[handlers]]\nuse = "{MC}"\n'
            + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())
        )
        engine = stenograph.Engine.from_preset(path, handlers=[HandNotes])
        self.session = engine.open_session("f", state_dir=tmp_path)
        self.notes_file = tmp_path / "notes.md"
        s = self.session
        s.append({"role": "user", "content": "Start the refactor."})
        for _ in range(3):
            s.pre_call(model="m")
            message, tool_id = tool_turn()
            s.post_sampling({**message, "usage": {"input_tokens": 500, "output_tokens": 10}})
            s.append(tool_result(tool_id, "code " * 800))
        s.pre_call(model="m")
        done = text_reply("Refactor half done.")
        self.covered = s.post_sampling(
            {**done, "usage": {"input_tokens": 2_600, "output_tokens": 9}}
        )
        s.append({"role": "user", "content": "Go on."})
        if notes is not None:
            body = "- refactoring parser.py\n" if notes == "real" else ""
            self.notes_file.write_text(f"# Current State\n_What now._\n{body}")
            self.announce(self.covered.uuid)

    def announce(self, upto_uuid: str) -> None:
        self.session.announce_notes(stenograph.NotesRecord(str(self.notes_file), upto_uuid))

    def call(self) -> tuple[dict, list]:
        seen = len(self.session.events)
        request = self.session.pre_call(model="m")
        return request, self.session.events[seen:]


def test_compaction_on_a_hand_built_history(tmp_path):
    fixture = Fixture(tmp_path)
    request, events = fixture.call()
    event = next(e for e in events if isinstance(e, Compacted))
    messages = request["messages"]
    notes, kept = messages[0]["content"]  # the notes and the kept prompt, one user message
    assert "- refactoring parser.py" in notes["text"] and len(messages) == 1
    assert kept == {"type": "text", "text": "Go on."} and messages[0]["role"] == "user"
    assert event.kept_messages == 1 and event.start_uuid == fixture.session.history[-1].uuid
    assert len(fixture.session.history) == 9  # the history stays whole
    again = fixture.session.engine.open_session("f", state_dir=tmp_path)  # survives a reopen
    assert json.dumps(again.pre_call(model="m")["messages"]) == json.dumps(messages)


def test_recent_minimums_are_kept(tmp_path):
    fixture = Fixture(
        tmp_path,
        minKeepTextMessages=3,
        minKeepTokens=1_500,
        maxKeepTokens=5_000,
        maxContextTokens=2_500,
    )
    request, events = fixture.call()
    assert any(isinstance(e, Compacted) for e in events), events
    history = fixture.session.history
    kept = history.entries[history.window_start :]
    texts = [e for e in kept if any(b.get("type") == "text" for b in e.blocks())]
    assert len(texts) >= 3 and sum(history.sent_tokens(e) for e in kept) >= 1_500
    assert stenograph.check_request(request["messages"]) == []


@pytest.mark.parametrize(
    ("notes", "change", "reason"),
    [
        (None, None, "no notes yet"),
        ("template", None, "nothing beyond the template"),
        ("real", "unknown-uuid", "not in the history"),
        ("real", "missing-file", "missing or empty"),
        ("real", "tiny-threshold", "still"),
    ],
)
def test_fall_backs(tmp_path, notes, change, reason):
    settings = (
        {"maxContextTokens": 1_000, "maxKeepTokens": 1_000} if change == "tiny-threshold" else {}
    )
    fixture = Fixture(tmp_path, notes=notes, **settings)
    if change == "unknown-uuid":
        fixture.announce("no-such-uuid")
    if change == "missing-file":
        fixture.notes_file.unlink()
    if change == "tiny-threshold":
        fixture.notes_file.write_text("# Current State\n_What now._\n" + "fact " * 2000)
    before = fixture.session.history.messages()
    request, events = fixture.call()
    skipped = [e for e in events if isinstance(e, CompactionSkipped)]
    assert len(skipped) == 1 and reason in skipped[0].reason
    assert request["messages"] == before and not fixture.session.history.preamble


def test_fall_back_while_an_extraction_runs_past_the_wait(tmp_path):
    fixture = Fixture(tmp_path)
    desk = fixture.session.engine.slot("hand-notes").handler.desk
    request = stenograph.ExtractionRequest("u", 0, 0, 0, "r", 0.0)
    desk.file(request, None)
    assert desk.take() == (request, None)
    _, events = fixture.call()
    assert "still running" in next(e for e in events if isinstance(e, CompactionSkipped)).reason
    threading.Timer(0.05, lambda: desk.done(request)).start()
    compact = fixture.session.engine.slot(MC).handler
    compact.settings = compact.settings.model_copy(update={"wait_seconds": 5})
    _, events = fixture.call()
    assert any(isinstance(e, Compacted) for e in events)


def test_boundary_never_splits_a_tool_call_from_its_result(tmp_path):
    fixture = Fixture(tmp_path)
    tool_use_entry = fixture.session.history[5]
    assert tool_use_entry.tool_use_ids
    fixture.announce(tool_use_entry.uuid)
    request, events = fixture.call()
    assert stenograph.check_request(request["messages"]) == []
    history = fixture.session.history
    assert any(isinstance(e, Compacted) for e in events)
    assert history.window_start == 5  # the kept part starts with the covered tool call
    assert history[history.window_start].tool_use_ids == tool_use_entry.tool_use_ids


def test_resume_injection_into_a_fresh_session(tmp_path):
    notes = tmp_path / "earlier.md"
    notes.write_text("# Current State\n_What now._\n- parser refactor half done\n")
    path = tmp_path / "resume.toml"
    path.write_text(f'[[handlers]]\nuse = "{MC}"\nresumeNotesPath = "{notes}"\n')
    session = stenograph.Engine.from_preset(path).open_session("new", state_dir=tmp_path)
    session.append({"role": "user", "content": "Continue the refactor."})
    first = session.pre_call(model="m")
    ((notes_block, prompt),) = [m["content"] for m in first["messages"]]  # one user message
    assert "parser refactor half done" in notes_block["text"]
    assert prompt == {"type": "text", "text": "Continue the refactor."}
    session.post_sampling(text_reply())
    session.append({"role": "user", "content": "Next."})
    second = session.pre_call(model="m")
    assert json.dumps(second["messages"][:1]) == json.dumps(first["messages"])
    assert stenograph.check_request(second["messages"]) == []


def test_min_keep_above_max_keep_is_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(f'[[handlers]]\nuse = "{MC}"\nminKeepTokens = 50000\nmaxKeepTokens = 100\n')
    with pytest.raises(stenograph.PresetError, match="minKeepTokens must not exceed"):
        stenograph.Engine.from_preset(path)


def test_compaction_waits_for_a_real_running_extraction(
    tmp_path, messages_server, anthropic_client
):
    """The fork writes the notes while pre-call waits: no dead-lock, the fresh notes are used."""
    import time

    from stenograph.testing import Reply

    def fork(request):
        last = request.body["messages"][-1]["content"]
        if not isinstance(last, str):
            return Reply.text("done")  # the fork's second turn: its edit was answered
        path = last.split('<notes path="')[1].split('"')[0]
        return Reply.tool_use(
            "str_replace_based_edit_tool",
            {
                "command": "str_replace",
                "path": path,
                "old_str": "# Current State\n",
                "new_str": "# Current State\n- fresh from the fork\n",
            },
            delay=0.5,
        )

    messages_server.responder = fork
    path = tmp_path / "p.toml"
    path.write_text(
        'strict = true\n[[handlers]]\nuse = "update-threshold"\nminimumMessageTokensToInit = 100\n'
        'minimumTokensBetweenUpdate = 50\n[[handlers]]\nuse = "forked-extraction"\n'
        'backend = "anthropic"\nmaxRetries = 0\n'
        f'[[handlers]]\nuse = "{MC}"\nmaxContextTokens = 1000\nminKeepTokens = 0\n'
        "minKeepTextMessages = 1\nmaxKeepTokens = 1000\nwaitSeconds = 10\n"
    )
    engine = stenograph.Engine.from_preset(path, services={"anthropic": anthropic_client})
    session = engine.open_session("w", state_dir=tmp_path)
    editor = [{"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}]
    session.append({"role": "user", "content": "Refactor. " + "context " * 600})
    session.pre_call(model="m", tools=editor)
    session.post_sampling(
        {**text_reply("Done part one."), "usage": {"input_tokens": 1200, "output_tokens": 5}}
    )
    session.append({"role": "user", "content": "Next part."})
    started = time.monotonic()
    request = session.pre_call(model="m", tools=editor)  # the fork is still running here
    assert time.monotonic() - started < 5
    assert "fresh from the fork" in request["messages"][0]["content"][0]["text"]
    session.close()
