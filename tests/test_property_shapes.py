"""Random message shapes through append, post_sampling, sync and wrap(): each is accepted
whole or refused with the documented error, and every request the session hands out
satisfies the outgoing-request guard (a request the guard refuses raises RequestError in
a strict preset; it is never handed out or sent)."""

from __future__ import annotations

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stenograph
from stenograph.integrations.anthropic import wrap
from stenograph.testing import Reply

REFUSED = (stenograph.EntryError, stenograph.ConversationMismatch)
IDS = ["toolu_1", "toolu_2", "toolu_3"]
PROPERTY = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

texts = st.one_of(
    st.text(max_size=12), st.sampled_from(["", " ", "\n", "caf\udce9", "ok", "x" * 50])
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
bad_values = st.sampled_from([b"bytes", {1, 2}, float("nan"), object()])
blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(
        lambda i, v: {"type": "tool_use", "id": i, "name": "Read", "input": {"v": v}},
        st.sampled_from(IDS),
        json_values,
    ),
    st.builds(
        lambda i, t, e: {"type": "tool_result", "tool_use_id": i, "content": t, "is_error": e},
        st.sampled_from(IDS),
        texts,
        st.booleans(),
    ),
    st.builds(lambda v: {"type": "text", "text": "x", "extra": v}, bad_values),
    st.sampled_from([{"text": "no type"}, "a string block", 5]),
)
contents = st.one_of(texts, st.lists(blocks, max_size=3), st.sampled_from([None, 5, {"a": 1}]))
messages = st.builds(
    lambda role, content, extra: {"role": role, "content": content, **extra},
    st.sampled_from(["user", "user", "assistant", "system"]),
    contents,
    st.fixed_dictionaries(
        {},
        optional={
            "timestamp": st.sampled_from([1.7e9, "2026-01-01T00:00:00Z", 1e20, "garbage"]),
            "uuid": st.sampled_from(["u1", "u2", "u3"]),
        },
    ),
)


def strict_engine(tmp_path) -> stenograph.Engine:
    path = tmp_path / "strict.toml"
    path.write_text('extends = "default"\nstrict = true\n')
    return stenograph.Engine.from_preset(
        path, overrides={"forked-extraction": {"backend": "offline"}}
    )


def snapshot(session: stenograph.Session) -> list[tuple[str, str, object]]:
    return [(e.uuid, e.role, e.content) for e in session.history]


def checked_request(session: stenograph.Session) -> None:
    """pre_call hands out only requests the guard accepts; else it raises RequestError
    with the guard's problems (the incremental check may list them in another order)."""
    try:
        request = session.pre_call(model="m")
    except stenograph.RequestError as exc:
        assert exc.problems
        assert set(stenograph.check_request(session.history.messages())) == set(exc.problems)
        return
    assert stenograph.check_request(request["messages"]) == []


host_edits = st.one_of(
    st.tuples(st.just("append"), messages),
    st.tuples(st.just("edit"), st.integers(0, 20), contents),
    st.tuples(st.just("drop"), st.integers(0, 3)),
    st.tuples(st.just("other"), st.lists(messages, min_size=2, max_size=3)),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), messages),
        st.tuples(st.just("post_sampling"), messages),
        st.tuples(st.just("sync"), host_edits),
    ),
    min_size=1,
    max_size=8,
)


def host_list(session: stenograph.Session, edit: tuple) -> list:
    given = [{"role": e.role, "content": e.content} for e in session.history]
    kind = edit[0]
    if kind == "append":
        given.append(edit[1])
    elif kind == "edit" and given:
        given[edit[1] % len(given)] = {**given[edit[1] % len(given)], "content": edit[2]}
    elif kind == "drop":
        del given[len(given) - min(edit[1], len(given)) :]
    elif kind == "other":
        given = edit[1]
    return given


@PROPERTY
@given(ops=operations, on_disk=st.booleans())
def test_random_shapes_are_taken_whole_or_refused(tmp_path_factory, ops, on_disk):
    state_dir = tmp_path_factory.mktemp("p") if on_disk else None
    session = strict_engine(tmp_path_factory.mktemp("e")).open_session("p", state_dir=state_dir)
    for kind, arg in ops:
        before = snapshot(session)
        given = host_list(session, arg) if kind == "sync" else None
        try:
            if kind == "append":
                session.append(arg)
            elif kind == "post_sampling":
                session.post_sampling(arg)
            else:
                session.sync(given)
        except REFUSED:
            assert snapshot(session) == before
        except TypeError as exc:  # post_sampling of a non-dict content shape
            assert kind == "post_sampling" and "post_sampling expects" in str(exc)
            assert snapshot(session) == before
        else:
            after = snapshot(session)
            if kind == "sync":
                assert [(r, c) for _, r, c in after] == [
                    (m["role"], "" if m.get("content") is None else m["content"]) for m in given
                ]
            else:
                assert after[:-1] == before and len(after) == len(before) + 1
        checked_request(session)
    if on_disk:
        kept = snapshot(session)
        session.close()
        again = strict_engine(tmp_path_factory.mktemp("e")).open_session("p", state_dir=state_dir)
        assert snapshot(again) == kept


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(edits=st.lists(host_edits, min_size=1, max_size=6))
def test_wrap_never_sends_what_the_guard_refuses(
    tmp_path_factory, messages_server, anthropic_client, edits
):
    messages_server.responder = lambda request: Reply.text("ok")
    session = strict_engine(tmp_path_factory.mktemp("e")).open_session("w", state_dir=None)
    client = wrap(anthropic_client, session)
    host: list = []
    for edit in edits:
        candidate = host_list(session, edit) if session.history else host_list_of(host, edit)
        before = snapshot(session)
        try:
            response = client.messages.create(model="m", max_tokens=20, messages=candidate)
        except REFUSED:
            assert snapshot(session) == before
            continue
        except stenograph.RequestError:
            continue  # refused before sending; the history holds the host's list
        except anthropic.BadRequestError as exc:  # the server refuses what the API refuses
            pytest.fail(f"sent a request the API refuses: {exc}")
        host = [*candidate, {"role": "assistant", "content": response.content}]
        assert len(session.history) == len(host)


def host_list_of(host: list, edit: tuple) -> list:
    return [edit[1]] if edit[0] == "append" else list(edit[1]) if edit[0] == "other" else host


def test_a_refused_request_stays_refused_until_the_host_fixes_it(tmp_path):
    session = strict_engine(tmp_path).open_session("r", state_dir=None)
    session.append({"role": "user", "content": " "})
    for _ in range(2):  # asking again does not hand out the refused request
        with pytest.raises(stenograph.RequestError, match="whitespace"):
            session.pre_call(model="m")
    session.sync([{"role": "user", "content": "fixed"}])
    assert session.pre_call(model="m")["messages"] == [{"role": "user", "content": "fixed"}]
