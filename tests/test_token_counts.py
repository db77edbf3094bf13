"""Token counts off the call path: entries are counted by the session's background worker
as they arrive, a giant entry is tokenized only up to a cap, and the first call after a
pause tokenizes nothing on the host's thread while its event still carries the exact
``tokens_saved`` once the counts are in."""

from __future__ import annotations

import json
import threading

import pytest
from helpers import open_session, run_tool_calls, text_reply, tool_result, tool_turn

import stenograph
from stenograph.engine import rendering, tokens
from stenograph.engine.tokens import COUNT_CAP_CHARS, content_tokens


class Spy:
    """Wraps the encoding: records (thread, text length) of every tokenizer call."""

    def __init__(self, encoding) -> None:
        self.encoding = encoding
        self.calls: list[tuple[str, int]] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.calls.append((threading.current_thread().name, len(text)))
        return self.encoding.encode_ordinary(text)

    def on_host(self) -> list[int]:
        host = threading.main_thread().name
        return [n for name, n in self.calls if name == host]


@pytest.fixture
def spy(monkeypatch):
    found = Spy(tokens.encoding())
    monkeypatch.setattr(tokens, "encoding", lambda: found)
    return found


def exact_saving(session: stenograph.Session, uuids) -> int:
    """Full content against what is sent now, counted from scratch."""
    history = session.history
    return sum(
        max(0, content_tokens(e.content) - content_tokens(history.rendered(e)))
        for e in (history.by_uuid[u] for u in uuids)
    )


def memorized_event(session: stenograph.Session) -> stenograph.EntriesMemorized:
    return next(e for e in session.events if isinstance(e, stenograph.EntriesMemorized))


def pause(session: stenograph.Session, clock: stenograph.ManualClock) -> dict:
    session.pre_call(model="m")
    session.post_sampling(text_reply())
    clock.advance(600)
    session.append({"role": "user", "content": "And now?"})
    return session.pre_call(model="m")


def test_a_giant_entry_is_tokenized_only_up_to_the_cap(spy):
    session, clock = open_session()
    text = "word " * 2_000_000  # 10 MB of text
    session.append({"role": "user", "content": [{"type": "text", "text": text}]})
    session.post_sampling(text_reply())  # no usage: update-threshold counts the new entries
    session.wait_for_background()
    assert spy.calls and max(n for _, n in spy.calls) <= COUNT_CAP_CHARS
    head = len(tokens.encoding().encode_ordinary(text[:COUNT_CAP_CHARS]))
    expected = head + (len(text) - COUNT_CAP_CHARS + 3) // 4
    assert session.history.full_tokens(session.history[-2]) == expected


def test_text_under_the_cap_is_counted_whole():
    text = "def f(x):\n    return x + 1\n" * 100
    assert tokens.count_tiktoken(text) == len(tokens.encoding().encode_ordinary(text))
    blocks = [{"type": "text", "text": text}, {"type": "text", "text": "more"}]
    joined = text + "\n" + "more"
    assert content_tokens(blocks) == len(tokens.encoding().encode_ordinary(joined))
    assert content_tokens(blocks, "chars4") == (len(joined) + 3) // 4


def test_entries_are_counted_in_the_background_as_they_arrive(spy):
    session, clock = open_session()
    run_tool_calls(session, clock, 3)
    session.wait_for_background()
    assert spy.calls and not spy.on_host()
    assert all(e.tokens >= 0 for e in session.history)
    assert all(e.reduced >= 0 for e in session.history if e.tool_result_ids)


def test_the_call_after_a_pause_tokenizes_nothing_on_the_host_and_is_exact(spy):
    session, clock = open_session()
    run_tool_calls(session, clock, 4)
    session.pre_call(model="m")
    session.post_sampling(text_reply())
    session.wait_for_background()  # the model's latency: the counts are in
    spy.calls.clear()
    clock.advance(600)
    session.append({"role": "user", "content": "And now?"})
    session.pre_call(model="m")
    assert not spy.on_host()
    event = memorized_event(session)
    assert not event.estimated and len(event.uuids) == 8
    assert event.tokens_saved == exact_saving(session, event.uuids) > 1_000


def test_the_call_after_a_pause_sends_the_forms_the_counts_prepared(monkeypatch):
    session, clock = open_session("inactivity-only")
    run_tool_calls(session, clock, 4)
    session.wait_for_background()  # counted, and the memorized forms prepared
    prepared = [e.prepared for e in session.history if e.tool_result_ids]

    def refused(*_: object) -> None:
        raise AssertionError("a placeholder was made on the call after the pause")

    monkeypatch.setattr(rendering, "_placeholder", refused)
    request = pause(session, clock)
    sent = [m["content"] for m in request["messages"] if m["role"] == "user"]
    assert all(form in sent for form in prepared) and len(prepared) == 4
    assert all("memorized" in json.dumps(form) for form in prepared)


def test_missing_counts_are_estimated_then_corrected_in_the_event(spy, tmp_path):
    session, clock = open_session("inactivity-only", state_dir=tmp_path)
    run_tool_calls(session, clock, 4, size=6_000)
    session.close()
    engine = stenograph.Engine.from_preset("inactivity-only")
    reopened = engine.open_session("test", state_dir=tmp_path, clock=clock)  # nothing counted
    spy.calls.clear()
    pause(reopened, clock)
    assert not spy.on_host()
    estimate = memorized_event(reopened)
    assert estimate.estimated and estimate.tokens_saved > 0
    assert reopened.wait_for_background()
    counted = memorized_event(reopened)
    assert counted is not estimate and not counted.estimated
    assert counted.tokens_saved == exact_saving(reopened, counted.uuids)
    assert counted.uuids == estimate.uuids


def test_min_tokens_saved_counts_what_is_missing_before_deciding(tmp_path):
    overrides = {"inactivity-memorize": {"min_tokens_saved": 1}}
    session, clock = open_session("inactivity-only", state_dir=tmp_path, overrides=overrides)
    run_tool_calls(session, clock, 3)
    session.close()
    engine = stenograph.Engine.from_preset("inactivity-only", overrides=overrides)
    reopened = engine.open_session("test", state_dir=tmp_path, clock=clock)
    pause(reopened, clock)
    event = memorized_event(reopened)
    assert not event.estimated
    assert event.tokens_saved == exact_saving(reopened, event.uuids)


def test_kept_results_and_shortened_inputs_are_counted_exactly():
    overrides = {"inactivity-memorize": {"keep_recent": 1, "reduce_tool_inputs": True}}
    session, clock = open_session("inactivity-only", overrides=overrides)
    run_tool_calls(session, clock, 3)
    session.wait_for_background()
    pause(session, clock)
    session.wait_for_background()
    event = memorized_event(session)
    assert not event.estimated
    assert event.tokens_saved == exact_saving(session, event.uuids)


def test_a_prepared_placeholder_follows_an_edit_of_its_tool_call():
    session, clock = open_session("inactivity-only")
    run_tool_calls(session, clock, 2, name="Read")
    session.wait_for_background()  # the placeholders are prepared
    host = session.conversation()
    call = next(m for m in host if m["role"] == "assistant")
    for block in call["content"]:
        if block["type"] == "tool_use":
            block["name"] = "Grep"
    session.sync(host)
    session.wait_for_background()
    request = pause(session, clock)
    sent = json.dumps(request["messages"])
    assert "memorized: Grep result" in sent and sent.count("memorized: Read result") == 1


@pytest.fixture
def woken(monkeypatch) -> list[str]:
    """One item per task handed to the background threads (queued for an idle thread's
    poll, or a thread started)."""
    from stenograph.engine import background

    tasks: list[str] = []
    run = background.POOL.run
    monkeypatch.setattr(background.POOL, "run", lambda task: (tasks.append("run"), run(task)))
    return tasks


def idle_session() -> stenograph.Session:
    session, _ = open_session("inactivity-only")
    session.wait_for_background()
    return session


def test_a_call_hands_the_background_its_counts_once_the_request_is_out(woken):
    session = idle_session()
    woken.clear()
    for _ in range(3):
        session.append({"role": "user", "content": "go on " * 50})
        assert not woken  # appending hands nothing over
        session.pre_call(model="m")
        assert len(woken) == 1  # one hand-over, as the request is handed out
        session.post_sampling(text_reply())
        session.wait_for_background()
        woken.clear()
    assert all(e.tokens >= 0 for e in session.history)


def usage_reply(n: int) -> dict:
    """A text reply carrying the usage the API reports."""
    usage = {"input_tokens": 100 + n, "output_tokens": 5}
    return {"role": "assistant", "content": [{"type": "text", "text": f"ok {n}"}], "usage": usage}


def test_counts_are_handed_over_in_batches_when_responses_report_usage(woken):
    from stenograph.engine.session import COUNT_BATCH

    session = idle_session()
    woken.clear()
    calls = 4 * COUNT_BATCH
    for n in range(calls):
        session.append({"role": "user", "content": "go on " * 50})
        session.pre_call(model="m")
        session.wait_for_background(batched=False)  # the model call: what was started runs
        session.post_sampling(usage_reply(n))
    # two entries a call; one hand-over for each batch of COUNT_BATCH entries
    assert len(woken) == 2 * calls // COUNT_BATCH
    uncounted = [e for e in session.history if e.tokens < 0]
    assert 0 < len(uncounted) <= COUNT_BATCH
    assert session.wait_for_background()  # counts what waits for its batch
    assert all(e.tokens >= 0 for e in session.history)


def test_a_batch_left_waiting_at_a_pause_is_estimated_then_corrected(spy):
    from stenograph.engine.session import COUNT_BATCH

    session, clock = open_session("inactivity-only")
    run_tool_calls(session, clock, COUNT_BATCH)
    session.pre_call(model="m")
    session.post_sampling(usage_reply(0))
    session.wait_for_background()
    run_tool_calls(session, clock, 2)  # fewer entries than a batch, each reply with usage
    session.pre_call(model="m")
    session.post_sampling(usage_reply(1))
    session.wait_for_background(batched=False)
    assert any(e.tokens < 0 for e in session.history)
    spy.calls.clear()
    clock.advance(600)
    session.append({"role": "user", "content": "And now?"})
    session.pre_call(model="m")
    assert not spy.on_host()
    assert session.wait_for_background()
    event = memorized_event(session)
    assert not event.estimated
    assert event.tokens_saved == exact_saving(session, event.uuids)


def compact_session(threshold_window: int) -> tuple[stenograph.Session, stenograph.ManualClock]:
    """memory-compact alone (tiktoken estimates), compacting at 80 % of the window."""
    path_settings = {"context_window": threshold_window, "context_fraction": 0.8}
    engine = stenograph.Engine(
        stenograph.engine.presets.Preset(
            name="compact-only",
            description="",
            strict=True,
            slots=(
                stenograph.engine.presets.SlotSpec(
                    "memory-compact", (("test", path_settings),), "handlers[0]"
                ),
            ),
            label="compact-only (test)",
        )
    )
    clock = stenograph.ManualClock(1_000_000.0)
    session = engine.open_session("test", state_dir=None, clock=clock)
    session.append({"role": "user", "content": "Fix the failing test."})
    return session, clock


def test_memory_compact_tokenizes_nothing_on_the_host_while_far_below_its_threshold(spy):
    session, clock = compact_session(200_000)
    run_tool_calls(session, clock, 6, size=6_000)  # each reply reports usage
    session.wait_for_background()
    spy.calls.clear()
    for n in range(4):  # new tool results arrive after the newest usage: not counted yet
        message, tool_id = tool_turn("Read", path=f"/src/more{n}.py")
        session.post_sampling(message)
        session.append(tool_result(tool_id, "line of code\n" * 500))
        session.pre_call(model="m")
        session.wait_for_background(batched=False)
    assert not spy.on_host()


def test_memory_compact_still_decides_on_exact_counts_near_its_threshold(spy):
    session, clock = compact_session(3_000)  # compacts at 2,400 tokens
    run_tool_calls(session, clock, 1, size=400)
    session.wait_for_background()
    spy.calls.clear()
    message, tool_id = tool_turn("Read", path="/src/big.py")
    session.post_sampling(message)
    session.append(tool_result(tool_id, "é " * 1_500))  # 4,500 bytes bound 1,501 tokens
    seen = len(session.events)
    session.pre_call(model="m")
    assert spy.on_host()  # the bound reached the threshold: counted exactly
    assert not any(isinstance(e, stenograph.CompactionSkipped) for e in session.events[seen:])
