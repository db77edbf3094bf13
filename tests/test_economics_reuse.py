"""The economics of a replay reuse what the call before computed (the blocks of the messages
it shares, their segments, the hashes of the prefix): each figure equals the one computed
afresh for that call alone, on request sequences that extend, rewrite, copy and cut the
messages before them."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stenograph.economics import PromptCache, Request, Segmenter, Sizer, load_prices
from stenograph.economics.cache import common_prefix
from stenograph.economics.ledger import Call, Ledger
from stenograph.replay import ReplayReport, replay

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from benchlib.transcripts import repeated_demo  # noqa: E402

PRICES = load_prices()
SONNET = "claude-sonnet-4-5-20250929"
TOOLS = [{"name": "read", "description": "Read a file.", "input_schema": {"type": "object"}}]
TEXTS = ["fix the bug", "ok", "x" * 900, "the tests pass now", "y" * 4000]


def _content(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return draw(st.sampled_from(TEXTS))
    blocks: list[dict[str, Any]] = []
    for text in draw(st.lists(st.sampled_from(TEXTS), min_size=0, max_size=3)):
        block: dict[str, Any] = {"type": "text", "text": text}
        if draw(st.integers(0, 9)) == 0:
            block["cache_control"] = {"type": "ephemeral"}
        blocks.append(block)
    return blocks


@st.composite
def request_sequences(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Requests as a replay makes them: each from the one before, extended (the usual
    case), with messages rewritten or copied (equal, other objects), cut back, or sent
    from the second on."""
    messages: list[dict[str, Any]] = []
    requests = []
    for _ in range(draw(st.integers(1, 8))):
        step = draw(st.sampled_from(["extend", "extend", "rewrite", "copy", "cut", "window"]))
        if step == "extend" or not messages:
            for _ in range(draw(st.integers(1, 3))):
                role = "user" if len(messages) % 2 == 0 else "assistant"
                messages.append({"role": role, "content": _content(draw)})
        elif step == "rewrite":
            at = draw(st.integers(0, len(messages) - 1))
            messages[at] = {"role": messages[at]["role"], "content": _content(draw)}
        elif step == "copy":
            at = draw(st.integers(0, len(messages) - 1))
            messages[at] = copy.deepcopy(messages[at])
        elif step == "cut":
            del messages[draw(st.integers(0, len(messages) - 1)) :]
        else:  # a compaction's window: the same messages, each one place earlier
            del messages[0]
        request: dict[str, Any] = {"model": SONNET, "messages": list(messages)}
        if draw(st.booleans()):
            request["system"] = draw(st.sampled_from(TEXTS))
            request["tools"] = TOOLS
        if draw(st.integers(0, 5)) == 0:
            request["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
        requests.append(request)
    return requests


@settings(max_examples=150, deadline=None)
@given(request_sequences(), st.booleans())
def test_the_blocks_of_a_request_are_those_made_for_it_alone(requests, assume):
    segmenter = Segmenter("5m", assume)
    for request in requests:
        assert segmenter.blocks(request) == Segmenter("5m", assume).blocks(request)


@settings(max_examples=150, deadline=None)
@given(request_sequences(), st.lists(st.one_of(st.none(), st.integers(0, 9000)), min_size=8))
def test_the_segments_of_a_call_are_those_sized_for_it_alone(requests, totals):
    segmenter, sizer = Segmenter(), Sizer()
    for request, total in zip(requests, totals, strict=False):
        blocks = segmenter.blocks(request)
        alone = Sizer(dict(sizer.sizes), sizer.recorded, sizer.estimated)  # nothing to reuse
        assert sizer.segments(blocks, total) == alone.segments(blocks, total)
        assert (sizer.sizes, sizer.recorded, sizer.estimated) == (
            alone.sizes,
            alone.recorded,
            alone.estimated,
        )


@settings(max_examples=150, deadline=None)
@given(request_sequences(), st.lists(st.floats(0, 400), min_size=8))
def test_a_call_through_the_cache_costs_what_it_costs_alone(requests, gaps):
    segmenter, sizer, cache = Segmenter(), Sizer(), PromptCache(PRICES)
    now = 0.0
    for request, gap in zip(requests, gaps, strict=False):
        now += gap
        segments = sizer.segments(segmenter.blocks(request), 3000)
        call = Request(now, SONNET, segments)
        alone = PromptCache(PRICES, dict(cache.entries))  # the same entries, no hashes kept
        assert cache.send(call) == alone.send(call)
        assert cache.entries == alone.entries


def _marks(request: dict[str, Any]) -> dict[int, str | None]:
    return {i: b.breakpoint for i, b in enumerate(Segmenter("5m").blocks(request)) if b.breakpoint}


def test_breakpoints_are_assumed_on_the_system_prompt_and_the_last_two_messages():
    said = [{"role": "user", "content": t} for t in ("a", "b")]
    blocks = [{"type": "text", "text": t} for t in ("c", "d")]
    messages = [*said, {"role": "assistant", "content": blocks}, {"role": "user", "content": "e"}]
    request = {"system": "s", "tools": TOOLS, "messages": messages}
    assert _marks(request) == {1: "5m", 5: "5m", 6: "5m"}  # tool 0, system 1, messages 2-6
    assert _marks({**request, "cache_control": {"type": "ephemeral"}}) == {6: "5m"}


def test_a_breakpoint_in_an_earlier_message_means_none_is_assumed():
    marked = {"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    messages = [{"role": "user", "content": [marked]}, {"role": "assistant", "content": "b"}]
    messages += [{"role": "user", "content": "c"}]
    assert _marks({"system": "s", "messages": messages}) == {1: "1h"}


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40))
def test_common_prefix_is_the_length_of_the_shared_start(known, given_):
    shared = 0
    while shared < min(len(known), len(given_)) and known[shared] == given_[shared]:
        shared += 1
    assert common_prefix(known, given_) == shared


class _NoCopy:
    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        raise AssertionError("the ledger was copied")


def test_the_json_report_leaves_the_ledger_alone():
    """Every call's two requests stay where they are: copying them made the report of a
    long replay quadratic in its calls."""
    ledger = Ledger([Call(0.0, SONNET, {"messages": [_NoCopy()]}, {"messages": [_NoCopy()]})])
    report = ReplayReport("t.jsonl", "claude-code-jsonl", "default", None, ledger=ledger)
    data = report.to_json()
    assert "ledger" not in data and data["preset"] == "default"


def test_a_replay_makes_each_block_once_not_once_per_call(tmp_path, monkeypatch):
    """The blocks made for a replay's economics grow with the messages, not with the
    messages times the calls: a session twice as long makes about twice as many (each
    call re-deriving its whole request made four times as many)."""
    made = []
    block = Segmenter._block
    monkeypatch.setattr(Segmenter, "_block", lambda self, *a: (made.append(1), block(self, *a))[1])
    counts = []
    for calls in (40, 80):
        made.clear()
        replay(repeated_demo(calls, tmp_path / f"{calls}.jsonl"), "default", state_dir=None)
        counts.append(len(made))
    assert 1.8 < counts[1] / counts[0] < 2.3
