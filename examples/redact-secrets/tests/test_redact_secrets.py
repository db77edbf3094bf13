"""redact-secrets, tested the way a plugin author would, with ``stenograph.testing``."""

from __future__ import annotations

import json

import pytest
from stenograph_redact import RedactSecrets, SecretsRedacted

import stenograph
from stenograph.testing import Conversation, Reply, single_handler_session

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def test_tool_results_are_redacted_and_the_history_kept():
    session = single_handler_session(RedactSecrets)
    talk = Conversation(session).user("Show the config.")
    talk.tool("Bash", {"command": "cat .env"}, f"AWS_ACCESS_KEY_ID={AWS_KEY}")
    request = talk.request()
    assert AWS_KEY not in json.dumps(request)
    assert "[REDACTED:aws-access-key-id]" in json.dumps(request)
    assert AWS_KEY in json.dumps(session.history[-1].content)
    assert [e.kind for e in session.events] == ["SecretsRedacted"]
    assert json.dumps(talk.request()) == json.dumps(request)


def test_tool_inputs_only_when_asked():
    for redact_inputs, expected in ((True, False), (False, True)):
        session = single_handler_session(RedactSecrets, {"redactToolInputs": redact_inputs})
        talk = Conversation(session).user("Deploy.")
        talk.tool("Bash", {"command": f"export AWS_ACCESS_KEY_ID={AWS_KEY}"}, "ok")
        assert (AWS_KEY in json.dumps(talk.request())) is expected


def test_custom_patterns_and_their_validation():
    session = single_handler_session(RedactSecrets, {"patterns": [r"hunter\d"]})
    talk = Conversation(session).user("Log in.")
    talk.tool("Bash", {"command": "login"}, "password is hunter2")
    assert "hunter2" not in json.dumps(talk.request())
    assert any(isinstance(e, SecretsRedacted) for e in session.events)
    with pytest.raises(stenograph.PresetError, match="not a valid regex"):
        single_handler_session(RedactSecrets, {"patterns": ["("]})


def test_memorized_results_stay_redacted_after_a_pause():
    session = single_handler_session(RedactSecrets)
    talk = Conversation(session).user("Go.")
    talk.tool("Bash", {"command": "env"}, f"KEY={AWS_KEY}").reply("Done.").pause(600)
    talk.user("Again?")
    assert AWS_KEY not in json.dumps(talk.request())


def test_with_the_real_sdk(messages_server, anthropic_client):
    session = single_handler_session(RedactSecrets)
    talk = Conversation(session).user("Check the key.")
    talk.tool("Bash", {"command": "cat key"}, f"{AWS_KEY}")
    messages_server.script(Reply.text("It is redacted."))
    anthropic_client.messages.create(**talk.request(), max_tokens=50)
    sent = messages_server.requests[0].body
    assert AWS_KEY not in json.dumps(sent) and "[REDACTED" in json.dumps(sent)
