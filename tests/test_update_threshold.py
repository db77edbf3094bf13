"""update-threshold: the decision, its state, the extractor contract, and real sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import real_transcripts
from helpers import tool_result

import stenograph
from stenograph import ThresholdDecision
from stenograph.engine.tokens import content_tokens
from stenograph.handlers.forked_extraction.desk import ExtractionDesk
from stenograph.integrations.transcripts import read_transcripts
from stenograph.replay import replay

UT = "update-threshold"
THRESHOLD_ONLY = str(Path(__file__).parent / "presets" / "threshold-only.toml")


def usage(total: int) -> dict[str, int]:
    """A usage block whose four counters add up to ``total``."""
    return {
        "input_tokens": total - 300,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 100,
        "output_tokens": 100,
    }


def response(total: int | None, tools: int = 0) -> dict:
    blocks = [{"type": "text", "text": "ok"}] + [
        {"type": "tool_use", "id": f"toolu_{total}_{i}", "name": "Read", "input": {"i": i}}
        for i in range(tools)
    ]
    message = {"role": "assistant", "content": blocks}
    if total is not None:
        message["usage"] = usage(total)
    return message


class Driver:
    """A session on update-threshold alone, fed responses with chosen usage."""

    def __init__(self, state_dir=None, preset=THRESHOLD_ONLY, handlers=(), **settings):
        engine = stenograph.Engine.from_preset(preset, overrides={UT: settings}, handlers=handlers)
        self.engine, self.state_dir = engine, state_dir
        self.session = engine.open_session("t", state_dir=state_dir)
        self.session.append({"role": "user", "content": "go"})
        self.pending: list[str] = []

    def turn(self, total: int | None, tools: int = 0) -> ThresholdDecision:
        for tool_id in self.pending:
            self.session.append(tool_result(tool_id, "r"))
        self.session.pre_call(model="m")
        entry = self.session.post_sampling(response(total, tools))
        self.pending = list(entry.tool_use_ids)
        return next(e for e in reversed(self.session.events) if isinstance(e, ThresholdDecision))

    @property
    def state(self) -> dict:
        return self.session.handler_state(UT)


# (usage totals and tool calls of successive responses) -> expected extract flags
TABLE = [
    ("below init", [(9_999, 0)], [False]),
    ("exactly init, quiet", [(10_000, 0)], [True]),
    ("init, tool call, < 3 calls", [(10_000, 2)], [False]),
    ("init, exactly 3 calls in one response (parallel)", [(10_000, 3)], [True]),
    (
        "growth 4,999 then exactly 5,000",
        [(10_000, 0), (14_999, 0), (15_000, 0)],
        [True, False, True],
    ),
    ("growth ok, mid-task with 2 calls", [(10_000, 0), (15_000, 2)], [True, False]),
    (
        "growth ok, calls accumulate across responses",
        [(10_000, 0), (12_000, 2), (15_000, 1)],
        [True, False, True],
    ),
    (
        "growth ok, quiet after tool calls",
        [(10_000, 0), (12_000, 1), (15_500, 0)],
        [True, False, True],
    ),
    ("enough calls, not enough growth", [(10_000, 0), (11_000, 5)], [True, False]),
]


@pytest.mark.parametrize(("turns", "expected"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE])
def test_decision_table(turns, expected):
    driver = Driver()
    assert [driver.turn(total, tools).extract for total, tools in turns] == expected


def test_reasons_explain_each_outcome():
    driver = Driver()
    assert driver.turn(9_000).reason == "not initialized: 9,000 < 10,000"
    assert driver.turn(10_000, 3).reason == "growth 10,000 and 3 tool calls >= 3"
    assert driver.turn(13_210).reason == "growth 3,210 < 5,000"
    second = driver.turn(15_000, 1)
    assert second.reason == "growth 5,000 ok, but 1 tool calls < 3 and the response calls a tool"
    assert driver.turn(15_100).reason == "growth 5,100 and quiet (the response calls no tool)"
    decision = driver.session.events[-1]
    assert (decision.tokens, decision.growth, decision.tool_calls, decision.quiet) == (
        15_100,
        5_100,
        1,
        True,
    )


def test_entries_without_usage_use_estimates():
    driver = Driver(minimumMessageTokensToInit=50, minimumTokensBetweenUpdate=50)
    decision = driver.turn(None)
    expected = sum(driver.session.history.full_tokens(e) for e in driver.session.history)
    assert decision.tokens == expected and decision.extract is False
    driver.session.append({"role": "user", "content": "word " * 100})
    assert driver.turn(None).extract is True


def test_estimates_after_the_anchor_use_the_chosen_estimator():
    for estimator, per_text in (("chars4", 125), ("tiktoken", None)):
        driver = Driver(tokenEstimator=estimator)
        driver.turn(10_000)
        entry = driver.session.append({"role": "user", "content": "abcd" * 125})
        expected = per_text or driver.session.history.full_tokens(entry)
        assert driver.session.history.context_size(estimator) == 10_000 + expected


def test_state_persists_across_restart(tmp_path):
    driver = Driver(state_dir=tmp_path)
    driver.turn(10_000, 3)
    driver.turn(11_000, 1)
    saved = dict(driver.state)
    driver.session.close()
    assert saved == {
        "initialized": True,
        "tokensAtLastExtraction": 10_000,
        "lastExtractedUuid": driver.session.history[1].uuid,
    }
    again = Driver.__new__(Driver)
    again.session = driver.engine.open_session("t", state_dir=tmp_path)
    again.pending = []
    assert again.state == saved
    decision = again.turn(14_000, 1)  # first call after the restart: 2 tool calls since
    assert (decision.tool_calls, decision.growth, decision.extract) == (2, 4_000, False)
    assert again.turn(15_000, 1).extract is True


@pytest.mark.parametrize(
    "key", ["minimumMessageTokensToInit", "minimumTokensBetweenUpdate", "toolCallsBetweenUpdates"]
)
@pytest.mark.parametrize("value", [0, -5])
def test_zero_or_negative_thresholds_are_refused(tmp_path, key, value):
    path = tmp_path / "p.toml"
    path.write_text(f'[[handlers]]\nuse = "{UT}"\n{key} = {value}\n')
    with pytest.raises(stenograph.PresetError, match=f"'{key}' of handler 'update-threshold'"):
        stenograph.Engine.from_preset(path)


class FlakyExtractor(stenograph.Handler):
    """Takes requests; fails while ``failures`` is positive."""

    name = "flaky-extractor"
    failures = 0
    taken: list = []

    @stenograph.hookimpl
    def extraction_requested(self, session, request):
        FlakyExtractor.taken.append(request)
        ok = FlakyExtractor.failures <= 0
        FlakyExtractor.failures -= 1
        session.run_in_background(
            "extract", lambda: request.settle(session, ok, None if ok else "boom")
        )
        return True


def test_state_advances_only_after_a_successful_extraction(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text(f'[[handlers]]\nuse = "{UT}"\n[[handlers]]\nuse = "flaky-extractor"\n')
    FlakyExtractor.failures, FlakyExtractor.taken = 1, []
    driver = Driver(preset=str(preset), handlers=[FlakyExtractor])
    assert driver.turn(10_000, 3).extract
    driver.session.wait_for_background(5)
    assert FlakyExtractor.taken[0].status == "failed"
    assert "tokensAtLastExtraction" not in driver.state
    retry = driver.turn(10_500)
    assert retry.extract and retry.growth == 10_500  # retried at the next positive decision
    driver.session.wait_for_background(5)
    assert FlakyExtractor.taken[1].status == "succeeded"
    assert driver.state["tokensAtLastExtraction"] == 10_500
    assert driver.state["lastExtractedUuid"] == driver.session.history[-1].uuid
    assert driver.turn(11_000).extract is False


def test_requests_filed_while_one_waits_are_coalesced():
    desk = ExtractionDesk()
    make = stenograph.ExtractionRequest
    first, second = make("a", 1, 1, 0, "r", 0.0), make("b", 2, 2, 0, "r", 0.0)
    desk.file(first, None)
    desk.file(second, None)
    assert first.status == "coalesced" and desk.take() == (second, None) and desk.take() is None


def test_without_an_extractor_decisions_count_as_handled():
    driver = Driver()
    driver.turn(10_000)
    assert driver.state["tokensAtLastExtraction"] == 10_000


def reference_extractions(path) -> list[int]:
    """Claude Code's formula, written as plainly as possible, rescanning everything per call
    (each conversation of the file on its own, the call indexes running on)."""
    fired: list[int] = []
    before = 0  # the calls of the conversations before
    for transcript in read_transcripts(path):
        fired += [before + i for i in _reference(transcript.messages)]
        before += sum(m["role"] == "assistant" for m in transcript.messages)
    return fired


def _reference(conversation: list[dict]) -> list[int]:
    messages, fired = [], []
    initialized, base, last_position, index = False, 0, -1, 0
    for message in conversation:
        messages.append(message)
        if message["role"] != "assistant":
            continue
        anchor = max(
            (i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("usage")),
            default=None,
        )
        tokens = (
            0
            if anchor is None
            else sum(
                messages[anchor]["usage"].get(k, 0)
                for k in (
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                    "output_tokens",
                )
            )
        )
        start = 0 if anchor is None else anchor + 1
        tokens += sum(content_tokens(m["content"] or "", "chars4") for m in messages[start:])
        calls = sum(
            b.get("type") == "tool_use"
            for m in messages[last_position + 1 :]
            if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"]
        )
        quiet = not (
            isinstance(message["content"], list)
            and any(b.get("type") == "tool_use" for b in message["content"])
        )
        if not initialized and tokens >= 10_000:
            initialized = True
        if initialized:
            base = min(base, tokens)
            if tokens - base >= 5_000 and (calls >= 3 or quiet):
                fired.append(index)
                base, last_position = tokens, len(messages) - 1
        index += 1
    return fired


@pytest.mark.parametrize("path", real_transcripts(), ids=lambda p: p.name[:24])
def test_real_sessions_fire_where_the_formula_does(tmp_path, path):
    report = replay(
        path, "coding-agent", state_dir=tmp_path, overrides={UT: {"tokenEstimator": "chars4"}}
    )
    assert [e["after_assistant_index"] for e in report.extractions] == reference_extractions(path)


def test_some_real_sessions_do_extract(shared_data):
    fired = sum(bool(reference_extractions(p)) for p in real_transcripts())
    assert fired >= 10


def test_cli_explain_prints_the_decision_table(tmp_path):
    import json
    import subprocess
    import sys

    from conftest import DEMO

    base = [sys.executable, "-m", "stenograph", "explain", str(DEMO), "--state-dir", str(tmp_path)]
    table = subprocess.run(
        base, capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": ""}
    )
    assert table.returncode == 0, table.stderr
    assert "growth 15,193 and 3 tool calls >= 3" in table.stdout
    assert "2 extraction(s) in 11 calls" in table.stdout
    data = json.loads(
        subprocess.run(base + ["--json"], capture_output=True, text=True, timeout=60).stdout
    )
    assert len(data) == 11 and [d["after_assistant_index"] for d in data if d["extract"]] == [1, 6]
    assert set(data[0]) >= {"tokens", "growth", "tool_calls", "quiet", "extract", "reason"}
