"""Event types: frozen keyword-only dataclasses whose ``__init__`` sets the slots directly
(``stenograph.engine.events.event``); they behave as ``@dataclass(frozen=True,
kw_only=True, slots=True)`` would make them."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from helpers import compiled_twins, under_debug_allocator
from hypothesis import given, settings
from hypothesis import strategies as st

import stenograph
from stenograph.engine import events
from stenograph.engine.events import Custom, Event, EventLog, event

EVENT_TYPES = sorted(
    (
        value
        for name in stenograph.__all__
        if inspect.isclass(value := getattr(stenograph, name)) and issubclass(value, Event)
    ),
    key=lambda cls: cls.__name__,
)


def _values(cls: type[Event]) -> dict[str, object]:
    """A distinct value for every field without a default."""
    return {
        f.name: f"{cls.__name__}.{f.name}"
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda cls: cls.__name__)
def test_every_event_type_is_built_as_its_dataclass_would_build_it(cls):
    values = _values(cls)
    made = cls(**values)
    for f in dataclasses.fields(cls):
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        assert getattr(made, f.name) == values.get(f.name, default)
    assert not hasattr(made, "__dict__")  # slots
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.time = 0.0  # type: ignore[misc]
    assert dataclasses.replace(made, time=2.0).time == 2.0
    assert made == cls(**values)
    with pytest.raises(TypeError):
        cls(*values.values())  # keyword-only
    with pytest.raises(TypeError):
        cls(**values, unknown=1)
    if values:
        with pytest.raises(TypeError):
            cls(**dict(list(values.items())[1:]))  # a required field missing


def test_a_default_factory_gives_each_event_its_own_value():
    first, second = Custom(time=0, name="a"), Custom(time=0, name="b")
    assert first.data == {} and first.data is not second.data


def test_post_init_runs_and_init_false_fields_are_refused():
    seen = []

    @event
    class Checked(Event):
        size: int = 0

        def __post_init__(self) -> None:
            seen.append(self.size)

    Checked(time=1.0, size=3)
    assert seen == [3]
    with pytest.raises(TypeError, match="field 'later' has init=False"):

        @event
        class Derived(Event):
            later: int = dataclasses.field(default=0, init=False)


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(0, 12),
    start=st.none() | st.integers(-15, 15),
    stop=st.none() | st.integers(-15, 15),
    step=st.none() | st.sampled_from([1, 2, -1, -3]),
)
def test_the_event_log_is_read_as_a_list_is(size, start, stop, step):
    made = [Custom(time=float(i), name=str(i)) for i in range(size)]
    log = EventLog(made)
    assert log[start:stop:step] == made[start:stop:step]
    assert log == made and made == log and list(reversed(log)) == made[::-1]
    if size:
        assert log[-1] is made[-1] and log[0] is made[0]


def test_a_session_keeps_the_newest_max_events_and_on_event_gets_all():
    heard = []
    engine = stenograph.Engine.from_preset("inactivity-only")
    session = engine.open_session("s", state_dir=None, max_events=3, on_event=heard.append)
    for i in range(5):
        session.record(Custom(time=float(i), name=str(i)))
    assert [e.name for e in session.events] == ["2", "3", "4"]
    assert session.events[1:] == heard[3:] and len(heard) == 5
    unbounded = engine.open_session("u", state_dir=None, max_events=None)
    for i in range(2_000):
        unbounded.record(Custom(time=float(i), name=str(i)))
    assert len(unbounded.events) == 2_000 and unbounded.events[1_998:][0].name == "1998"


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda cls: cls.__name__)
def test_both_twins_of_set_slots_set_the_same_slots(cls):
    c = compiled_twins()
    names = [f.name for f in dataclasses.fields(cls)]
    descriptors = tuple(getattr(cls, name) for name in names)
    values = tuple(object() for _ in names)
    made = []
    for twin in (c.set_slots, events._set_slots):
        out = object.__new__(cls)
        twin(out, descriptors, values)
        made.append(out)
        assert all(getattr(out, name) is value for name, value in zip(names, values, strict=True))
    assert made[0] == made[1]


@pytest.mark.parametrize("twin", ["C", "Python"])
def test_set_slots_refuses_what_is_not_a_slot_of_the_object(twin):
    c = compiled_twins()
    set_slots = c.set_slots if twin == "C" else events._set_slots
    out = object.__new__(Custom)
    with pytest.raises(TypeError, match="two tuples of one length"):
        set_slots(out, (Custom.name,), ())
    with pytest.raises((TypeError, AttributeError)):
        set_slots(out, (1,), ("a",))  # no descriptor
    with pytest.raises(TypeError):
        set_slots(out, (Event.time, stenograph.EntriesMemorized.tokens_saved), (1.0, 2))


def test_events_made_in_c_hold_and_release_their_values_under_the_debug_allocator():
    compiled_twins()
    out = under_debug_allocator(
        "import gc, sys\n"
        "from stenograph.engine.events import Custom\n"
        "from stenograph._speedups import set_slots\n"
        "slots = (Custom.time, Custom.handler, Custom.slot, Custom.name, Custom.data)\n"
        "name, data = 'n' * 50, {'k': 1}\n"
        "before = sys.getrefcount(name), sys.getrefcount(data)\n"
        "made = [object.__new__(Custom) for _ in range(1000)]\n"
        "for each in made: set_slots(each, slots, (1.0, '', -1, name, data))\n"
        "set_slots(made[0], slots, (2.0, 'h', 0, name, data))  # set again: the old let go\n"
        "assert sys.getrefcount(name) == before[0] + 1000\n"
        "class Other:\n"
        "    __slots__ = ('x',)\n"
        "try:\n"
        "    set_slots(made[0], (Custom.name, Other.x), (name, data))\n"
        "    raise SystemExit('a slot of another class was set')\n"
        "except TypeError: pass\n"
        "del made, each; gc.collect()\n"
        "print(sys.getrefcount(name) == before[0], sys.getrefcount(data) == before[1])\n"
    )
    assert out.split() == ["True", "True"]
