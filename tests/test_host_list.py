"""The host's list is the truth: wrap() (through Session.sync) adopts host edits, follows a
rewind, survives a 400 the host fixes, and refuses another conversation."""

from __future__ import annotations

import json

import pytest

import stenograph
from stenograph.engine.sync import ConversationMismatch, Synced
from stenograph.integrations.anthropic import wrap
from stenograph.testing import Reply


def engine() -> stenograph.Engine:
    return stenograph.Engine.from_preset(
        "default", overrides={"forked-extraction": {"backend": "offline"}}
    )


def strict_api(request):
    """Like the API: an empty text block is a 400; otherwise a short answer."""
    for message in request.body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if any(b.get("type") == "text" and not b.get("text") for b in blocks):
            return Reply.error(400, "messages: text content blocks must be non-empty")
    return Reply.text(f"answer {len(request.body['messages'])}")


def converse(client, messages, *texts):
    for text in texts:
        messages.append({"role": "user", "content": text})
        response = client.messages.create(model="m", max_tokens=50, messages=messages)
        messages.append({"role": "assistant", "content": response.content})


@pytest.fixture
def api(messages_server):
    messages_server.responder = strict_api
    return messages_server


def sent(server) -> str:
    return json.dumps(server.requests[-1].body["messages"])


def test_a_host_redaction_is_what_the_next_request_sends_also_after_a_restart(
    tmp_path, api, anthropic_client
):
    session = engine().open_session("r", state_dir=tmp_path)
    client = wrap(anthropic_client, session)
    messages: list = []
    converse(client, messages, "my password is hunter2", "and then?")
    messages[0] = {"role": "user", "content": "[redacted by host]"}
    converse(client, messages, "go on")
    assert "hunter2" not in sent(api) and "[redacted by host]" in sent(api)
    edited = [e for e in session.events if isinstance(e, stenograph.HistoryEdited)]
    assert edited and edited[0].uuids == (session.history[0].uuid,)
    session.close()
    session = engine().open_session("r", state_dir=tmp_path)
    assert session.history[0].content == "[redacted by host]"
    converse(wrap(anthropic_client, session), messages, "still there?")
    assert "hunter2" not in sent(api)


def test_a_redaction_of_an_sdk_block_or_of_a_dict_in_place_is_what_is_sent(
    tmp_path, api, anthropic_client
):
    session = engine().open_session("sdk", state_dir=tmp_path)
    client = wrap(anthropic_client, session)
    messages: list = []
    converse(client, messages, "hello", "and then?")
    blocks = messages[1]["content"]  # the SDK's TextBlock objects, as the host keeps them
    blocks[0] = blocks[0].model_copy(update={"text": "[reply redacted]"})
    messages[0]["content"] = "[question redacted]"  # a plain dict, changed in place
    converse(client, messages, "go on")
    assert "[reply redacted]" in sent(api) and "answer 1" not in sent(api)
    assert "[question redacted]" in sent(api) and "hello" not in sent(api)
    session.close()


def test_another_conversation_of_the_same_shape_is_refused(tmp_path, api, anthropic_client):
    session = engine().open_session("o", state_dir=tmp_path)
    client = wrap(anthropic_client, session)
    converse(client, [], "mine")
    requests = len(api.requests)
    mine = [e.content for e in session.history]
    other = [
        {"role": "user", "content": "theirs"},
        {"role": "assistant", "content": "their answer"},
        {"role": "user", "content": "next"},
    ]
    with pytest.raises(ConversationMismatch, match="another conversation"):
        client.messages.create(model="m", max_tokens=50, messages=other)
    assert isinstance(ConversationMismatch("x"), ValueError)
    assert [e.content for e in session.history] == mine and len(api.requests) == requests


@pytest.mark.parametrize("fix", ["drop", "edit"])
def test_a_host_that_fixes_a_message_that_drew_a_400_carries_on_after_a_restart(
    tmp_path, api, anthropic_client, fix
):
    session = engine().open_session("b", state_dir=tmp_path)
    client = wrap(anthropic_client, session)
    messages: list = []
    converse(client, messages, "hello")
    messages.append({"role": "user", "content": [{"type": "text", "text": ""}]})
    with pytest.raises(stenograph_bad_request()):
        client.messages.create(model="m", max_tokens=50, messages=messages)
    if fix == "drop":
        messages.pop()
        assert session.sync(messages).removed == 1  # what wrap() does with the shorter list
        assert len(session.history) == 2
    else:
        messages[-1] = {"role": "user", "content": "a fixed message"}
        assert session.sync(messages).edited == (session.history[2],)
        messages.pop()
    session.close()
    session = engine().open_session("b", state_dir=tmp_path)  # a restart
    client = wrap(anthropic_client, session)
    converse(client, messages, "after the fix")
    assert '"text": ""' not in sent(api) and "after the fix" in sent(api)
    assert [e.role for e in session.history] == ["user", "assistant", "user", "assistant"]


def stenograph_bad_request():
    import anthropic

    return anthropic.BadRequestError


def test_truncate_is_persisted_and_names_are_reusable(tmp_path):
    session = engine().open_session("t", state_dir=tmp_path)
    first = session.append({"role": "user", "content": "one", "uuid": "a"})
    session.post_sampling({"content": [{"type": "text", "text": "two"}], "uuid": "b"})
    session.append({"role": "user", "content": "three", "uuid": "c"})
    with pytest.raises(KeyError):
        session.truncate(after="nope")
    assert session.truncate(after=first.uuid) == 2
    assert session.previous_response is None
    session.append({"role": "user", "content": "three again", "uuid": "c"})
    session.close()
    again = engine().open_session("t", state_dir=tmp_path)
    assert [(e.uuid, e.content) for e in again.history] == [("a", "one"), ("c", "three again")]
    assert again.pre_call(model="m")["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "three again"}],
        }
    ]
    assert again.truncate(after=None) == 2 and len(again.history) == 0


def test_sync_appends_adopts_and_rewinds(tmp_path):
    session = engine().open_session("s", state_dir=None)
    host = [{"role": "user", "content": "q1"}]
    assert [e.content for e in session.sync(host).appended] == ["q1"]
    session.post_sampling({"content": [{"type": "text", "text": "a1"}]})
    host.append({"role": "assistant", "content": [{"type": "text", "text": "a1"}]})
    assert session.sync(host) == Synced()
    host[1] = {"role": "assistant", "content": [{"type": "text", "text": "a1, edited"}]}
    host.append({"role": "user", "content": "q2"})
    synced = session.sync(host)
    assert [e.index for e in synced.edited] == [1] and len(synced.appended) == 1
    assert session.pre_call(model="m")["messages"][1]["content"][0]["text"] == "a1, edited"
    assert session.sync(host[:1]).removed == 2 and len(session.history) == 1
