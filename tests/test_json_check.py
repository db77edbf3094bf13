"""An in-memory session checks each record with a walk instead of encoding it: the walk
must accept and refuse exactly what the journal's encoding does, with the same message."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stenograph.engine.entries import Entry, EntryError
from stenograph.engine.store import check_entry, check_json, encode_record

HAZARDS = st.sampled_from(
    [float("nan"), float("inf"), -float("inf"), "caf\udce9", "\ud800", b"x", 1j, (1, 2)]
)
ODD_SCALARS = st.one_of(
    HAZARDS,  # drawn often: the walk must never accept what the encoding refuses
    st.text(),  # lone surrogates included
    st.integers(),
    st.floats(),  # NaN and infinities included
    st.booleans(),
    st.none(),
    st.binary(max_size=4),
    st.frozensets(st.integers(), max_size=2),
    st.complex_numbers(max_magnitude=10),
)
KEYS = st.one_of(st.text(max_size=6), st.integers(), st.none())
VALUES = st.recursive(
    ODD_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=12,
)


def outcome(check, record) -> str:
    """'ok', or the EntryError's message."""
    try:
        check(record)
    except EntryError as exc:
        return str(exc)
    return "ok"


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_walk_and_the_encoding_agree_on_every_value(value):
    record = {"op": "append", "entry": {"role": "user", "content": value}}
    assert outcome(check_json, record) == outcome(encode_record, record)


@pytest.mark.parametrize("depth", [150, 199, 200, 201, 400])
def test_deep_nesting_is_judged_as_the_encoding_judges_it(depth):
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    record = {"op": "append", "entry": {"content": value}}
    assert outcome(check_json, record) == outcome(encode_record, record)


@pytest.mark.parametrize("digits", [3999, 4000, 4300, 4301, 5000])
def test_a_long_int_is_judged_as_the_encoding_judges_it(digits):
    record = {"op": "append", "entry": {"content": [{"type": "x", "n": -(10 ** (digits - 1))}]}}
    assert outcome(check_json, record) == outcome(encode_record, record)


STAMPS = st.one_of(st.none(), st.floats(), st.sampled_from([-62_135_596_800.0, 253_402_300_799.5]))


@settings(max_examples=300, deadline=None)
@given(VALUES, st.one_of(st.none(), st.dictionaries(KEYS, VALUES, max_size=3)), st.text(), STAMPS)
def test_an_entry_is_judged_as_its_journal_record_is(content, meta, uuid, stamp):
    entry = Entry("user", content, uuid, stamp, _meta=meta)

    def journal(entry: Entry) -> None:
        encode_record({"op": "append", "entry": entry.to_record()})

    def failure(check) -> str:
        try:
            outcome_text = outcome(check, entry)
        except (OverflowError, ValueError, OSError) as exc:  # a timestamp out of range
            return type(exc).__name__
        return outcome_text

    assert failure(check_entry) == failure(journal)
