"""The engine: dispatch order, plugin rules, failure isolation, pairing guard, persistence."""

from __future__ import annotations

import asyncio
import json

import anthropic.types
import pytest
from helpers import open_session, run_tool_calls, text_reply, tool_result, tool_turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stenograph
from stenograph.engine.guard import message_ids
from stenograph.engine.rendering import merge_run

CALLS: list[str] = []


def recorder(handler_name: str) -> type[stenograph.Handler]:
    """A handler class that records the order of its phase calls."""

    class Recorder(stenograph.Handler):
        name = handler_name

        @stenograph.hookimpl
        def pre_call(self, call, state):
            CALLS.append(f"pre:{self.name}")
            state["calls"] = state.get("calls", 0) + 1

        @stenograph.hookimpl
        def post_sampling(self):
            CALLS.append(f"post:{self.name}")

    return Recorder


A, B, C = recorder("a"), recorder("b"), recorder("c")


def preset(tmp_path, *names: str, extra: str = "") -> str:
    path = tmp_path / "p.toml"
    slots = "".join(f'[[handlers]]\nuse = "{n}"\n' for n in names)
    path.write_text(extra + slots)
    return str(path)


def test_handlers_run_in_preset_order(tmp_path):
    CALLS.clear()
    engine = stenograph.Engine.from_preset(preset(tmp_path, "c", "a", "b"), handlers=[A, B, C])
    session = engine.open_session("s", state_dir=None)
    session.append({"role": "user", "content": "hi"})
    session.pre_call(model="m")
    session.post_sampling(text_reply())
    assert CALLS == ["pre:c", "pre:a", "pre:b", "post:c", "post:a", "post:b"]
    assert [s.name for s in engine.slots] == ["c", "a", "b"]


def test_same_handler_twice_gets_two_slots_with_own_state(tmp_path):
    engine = stenograph.Engine.from_preset(preset(tmp_path, "a", "a"), handlers=[A])
    session = engine.open_session("s", state_dir=None)
    session.pre_call(model="m")
    assert [s.state_key for s in engine.slots] == ["a", "a#2"]
    assert session.handler_state("a") == {"calls": 1} == session.handler_state("a#2")


@pytest.mark.parametrize("marker", ["tryfirst", "trylast", "hookwrapper", "wrapper"])
def test_ordering_markers_are_refused(tmp_path, marker):
    class Pushy(stenograph.Handler):
        name = "pushy"

        @stenograph.hookimpl(**{marker: True})
        def pre_call(self, call):
            yield

    with pytest.raises(stenograph.PluginError, match=f"marks pre_call with {marker}"):
        stenograph.Engine.from_preset(preset(tmp_path, "pushy"), handlers=[Pushy])


def test_misnamed_hook_and_unknown_argument_are_refused(tmp_path):
    class Typo(stenograph.Handler):
        name = "typo"

        @stenograph.hookimpl
        def pre_cal(self, call):
            pass

    class BadArg(stenograph.Handler):
        name = "badarg"

        @stenograph.hookimpl
        def pre_call(self, request):
            pass

    for handler in (Typo, BadArg):
        with pytest.raises(stenograph.PluginError, match=f"handler '{handler.name}'"):
            stenograph.Engine.from_preset(preset(tmp_path, handler.name), handlers=[handler])


def test_handler_class_must_subclass_handler_and_names_are_unique(tmp_path):
    class NotAHandler:
        name = "x"

    with pytest.raises(stenograph.PluginError, match="not a subclass of stenograph.Handler"):
        stenograph.Engine.from_preset("default", handlers=[NotAHandler])

    class Clash(stenograph.Handler):
        name = "inactivity-memorize"

    with pytest.raises(stenograph.PluginError, match="claimed twice: by built-in"):
        stenograph.Engine.from_preset("default", handlers=[Clash])


class Boom(stenograph.Handler):
    name = "boom"

    @stenograph.hookimpl
    def pre_call(self, call):
        raise RuntimeError("kaput")


def test_a_failing_handler_never_breaks_the_call(tmp_path, caplog):
    CALLS.clear()
    engine = stenograph.Engine.from_preset(preset(tmp_path, "boom", "a"), handlers=[Boom, A])
    session = engine.open_session("s", state_dir=None)
    session.append({"role": "user", "content": "hi"})
    request = session.pre_call(model="m")
    assert request["messages"] == [{"role": "user", "content": "hi"}]
    assert CALLS == ["pre:a"]
    failure = session.events[0]
    assert isinstance(failure, stenograph.HandlerFailed)
    assert (failure.handler, failure.slot, failure.phase) == ("boom", 0, "pre_call")
    assert "RuntimeError: kaput" in failure.error
    assert "handler 'boom' (slot 0) failed in pre_call" in caplog.text


def test_strict_preset_raises_handler_errors(tmp_path):
    path = preset(tmp_path, "boom", extra="strict = true\n")
    session = stenograph.Engine.from_preset(path, handlers=[Boom]).open_session("s", None)
    with pytest.raises(stenograph.HandlerError, match="handler 'boom' .* failed in pre_call"):
        session.pre_call(model="m")


def test_pairing_guard_flags_an_unanswered_tool_call(tmp_path):
    strict = preset(tmp_path, "inactivity-memorize", extra="strict = true\n")
    for path, raises in (("default", False), (strict, True)):
        session = stenograph.Engine.from_preset(path).open_session("s", None)
        session.append({"role": "user", "content": "hi"})
        message, _ = tool_turn()
        session.append(message)
        session.append({"role": "user", "content": "never mind"})
        if raises:
            with pytest.raises(stenograph.RequestError, match="has no tool_result"):
                session.pre_call(model="m")
        else:
            session.pre_call(model="m")
            assert isinstance(session.events[-1], stenograph.RequestViolation)


def test_check_pairing_on_hand_built_requests():
    use = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "R", "input": {}}],
    }
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}
    stray = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz"}]}
    assert stenograph.check_pairing([{"role": "user", "content": "q"}, use, answer]) == []
    assert stenograph.check_pairing([stray])
    assert stenograph.check_pairing([{"role": "user", "content": "q"}, use])
    twice = {"role": "user", "content": answer["content"] * 2}
    assert "answered twice" in stenograph.check_pairing([use, twice])[0]


def test_request_shape_and_merged_user_entries():
    session, clock = open_session()
    session.pre_call(model="m")
    message, tool_id = tool_turn()
    session.post_sampling(message)
    session.append({"role": "user", "content": "(also: use pytest)"})
    session.append(tool_result(tool_id, "data"))
    request = session.pre_call(model="m", system="sys", tools=[{"name": "Read"}], temperature=0)
    assert list(request) == ["model", "system", "tools", "messages", "temperature"]
    last = request["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text"]
    assert "system" not in session.pre_call(model="m")


def test_bad_messages_are_refused_and_nothing_is_appended():
    session, _ = open_session()
    for bad in (
        "text",
        {"role": "system", "content": "x"},
        {"role": "user", "content": 5},
        {"role": "user", "content": [{"text": "no type"}]},
    ):
        with pytest.raises(stenograph.EntryError):
            session.append(bad)
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(stenograph.EntryError, match="nested too deeply"):
        session.append({"role": "user", "content": [{"type": "text", "text": "x", "x": deep}]})
    assert len(session.history) == 1
    odd = session.append({"role": "user", "content": "hi", "meta": ["not", "a", "dict"]})
    assert odd.meta == {}
    with pytest.raises(ValueError, match="already in the history"):
        session.append({"role": "user", "content": "again", "uuid": session.history[0].uuid})
    assert len(session.history) == 2


@pytest.mark.parametrize("bad_id", ["", "../x", "a/b", "..", ".hidden", "x" * 201])
def test_session_ids_must_be_safe_folder_names(bad_id):
    with pytest.raises(ValueError, match="invalid session id"):
        stenograph.Engine.from_preset("default").open_session(bad_id, state_dir=None)


def test_post_sampling_takes_an_anthropic_message():
    session, _ = open_session()
    session.pre_call(model="m")
    message = anthropic.types.Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-sonnet-4-5",
        content=[anthropic.types.TextBlock(type="text", text="Hello")],
        stop_reason="end_turn",
        stop_sequence=None,
        usage=anthropic.types.Usage(input_tokens=10, output_tokens=3, cache_read_input_tokens=7),
    )
    entry = session.post_sampling(message)
    assert entry.content == [{"type": "text", "text": "Hello"}]
    assert entry.usage == {"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": 7}
    assert entry.meta["id"] == "msg_1"


def test_append_takes_the_sdks_content_blocks_as_they_are():
    session, _ = open_session()
    blocks = [
        anthropic.types.TextBlock(type="text", text="Reading."),
        anthropic.types.ToolUseBlock(type="tool_use", id="toolu_1", name="Read", input={"p": 1}),
    ]
    entry = session.append({"role": "assistant", "content": blocks})
    assert entry.content == [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"p": 1}},
    ]
    assert entry.tool_use_ids == ("toolu_1",)
    blocks[1].input["p"] = 2  # the host's objects are not shared
    assert entry.content[1]["input"] == {"p": 1}


def test_async_phases():
    session, _ = open_session()

    async def turn():
        request = await session.apre_call(model="m")
        await session.apost_sampling(text_reply())
        return request

    assert asyncio.run(turn())["messages"][0]["content"] == "Fix the failing test."
    assert session.history[-1].role == "assistant"


def test_state_survives_close_and_reopen(tmp_path):
    session, clock = open_session(state_dir=tmp_path)
    run_tool_calls(session, clock, 3)
    session.pre_call(model="m")
    session.post_sampling(text_reply())
    clock.advance(600)
    session.append({"role": "user", "content": "back"})
    before = session.pre_call(model="m")
    session.handler_state("inactivity-memorize")["note"] = "kept"
    session.close()
    again = session.engine.open_session("test", state_dir=tmp_path, clock=clock)
    assert [e.uuid for e in again.history] == [e.uuid for e in session.history]
    assert [e.memorized for e in again.history] == [e.memorized for e in session.history]
    assert json.dumps(again.pre_call(model="m")) == json.dumps(before)
    assert again.handler_state("inactivity-memorize") == {"note": "kept"}
    assert (tmp_path / "test").stat().st_mode & 0o777 == 0o700


def test_a_torn_journal_line_is_skipped(tmp_path, caplog):
    session, clock = open_session(state_dir=tmp_path)
    run_tool_calls(session, clock, 1)
    session.close()
    with (tmp_path / "test" / "journal.jsonl").open("a") as journal:
        journal.write('{"op": "append", "entry": {"role": "us')
    again = session.engine.open_session("test", state_dir=tmp_path)
    assert len(again.history) == len(session.history)
    assert "corrupt journal line" in caplog.text
    again.append({"role": "user", "content": "still works"})
    again.close()
    third = session.engine.open_session("test", state_dir=tmp_path)
    assert third.history[-1].content == "still works"


def test_context_size_is_anchored_on_the_newest_usage():
    session, _ = open_session()
    history = session.history
    assert history.context_size() == history.full_tokens(history[0])
    session.pre_call(model="m")
    usage = {
        "input_tokens": 5000,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 2000,
        "output_tokens": 50,
    }
    session.post_sampling({**text_reply(), "usage": usage})
    assert history.context_size() == 7150
    session.append({"role": "user", "content": "word " * 400})
    assert history.context_size() == 7150 + history.full_tokens(history[-1])
    assert history.context_size("chars4") == 7150 + 500


def test_images_count_flat():
    session, _ = open_session()
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "A" * 100_000},
    }
    entry = session.append({"role": "user", "content": [image]})
    assert session.history.full_tokens(entry) == 2000
    assert session.history.full_tokens(entry, "chars4") == 2000


def test_special_token_text_is_counted_as_text():
    session, _ = open_session()
    entry = session.append({"role": "user", "content": "<|endoftext|> and <|fim_prefix|>"})
    assert session.history.full_tokens(entry) > 5


def test_background_work_is_awaited():
    session, _ = open_session()
    done = []
    session.run_in_background("job", lambda: done.append(1))
    assert session.wait_for_background(5) and done == [1]


class Seer(stenograph.Handler):
    name = "seer"
    seen: list[list[str]] = []

    @stenograph.hookimpl
    def pre_call(self, call):
        Seer.seen.append([e.role for e in call.unseen_entries])


def test_unseen_entries_cover_responses_and_bulk_appends_across_reopen(tmp_path):
    path = tmp_path / "seer.toml"
    path.write_text('[[handlers]]\nuse = "seer"\n')
    engine = stenograph.Engine.from_preset(path, handlers=[Seer])
    Seer.seen = []
    session = engine.open_session("s", state_dir=tmp_path)
    session.append({"role": "user", "content": "a"})
    session.append({"role": "assistant", "content": "b"})
    session.append({"role": "user", "content": "c"})
    session.pre_call(model="m")
    session.post_sampling(text_reply())
    session.close()
    again = engine.open_session("s", state_dir=tmp_path)
    again.append({"role": "user", "content": "d"})
    again.pre_call(model="m")
    assert Seer.seen == [["user", "assistant", "user"], ["assistant", "user"]]


def test_memorize_reduces_the_replaced_content():
    session, clock = open_session()
    session.pre_call(model="m")
    message, tool_id = tool_turn()
    session.post_sampling(message)
    entry = session.append(tool_result(tool_id, "secret " * 100))
    session.replace_sent_content(entry, tool_result(tool_id, "[REDACTED]")["content"])
    session.memorize([entry])
    sent = session.history.rendered(entry)[0]["content"]
    assert sent.startswith("[memorized: Read result left out (10 chars")
    assert entry.content[0]["content"] == "secret " * 100


def test_token_totals_follow_memorize_without_a_recount():
    session, clock = open_session()
    run_tool_calls(session, clock, 3)
    history = session.history
    full, sent = history.token_totals()
    assert full == sent
    session.memorize([e for e in history if e.tool_result_ids])
    full_after, sent_after = history.token_totals()
    expected = sum(history.sent_tokens(e) for e in history)
    assert full_after == full and sent_after == expected < sent
    assert history.request_tokens() == expected


def test_background_workers_run_jobs_in_order_survive_failures_and_share_threads():
    import time

    from stenograph.engine.background import Pool, Worker

    pool = Pool(idle_seconds=0.2)
    first, second = Worker("a", pool), Worker("b", pool)
    done = []

    def boom():
        raise RuntimeError("job failed")

    for job in (lambda: done.append(1), boom, lambda: done.append(2)):
        first.submit(job)
    assert first.wait(5) and done == [1, 2]
    threads = set(pool.threads)
    assert len(threads) == 1
    second.submit(lambda: done.append(3))  # another session's worker: the idle thread
    assert second.wait(5) and done == [1, 2, 3] and pool.threads == threads
    time.sleep(0.6)
    assert not pool.threads and not any(t.is_alive() for t in threads)  # retired when idle
    first.submit(lambda: done.append(4))
    assert first.wait(5) and done == [1, 2, 3, 4]


def test_idle_threads_are_reused_and_retire_only_after_idle_seconds():
    import threading

    from stenograph.engine.background import Pool, Worker

    pool = Pool(idle_seconds=5)
    counts, notes = Worker("counts", pool), Worker("notes", pool)
    ran_on = set()
    for _ in range(50):  # each call wakes two workers, then the host waits for both
        for worker in (counts, notes):
            worker.submit(lambda: ran_on.add(threading.current_thread()))
        assert counts.wait(5) and notes.wait(5)
    assert len(ran_on) <= 2 and len(pool.threads) <= 2  # no thread retired and restarted


def test_work_handed_over_wakes_no_thread_the_idle_one_polls_and_a_host_waiting_wakes_it():
    import threading

    from stenograph.engine.background import Pool, Worker

    def idle_pool(poll_seconds: float) -> tuple[Pool, Worker, list[int]]:
        pool = Pool(idle_seconds=120, poll_seconds=poll_seconds)
        worker = Worker("w", pool)
        worker.submit(lambda: None)
        assert worker.wait(5) and len(pool.threads) == 1  # a thread now idles
        wakes: list[int] = []
        notify = pool._cond.notify
        pool._cond.notify = lambda n=1: (wakes.append(n), notify(n))  # type: ignore[method-assign]
        return pool, worker, wakes

    _, worker, wakes = idle_pool(0.05)
    ran = threading.Event()
    worker.submit(ran.set)
    assert ran.wait(5) and wakes == []  # taken at the thread's poll: the call woke nothing
    pool, worker, wakes = idle_pool(60)
    ran.clear()
    worker.submit(ran.set)
    assert not ran.wait(0.3)  # the thread polls a minute later...
    assert worker.wait(5) and ran.is_set() and wakes == [1]  # ...unless a host waits
    assert len(pool.threads) == 1


def test_a_worker_runs_one_job_at_a_time_while_others_run_in_parallel():
    import threading

    from stenograph.engine.background import Pool, Worker

    pool = Pool(idle_seconds=0.2)
    release = threading.Event()
    order = []
    slow, other = Worker("slow", pool), Worker("other", pool)
    slow.submit(lambda: (release.wait(5), order.append("slow 1")))
    slow.submit(lambda: order.append("slow 2"))
    other.submit(lambda: order.append("other"))
    assert other.wait(5) and order == ["other"]  # not held up by the slow worker
    assert not slow.wait(0.1)
    release.set()
    assert slow.wait(5) and order == ["other", "slow 1", "slow 2"]


_BLOCK_KINDS = st.sampled_from(["text", "tool_result", "tool_result", "image", "tool_use"])


@st.composite
def _runs_of_entries(draw):
    """Messages in runs of one role (up to 6 entries), string or block content."""
    messages = []
    for r in range(draw(st.integers(1, 5))):
        role = "user" if r % 2 == 0 else "assistant"
        for e in range(draw(st.integers(1, 6))):
            if draw(st.booleans()):
                messages.append({"role": role, "content": f"{role} {r}.{e}"})
                continue
            kinds = draw(st.lists(_BLOCK_KINDS, min_size=1, max_size=3))
            blocks = [
                {"type": "tool_result", "tool_use_id": f"t{r}.{e}.{i}", "content": "x"}
                if kind == "tool_result"
                else {"type": "tool_use", "id": f"u{r}.{e}.{i}", "name": "R", "input": {}}
                if kind == "tool_use"
                else {"type": kind, "text": f"{r}.{e}.{i}"}
                for i, kind in enumerate(kinds)
            ]
            messages.append({"role": role, "content": blocks})
    return messages


def _result(tool_id):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "x"}


def _text(text):
    return {"type": "text", "text": text}


def test_incremental_rendering_on_long_runs_that_move_tool_results():
    """Runs long enough to be extended in place, where a later entry's tool_result must move
    in front of earlier text (or of its own text)."""
    use = {"type": "tool_use", "id": "a", "name": "R", "input": {}}
    cases = [
        [[_result("a")], [_result("b")], [_text("t"), _result("c")]],
        [[_result("a")], [_result("b")], [_result("c")], "later text", [_result("d")]],
        ["q", [_result("a")], [_text("t"), _result("b")], [_result("c")]],
    ]
    for contents in cases:
        messages = [{"role": "assistant", "content": [use]}]
        messages += [{"role": "user", "content": c} for c in contents]
        _assert_incremental_equals_scratch(messages, memorize_every=99)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=_runs_of_entries(), memorize_every=st.integers(2, 5))
def test_incremental_rendering_equals_merging_from_scratch(messages, memorize_every):
    """Messages built entry by entry (and re-rendered after memorize) are exactly what
    merging each run from scratch gives, so requests never depend on how they were built."""
    _assert_incremental_equals_scratch(messages, memorize_every)


def _assert_incremental_equals_scratch(messages, memorize_every):
    session = stenograph.Engine.from_preset("inactivity-only").open_session("p", state_dir=None)
    for message in messages:
        session.append(message)
    session.memorize([e for e in session.history if e.has_tools and e.index % memorize_every == 0])
    runs: list[list[stenograph.Entry]] = []
    for entry in session.history:
        if runs and runs[-1][0].role == entry.role:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    history = session.history
    expected = [merge_run(run[0].role, [history.rendered(e) for e in run]) for run in runs]
    assert history.messages() == expected
    views = [(v.role, v.tool_use_ids, v.tool_result_ids, v.content_problems) for v in history._ids]
    assert views == [tuple(message_ids(m)) for m in expected]  # a MessageIds or the entry


def test_an_appended_message_is_copied_but_its_strings_are_shared():
    """The host may change its message afterwards: every dict and list is the session's own;
    strings and numbers, which nothing can change, are kept once (the host's)."""
    from anthropic.types import TextBlock

    session, _ = open_session()
    text = "a long tool result " * 100
    message = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": [{"type": "text", "text": text}],
            },
            TextBlock(type="text", text="from the SDK"),
        ],
    }
    entry = session.append(message)
    message["content"][0]["content"][0]["text"] = "changed"
    message["content"][0]["content"].append({"type": "text", "text": "more"})
    message["content"].append({"type": "text", "text": "and more"})
    assert entry.content == [
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": text}]},
        {"type": "text", "text": "from the SDK"},
    ]
    assert entry.content[0]["content"][0]["text"] is text
