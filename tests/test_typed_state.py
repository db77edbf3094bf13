"""Typed per-session state: a handler's ``State`` model is validated when the state loads
and written through on assignment; live objects sit in ``session.stash`` under typed keys
and are never saved."""

from __future__ import annotations

import enum
import json
import threading
from pathlib import Path
from typing import Annotated, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    field_serializer,
    field_validator,
)
from pydantic.alias_generators import to_camel

import stenograph
from stenograph.handlers.forked_extraction import ForkedExtraction, Writer
from stenograph.handlers.update_threshold import UpdateThreshold, UpdateThresholdState
from stenograph.testing import Conversation, single_handler_session

UT = "update-threshold"


def _run_to_extraction(state_dir: Path) -> Path:
    """A coding-agent session whose update-threshold state was saved; returns state.json."""
    engine = stenograph.Engine.from_preset(
        "coding-agent", overrides={"forked-extraction": {"backend": "offline"}}
    )
    with engine.open_session("s", state_dir=state_dir, clock=stenograph.ManualClock(1e9)) as s:
        talk = Conversation(s)
        talk.user("Read the files.")
        for i in range(4):
            talk.tool("Read", {"file_path": f"/src/{i}.py"}, "x = 1\n" * 3000)
        talk.reply("Done.")
        s.wait_for_background(30)
    return state_dir / "s" / "state.json"


def test_a_wrong_type_in_a_handlers_state_is_reported_by_file_handler_and_field(tmp_path):
    path = _run_to_extraction(tmp_path)
    saved = json.loads(path.read_text())
    assert saved["handlers"][UT]["initialized"] is True
    assert isinstance(saved["handlers"][UT]["tokensAtLastExtraction"], int)
    saved["handlers"][UT]["tokensAtLastExtraction"] = "many"
    path.write_text(json.dumps(saved))
    engine = stenograph.Engine.from_preset("coding-agent")
    session = engine.open_session("s", state_dir=tmp_path, clock=stenograph.ManualClock(2e9))
    (reset,) = [e for e in session.events if isinstance(e, stenograph.StateReset)]
    assert reset.path == str(path)
    assert reset.part == f"handlers.{UT}.tokensAtLastExtraction"
    assert f"handler '{UT}', field 'tokensAtLastExtraction'" in reset.reason
    assert "got 'many'" in reset.reason
    state = engine.slot_state(session, engine.slot(UT))
    assert isinstance(state, UpdateThresholdState)
    assert state.tokens_at_last_extraction == 0 and state.initialized is True  # the rest kept
    assert Path(reset.copy).read_text().count('"many"') == 1
    session.close()


def test_assignments_are_validated_and_written_through_in_camel_case():
    session = single_handler_session(UT)
    engine = session.engine
    state = engine.slot_state(session, engine.slot(UT))
    assert isinstance(state, UpdateThresholdState)
    assert session.handler_state(UT) == {}  # nothing saved until something is set
    state.last_extracted_uuid = "u-1"
    state.tokens_at_last_extraction = 12
    assert session.handler_state(UT) == {"lastExtractedUuid": "u-1", "tokensAtLastExtraction": 12}
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        state.tokens_at_last_extraction = -1
    assert session.handler_state(UT)["tokensAtLastExtraction"] == 12


def test_live_objects_sit_under_typed_keys_and_are_never_saved(tmp_path):
    engine = stenograph.Engine.from_preset("default")
    session = engine.open_session("s", state_dir=tmp_path)
    handler = engine.slot("forked-extraction").handler
    assert isinstance(handler, ForkedExtraction)
    writer = handler.writer(session)
    assert isinstance(writer, Writer) and handler.writer(session) is writer
    assert isinstance(writer.lock, type(threading.Lock()))
    key = stenograph.StateKey[list[int]]("mine")
    assert key not in session.stash and session.stash.get(key, None) is None
    session.stash[key] = [1]
    assert session.stash.setdefault(key, [2]) == [1]
    session.close()
    text = (tmp_path / "s" / "state.json").read_text()
    assert "busy" not in text and "lock" not in text and "mine" not in text


class CountState(stenograph.HandlerState):
    calls: int = Field(0, ge=0)


class Counter(stenograph.Handler[stenograph.HandlerSettings]):
    """A third-party handler with typed state: counts pre-calls across restarts."""

    name = "counter"
    State = CountState

    @stenograph.hookimpl
    def pre_call(self, state: CountState) -> None:
        state.calls += 1


def test_a_third_party_state_model_survives_a_restart(tmp_path):
    for expected in (1, 2):
        session = single_handler_session(Counter, state_dir=tmp_path, session_id="c")
        Conversation(session).user("hi").request()
        assert session.handler_state("counter") == {"calls": expected}
        session.close()


def test_handler_is_generic_in_its_settings():
    assert UpdateThreshold.__orig_bases__[0].__args__[0] is UpdateThreshold.Settings  # type: ignore[attr-defined]


class ListState(stenograph.HandlerState):
    flag: bool = False
    names: list[str] = Field(default_factory=list)


def test_assigning_what_a_field_holds_already_saves_only_changed_containers():
    backing: dict = {}
    state = ListState.bind(backing)
    state.flag = True
    backing["flag"] = "untouched"  # a second, equal assignment is not written through
    state.flag = True
    assert backing["flag"] == "untouched"
    state.names.append("a")  # changed in place, then assigned: saved
    state.names = state.names
    assert backing["names"] == ["a"]


class Colour(enum.StrEnum):
    RED = "red"


class MixedState(stenograph.HandlerState):
    flag: bool = False
    count: int = Field(0, ge=0)
    ratio: float = 0.0
    label: str | None = None
    kind: Literal["a", "b"] | None = None
    colour: Colour | None = None
    doubled: Annotated[int, PlainSerializer(lambda v: v * 2)] = 0
    halved: Annotated[int, PlainSerializer(lambda v: v // 2)] | None = None  # inside a union
    shouted: str = ""
    when: dict[str, int] = Field(default_factory=dict)

    @field_serializer("shouted")
    def _shout(self, value: str) -> str:
        return value.upper()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("flag", True),
        ("count", 3),
        ("count", "4"),  # validated to an int first
        ("ratio", 2),  # to a float
        ("ratio", float("inf")),
        ("label", "x"),
        ("label", None),
        ("kind", "b"),
        ("colour", "red"),
        ("doubled", 5),
        ("halved", 8),
        ("shouted", "hi"),
        ("when", {"a": 1}),
    ],
)
def test_an_assignment_saves_what_model_dump_gives(name, value):
    backing: dict = {"label": "before"}
    state = MixedState.bind(backing)
    setattr(state, name, value)
    dumped = state.model_dump(mode="json", include={name}, by_alias=True)
    assert {key: backing[key] for key in dumped} == dumped
    assert type(backing[next(iter(dumped))]) is type(next(iter(dumped.values())))


class Bounded(BaseModel):
    """Plain fields with bounds, a Literal, unions and a validated field."""

    model_config = ConfigDict(validate_assignment=True)
    flag: bool = False
    count: int = Field(0, ge=0)
    window: int = Field(1, gt=0, le=10)
    label: str | None = None
    kind: Literal["a", "b", 1] | None = None
    either: int | str = 0
    checked: int = 0

    @field_validator("checked")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("odd")
        return value


class BoundedState(stenograph.HandlerState, Bounded):
    """The same fields as a handler's state."""


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 12),
    st.integers(),
    st.floats(allow_nan=False),
    st.sampled_from(["a", "b", "c", "1", "true", ""]),
    st.text(max_size=4),
)


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(Bounded.model_fields)), value=VALUES)
def test_an_assignment_pydantic_would_keep_as_is_matches_pydantics(name, value):
    """Values of a field's exact type within its bounds skip ``validate_assignment``; what
    the field then holds, what is saved, and what is refused are pydantic's all the same."""
    backing: dict = {}
    state, twin = BoundedState.bind(backing), Bounded()
    try:
        setattr(twin, name, value)
    except ValidationError:
        with pytest.raises(ValidationError):
            setattr(state, name, value)
        return
    setattr(state, name, value)
    held, expected = getattr(state, name), getattr(twin, name)
    assert (type(held), held) == (type(expected), expected)
    default = Bounded().model_dump(mode="json")[name]  # what stays when nothing changed
    saved = backing.get(to_camel(name), default)
    assert saved == twin.model_dump(mode="json")[name]
