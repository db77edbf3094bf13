"""The benchmarks' shared parts that decide what a figure means."""

from __future__ import annotations

import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from benchlib.stats import balanced  # noqa: E402
from benchlib.transcripts import repeated_demo  # noqa: E402

from stenograph.replay import replay  # noqa: E402


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6, 7])
def test_balanced_orders_put_each_lane_after_each_other_equally_often(count: int) -> None:
    lanes = [f"lane{i}" for i in range(count)]
    rounds = count if count % 2 == 0 else 2 * count
    orders = [balanced(lanes, index) for index in range(rounds)]
    assert all(sorted(order) == lanes for order in orders)
    firsts = Counter(order[0] for order in orders)
    assert set(firsts.values()) == {rounds // count}
    after = Counter(pair for order in orders for pair in pairwise(order))
    if count > 1:
        assert len(after) == count * (count - 1)  # every ordered pair of lanes
        assert len(set(after.values())) == 1  # each as often


def test_balanced_repeats_its_cycle() -> None:
    lanes = list("abcde")
    assert [balanced(lanes, i) for i in range(10)] == [balanced(lanes, i + 10) for i in range(10)]
    assert balanced([], 3) == []


def test_the_repeated_demo_is_one_long_session_replayed_whole(tmp_path: Path) -> None:
    """``replay_cost.py``'s sessions: every repetition replayed, none of it lost or renamed,
    memorize and the notes acting in each."""
    report = replay(repeated_demo(30, tmp_path / "long.jsonl"), "default", state_dir=None)
    assert report.calls == 33 and not report.warnings and report.lost == 0
    assert len(report.memorize_events) == 3 and len(report.extractions) >= 3
