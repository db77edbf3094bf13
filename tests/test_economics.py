"""The prompt-cache simulator (one test per cache rule), the price table, the cost of a
hand-computed example, and the simulator against the development sessions' usage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import DEMO, ROOT

from stenograph.economics import (
    PriceError,
    PromptCache,
    Request,
    Segment,
    load_prices,
    simulate,
)
from stenograph.economics.ledger import Ledger, recorded_cost
from stenograph.replay import replay

PRICES = load_prices()
EMPTY_VIEW = {
    "calls": [],
    "totals": {"cache_read": 0, "cache_write": 0, "uncached": 0, "output": 0, "cost": 0.0},
}
SONNET = "claude-sonnet-4-5-20250929"


def segs(*sizes: int, marks: dict[int, str] | None = None, tag: str = "") -> tuple:
    """Segments of the given sizes, keyed by position (and ``tag``), breakpoints at ``marks``."""
    marks = marks if marks is not None else {len(sizes) - 1: "5m"}
    return tuple(Segment(f"{tag}{i}", n, marks.get(i)) for i, n in enumerate(sizes))


def send(cache: PromptCache, time: float, segments: tuple, model: str = SONNET):
    return cache.send(Request(time, model, segments))


# --- the cache rules ---------------------------------------------------------------------


def test_hit_within_ttl_reads_the_prefix_and_writes_the_rest():
    cache = PromptCache(PRICES)
    first = send(cache, 0, segs(3000, 1000))
    second = send(cache, 299, segs(3000, 1000, 500))
    assert (first.cache_read, first.cache_write) == (0, 4000)
    assert (second.cache_read, second.cache_write, second.uncached) == (4000, 500, 0)


def test_miss_after_the_ttl():
    cache = PromptCache(PRICES)
    send(cache, 0, segs(3000, 1000))
    late = send(cache, 301, segs(3000, 1000, 500))
    assert (late.cache_read, late.cache_write) == (0, 4500)
    assert late.is_miss


def test_a_hit_refreshes_the_ttl():
    cache = PromptCache(PRICES)
    send(cache, 0, segs(3000, 1000))
    send(cache, 200, segs(3000, 1000, 10, marks={1: "5m"}))  # reads 4000, writes nothing new
    third = send(cache, 450, segs(3000, 1000, 20, marks={1: "5m"}))  # 450 s after the write
    assert third.cache_read == 4000


def test_two_breakpoints_keep_the_earlier_prefix_when_the_later_part_changes():
    cache = PromptCache(PRICES)
    send(cache, 0, segs(3000, 1000, marks={0: "5m", 1: "5m"}))
    changed = send(cache, 10, segs(3000, marks={0: "5m"}) + (Segment("other", 900, "5m"),))
    assert (changed.cache_read, changed.cache_write) == (3000, 900)
    one_mark = PromptCache(PRICES)
    send(one_mark, 0, segs(3000, 1000, marks={1: "5m"}))
    alone = send(one_mark, 10, segs(3000, 1000)[:1] + (Segment("other", 900, "5m"),))
    assert (alone.cache_read, alone.cache_write) == (0, 3900)


def test_a_prefix_under_the_minimum_length_is_not_cached():
    cache = PromptCache(PRICES)
    assert PRICES.for_model(SONNET).min_cacheable_tokens == 1024
    small = send(cache, 0, segs(600, 400))
    again = send(cache, 5, segs(600, 400, 100))
    assert (small.cache_write, small.uncached) == (0, 1000)
    assert (again.cache_read, again.cache_write) == (0, 1100)
    haiku = send(PromptCache(PRICES), 0, segs(3000), model="claude-haiku-4-5-20251001")
    assert (haiku.cache_write, haiku.uncached) == (0, 3000)  # Haiku 4.5 needs 4,096


def test_one_hour_ttl_outlives_five_minutes_and_is_priced_at_2x():
    cache = PromptCache(PRICES)
    first = send(cache, 0, segs(3000, 1000, marks={1: "1h"}))
    later = send(cache, 3000, segs(3000, 1000, 500, marks={2: "1h"}))
    gone = send(cache, 3000 + 3601, segs(3000, 1000, 500, marks={2: "1h"}))
    assert (first.cache_write_1h, first.cache_write_5m) == (4000, 0)
    assert (later.cache_read, later.cache_write_1h) == (4000, 500)
    assert gone.cache_read == 0
    assert first.cost == pytest.approx(4000 * 3.0 * 2.0 / 1e6)


def test_lookback_reaches_twenty_blocks_before_a_breakpoint():
    cache = PromptCache(PRICES)
    send(cache, 0, segs(2000, marks={0: "5m"}))
    near = segs(2000, *[10] * 19)
    far = segs(2000, *[10] * 20)
    assert send(PromptCache(PRICES), 0, near).cache_read == 0
    assert send(cache, 1, near).cache_read == 2000
    assert send(cache, 2, far).cache_read == 2190  # the previous call wrote up to 19 blocks


def test_no_breakpoint_no_cache():
    cache = PromptCache(PRICES)
    send(cache, 0, segs(5000, marks={}))
    call = send(cache, 1, segs(5000, marks={}))
    assert (call.cache_read, call.cache_write, call.uncached) == (0, 0, 5000)


def test_models_have_separate_caches():
    cache = PromptCache(PRICES)
    send(cache, 0, segs(5000))
    assert send(cache, 1, segs(5000), model="claude-opus-4-1-20250805").cache_read == 0


# --- cost ----------------------------------------------------------------------------------


def test_three_calls_cost_as_computed_by_hand():
    """Sonnet 4.5 ($3 in, $15 out per MTok). Call 1 writes 10,000 (5 min); call 2, 60 s later,
    reads them and writes 2,000 more; call 3, 400 s after call 2, finds nothing alive and
    writes all 13,000. Output: 500, 300, 200 tokens."""
    requests = [
        Request(0, SONNET, segs(10_000), 500),
        Request(60, SONNET, segs(10_000, 2_000), 300),
        Request(460, SONNET, segs(10_000, 2_000, 1_000), 200),
    ]
    calls = simulate(requests, PRICES)
    # 10,000 x 3.75 + 500 x 15 = 37,500 + 7,500 = 45,000 micro-dollars
    # 10,000 x 0.30 + 2,000 x 3.75 + 300 x 15 = 3,000 + 7,500 + 4,500 = 15,000
    # 13,000 x 3.75 + 200 x 15 = 48,750 + 3,000 = 51,750
    assert [round(c.cost * 1e6) for c in calls] == [45_000, 15_000, 51_750]
    assert sum(c.cost for c in calls) == pytest.approx(0.11175)


def test_recorded_usage_is_priced_with_its_ttl_split():
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 20_000,
        "output_tokens": 100,
        "ephemeral_1h_input_tokens": 1000,
    }
    call = recorded_cost(0, usage, PRICES, "claude-opus-4-6", "1h")
    assert (call.cache_write_1h, call.cache_write_5m, call.uncached) == (1000, 0, 10)
    assert call.cost == pytest.approx((10 * 5 + 1000 * 10 + 20_000 * 0.5 + 100 * 25) / 1e6)


def test_price_table_matches_the_longest_prefix_and_falls_back():
    assert PRICES.for_model("claude-opus-4-5-20251101").input == 5.0
    assert PRICES.for_model("claude-opus-4-20250514").input == 15.0
    assert PRICES.for_model("gpt-4o").name == PRICES.fallback


def test_price_file_overrides_and_extends(tmp_path: Path):
    path = tmp_path / "prices.toml"
    path.write_text(
        'fallback = "my-model"\n[multipliers]\ncache_read = 0.2\n'
        "[models.claude-sonnet-4-5]\ninput = 2.5\n"
        "[models.my-model]\ninput = 1\noutput = 2\nmin_cacheable_tokens = 10\n"
    )
    table = load_prices(path)
    sonnet = table.for_model(SONNET)
    assert (sonnet.input, sonnet.output, sonnet.cache_read) == (2.5, 15.0, 0.2)
    assert table.for_model("unknown").name == "my-model"
    assert table.to_json()["sources"] == ["built-in prices", str(path)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[models.claude-sonnet-4-5]\nimput = 2\n", "unknown key models.claude-sonnet-4-5.imput"),
        ("[models.new]\ninput = 2\n", "models.new lacks output, min_cacheable_tokens"),
        ("[multipliers]\ncache_read = -1\n", "multipliers.cache_read must be a number >= 0"),
        ('fallback = "nope"\n', "fallback 'nope' is not a model"),
        ("[models\n", "cannot read the price file"),
    ],
)
def test_bad_price_files_name_the_key(tmp_path: Path, text: str, message: str):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PriceError, match="p.toml: " + message.replace("(", r"\(")):
        load_prices(path)


# --- the counterfactual in a replay --------------------------------------------------------


def test_replay_json_carries_economics_with_integer_tokens(tmp_path: Path):
    report = replay(DEMO, "inactivity-only", tmp_path)
    economics = json.loads(json.dumps(report.to_json()))["economics"]
    assert set(economics) >= {"as_recorded", "with_preset", "recorded_usage", "prices"}
    keys = {"index", "cache_read", "cache_write", "uncached", "output", "cost"}
    for view in ("as_recorded", "with_preset", "recorded_usage"):
        assert len(economics[view]["calls"]) == report.calls
        assert set(economics[view]["calls"][0]) == keys
        assert set(economics[view]["totals"]) == keys - {"index"}
        assert all(type(c[k]) is int for c in economics[view]["calls"] for k in keys - {"cost"})
    memorized_before = report.memorize_events[0]["before_assistant_index"]
    as_recorded = economics["as_recorded"]["calls"]
    with_preset = economics["with_preset"]["calls"]
    assert as_recorded[:memorized_before] == with_preset[:memorized_before]
    assert (
        with_preset[memorized_before]["cache_write"] < as_recorded[memorized_before]["cache_write"]
    )
    assert economics["with_preset"]["totals"]["cost"] < economics["as_recorded"]["totals"]["cost"]


def test_a_preset_that_changes_nothing_costs_the_same(tmp_path: Path):
    preset = tmp_path / "idle.toml"
    preset.write_text(
        'name = "idle"\n[[handlers]]\nuse = "inactivity-memorize"\n'
        "inactivityThresholdSeconds = 2592000\n"
    )
    economics = replay(DEMO, preset, None).economics
    assert economics["with_preset"] == {**economics["as_recorded"], "forks": EMPTY_VIEW}


def test_ledger_merges_same_role_entries_like_the_session(tmp_path: Path):
    report = replay(DEMO, "inactivity-only", None)
    call = report.ledger.calls[0]
    assert call.full["messages"] == call.sent["messages"]
    assert isinstance(report.ledger, Ledger)


# --- against reality -----------------------------------------------------------------------


def test_simulator_matches_the_recorded_misses_and_writes(shared_data: Path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from cache_model import describe, fit_sessions
    finally:
        sys.path.pop(0)
    fit = fit_sessions(shared_data)
    print("\n" + describe(fit))
    assert len(fit.sessions) >= 20
    assert fit.precision >= 0.8
    assert fit.recall >= 0.8
    assert fit.within_share() >= 0.8


def test_notes_forks_are_priced_on_the_main_threads_cache(tmp_path: Path):
    report = replay(DEMO, "default", tmp_path)
    forks = report.economics["with_preset"]["forks"]
    after = [e["after_assistant_index"] for e in report.extractions]
    assert [c["index"] for c in forks["calls"]] == after
    main = report.economics["with_preset"]["calls"]
    for fork in forks["calls"]:
        shared = main[fork["index"]]
        # the fork reads the prefix its main call wrote and pays for its own output
        assert fork["cache_read"] == shared["cache_read"] + shared["cache_write"]
        assert fork["output"] > 0 and fork["cost"] > 0
    assert forks["totals"]["cost"] == pytest.approx(sum(c["cost"] for c in forks["calls"]))
    assert replay(DEMO, "inactivity-only", None).economics["with_preset"]["forks"]["calls"] == []
