"""The C twins of the entry path (``stenograph._speedups``) give what their Python twins give:
the same copy (sharing the same atoms), the same JSON verdict, the same block scan, on
every value hypothesis draws (odd types, subclasses, surrogates, huge ints, deep nests)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import OrderedDict
from typing import Any

import pytest
from helpers import compiled_twins, under_debug_allocator
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import stenograph
from stenograph.engine import entries, store

C = compiled_twins()


class Block(BaseModel):
    type: str = "text"
    text: str = "from a model"


class Odd:
    """Neither JSON nor a model: deep-copied by both twins."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Odd) and other.value == self.value


class MyStr(str):
    pass


class MyDict(dict):  # type: ignore[type-arg]
    pass


HAZARDS = st.sampled_from(  # drawn often: each edge of each check
    ["\ud800", "\udfff", "caf\udce9", "\u00e9\ud7ff", "\U0001f600\udbff", "\ue000", "", " "]
    + [float("nan"), float("inf"), 1e308, True, 2**62]
)
SCALARS = st.one_of(
    HAZARDS,
    st.text(),  # lone surrogates included
    st.text().map(MyStr),
    st.integers(),
    st.sampled_from([10**4000 - 1, 10**4000, -(10**4000), 2**63, -(2**63) - 1]),
    st.floats(),  # NaN and infinities included
    st.booleans(),
    st.none(),
    st.binary(max_size=4),
    st.builds(Odd, st.integers()),
    st.builds(Block),
)
KEYS = st.one_of(st.text(max_size=6), st.integers(), st.none(), st.text(max_size=3).map(MyStr))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(KEYS, inner, max_size=4),
        st.builds(MyDict, st.dictionaries(st.text(max_size=4), inner, max_size=3)),
        st.builds(OrderedDict, st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    ),
    max_leaves=16,
)


def same_shape(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down, sharing the same atoms."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_shape(x, y) for x, y in zip(a, b, strict=True))
    if type(a) in (str, int, float, bool, type(None)):
        return a is b
    return a == b or (a != a and b != b)  # NaN inside a tuple, say


@settings(max_examples=500, deadline=None)
@given(VALUES)
def test_the_copies_agree(value: Any) -> None:
    ours, theirs = C.copy_json(value, entries._copy), entries._copy(value)
    assert same_shape(ours, theirs)
    if isinstance(value, dict | list):
        assert ours is not value


@settings(max_examples=800, deadline=None)
@given(VALUES, st.sampled_from([0, 2, 199, 200, 201, 10**6]))
def test_the_json_verdicts_agree(value: Any, depth: int) -> None:
    assert C.is_json(value, depth) is store._is_json(value, depth)


EDGES = ["\ud800", "\udfff", "\ud7ff", "\ue000", "\U0010ffff", "", 10**4000 - 1, 10**4000]
EDGES += [-(10**4000) + 1, -(10**4000), 2**63, -(2**63) - 1, float("nan"), -float("inf"), True]


@pytest.mark.parametrize("value", EDGES, ids=repr)
def test_each_edge_is_judged_alike(value: Any) -> None:
    for wrapped in (value, [value], {"k": value}, {str(value)[:9]: 1}):
        assert C.is_json(wrapped, 2) is store._is_json(wrapped, 2)


@pytest.mark.parametrize("depth", [150, 199, 200, 201, 202, 400])
def test_deep_nests_are_judged_alike(depth: int) -> None:
    value: Any = "leaf"
    for _ in range(depth):
        value = [{"k": value}]
    assert C.is_json(value, 0) is store._is_json(value, 0)


def test_a_nest_too_deep_to_copy_is_refused_by_both() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    for copy in (lambda v: C.copy_json(v, entries._copy), entries._copy):
        with pytest.raises(RecursionError):
            copy(value)
    with pytest.raises(stenograph.EntryError, match="nested too deeply"):
        entries.copy_json(value)


BLOCK = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["tool_use", "server_tool_use"])},
        optional={"id": st.one_of(st.text(max_size=4), st.integers(), st.text().map(MyStr))},
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result")},
        optional={"tool_use_id": st.one_of(st.text(max_size=4), st.none())},
    ),
    st.fixed_dictionaries(
        {"type": st.just("text")},
        optional={"text": st.one_of(st.text(alphabet=" \t\n\x85\u3000ab"), st.integers())},
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["thinking", "image", ""])}),
    st.fixed_dictionaries({"type": st.text(max_size=3).map(MyStr)}),
)
BLOCKS = st.lists(st.one_of(BLOCK, BLOCK.map(MyDict), st.just({"type": 3}), st.just("text")))


def scan_py(blocks: list[Any]) -> Any:
    """The Python scan's result, or the error it raises."""
    try:
        return entries._scan_blocks(blocks)
    except stenograph.EntryError as exc:
        return str(exc)


@settings(max_examples=800, deadline=None)
@given(BLOCKS)
def test_the_block_scans_agree(blocks: list[Any]) -> None:
    ours = C.scan_blocks(blocks)
    odd = any(type(b) is not dict or type(b.get("type")) is not str for b in blocks)
    if odd:  # the C scan leaves odd blocks to the Python one, which says what is wrong
        assert ours is None
    else:
        assert ours == scan_py(blocks)


def test_the_python_twins_run_when_turned_off() -> None:
    code = (
        "from stenograph.engine import entries, history, speedups, store; "
        "print(speedups.C is None, store._json_ok is store._is_json, entries.C is None,"
        " history.C is None)"
    )
    for flag, expected in (("1", "True True True True"), ("0", "False False False False")):
        env = {**os.environ, "STENOGRAPH_PURE_PYTHON": flag}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.stdout.strip() == expected, out.stderr


HOSTILE = """
from stenograph import _speedups as C
from stenograph.engine import entries

class Key:
    '''Hashes as "type" does and, compared or hashed, empties the containers it is told.'''
    def __init__(self, *victims):
        self.victims = victims
    def __hash__(self):
        for victim in self.victims:
            victim.clear()
        return hash("type")
    def __eq__(self, other):
        for victim in self.victims:
            victim.clear()
        return False

def hostile():
    blocks = []  # the key empties it while its first block is read
    blocks += [{Key(blocks): 1, "type": "text", "text": "x"}, {"type": "tool_use", "id": "t"}]
    return blocks
print(C.scan_blocks(hostile()) == entries._scan_blocks(hostile()) == ((), (), True))
source = {"a": [1]}
source[Key(source)] = [2]
print(type(C.copy_json({"outer": source, "more": [source]}, entries._copy)).__name__)

class Dumps:
    '''A model whose dump rewrites the list holding it.'''
    def __init__(self, holder):
        self.holder = holder
    def model_dump(self, **_):
        self.holder[:] = ["late"]
        return {"dumped": True}

def holding():
    holder = [{"a": 1}]
    holder += [Dumps(holder), {"b": 2}]
    return holder
print(C.copy_json(holding(), entries._copy) == entries._copy(holding()))
"""


def test_code_run_by_a_key_cannot_crash_the_c_twins() -> None:
    """A key whose __eq__ / __hash__ empties the list or dict being read, a model whose dump
    rewrites the list holding it: freed memory would show under the debug allocator (the
    first version of the scan crashed here); the results agree with the Python twins'."""
    assert under_debug_allocator(HOSTILE).split() == ["True", "dict", "True"]
