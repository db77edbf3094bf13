"""The notes job as a value: its JSON form shares the snapshot made for it (no deep copy of
a long history per extraction) and gives the same job back; what is filed for another
worker stays small however long the session."""

from __future__ import annotations

import json

from helpers import open_session, talk, text_reply

from stenograph.handlers.forked_extraction import ForkedExtraction
from stenograph.handlers.forked_extraction.fork import ForkContext, with_breakpoint
from stenograph.handlers.forked_extraction.job import Job, job_settings
from stenograph.stores import EXTRACTION


def job(**snapshot) -> Job:
    handler = ForkedExtraction(ForkedExtraction.Settings())
    return Job(
        session_id="s",
        store_url="sqlite:///x.db",
        label="session-memory.md",
        shown="/s/session-memory.md",
        upto_uuid="u2",
        upto_index=1,
        position=2,
        backend="anthropic" if "context" in snapshot else "offline",
        template=handler.template,
        prompt=handler.prompt,
        settings=job_settings(handler.settings),
        lease_seconds=30.0,
        **snapshot,
    )


def test_an_offline_job_comes_back_whole_from_its_json_form():
    offline = job(notes="# Notes\n- done\n")
    assert Job.from_dict(json.loads(json.dumps(offline.to_dict()))) == offline


def test_the_json_form_of_a_fork_job_shares_its_context():
    messages = [{"role": "user", "content": "hello"}]
    context = ForkContext("m", "system", [{"name": "Read"}], messages, {"temperature": 0})
    fork = job(context=context)
    data = fork.to_dict()
    assert data["context"]["messages"] is messages and data["context"]["model"] == "m"
    back = Job.from_dict(data)
    assert back == fork and back.context is not None and back.context.messages is messages


def test_the_fork_adds_a_breakpoint_unless_the_request_has_the_four_the_api_allows():
    mark = {"type": "ephemeral"}
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "ok", "cache_control": mark}],
    }
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": mark}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"cache_control": 1}}
            ],
        },
        {"role": "user", "content": [result]},
    ]
    system = [{"type": "text", "text": "sys", "cache_control": mark}]
    three = ForkContext("m", system, [{"name": "Read"}], messages, {})
    assert with_breakpoint(three)[-1]["content"][-1]["cache_control"] == mark  # 3 of 4: added
    assert "cache_control" not in messages[-1]["content"][-1]  # the shared message unchanged
    four = ForkContext("m", system, [{"name": "Read", "cache_control": mark}], messages, {})
    assert with_breakpoint(four) == messages  # a tool input's key is no breakpoint


def test_an_offline_job_filed_for_the_lease_holder_stays_small_on_a_long_session(tmp_path):
    offline = {"forked-extraction": {"backend": "offline"}}
    session, _ = open_session(state_dir=tmp_path, overrides=offline)
    holder = session.storage.acquire(EXTRACTION, "host-b:2:y", 60.0)  # another machine's
    talk(session, 40, 2500)
    session.wait_for_background()
    filed = session.storage.pending()
    history = len(json.dumps(session.history.messages()))
    assert filed is not None and filed["backend"] == "offline" and history > 500_000
    assert len(json.dumps(filed)) < 80_000  # the notes written, not the history
    session.storage.release(holder)
    session.close()


def test_the_offline_notes_follow_the_history_cut_back_by_the_host(tmp_path):
    offline = {"forked-extraction": {"backend": "offline"}}
    session, _ = open_session(state_dir=tmp_path, overrides=offline)
    talk(session, 12, 2500)
    session.wait_for_background()
    session.truncate(session.history.entries[4].uuid)  # question 0 and 1 stay
    for i in range(12):  # longer than before the cut, and no extraction meanwhile
        session.append({"role": "user", "content": f"again {i} " + "word " * 2500})
        session.append(text_reply(f"answer {i}"))
    session.append({"role": "user", "content": "again 12"})
    session.pre_call(model="m")
    session.post_sampling(text_reply("answer 12"))
    session.wait_for_background()
    notes = (tmp_path / "test" / "session-memory.md").read_text(encoding="utf-8")
    assert "Latest request: again 12" in notes and "- question 1 " in notes
    assert "question 11" not in notes  # the facts were gathered anew
    session.close()
