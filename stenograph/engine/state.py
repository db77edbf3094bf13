"""Typed per-session state of a handler slot.

The persisted part is a ``HandlerState`` model beside the handler's ``Settings``: it is
validated when the session loads its state, and each assignment is validated and written
through to the slot's part of ``state.json`` (camelCase keys). The runtime-only part
(locks, clients, caches) lives in ``session.stash`` under typed ``StateKey``s and is
never persisted (pytest's ``StashKey``).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import ge as _ge
from operator import gt as _gt
from operator import le as _le
from operator import lt as _lt
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
)

from annotated_types import BaseMetadata, Ge, Gt, Le, Lt
from pydantic import BaseModel, ConfigDict, PrivateAttr
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

T = TypeVar("T")
D = TypeVar("D")
#: A state field's key in the persisted dict, whether it is plain, its as-is test
_Assigned = tuple[str, bool, Callable[[Any], bool] | None]


class HandlerState(BaseModel):
    """Base of a handler's persisted state. Assign fields (do not mutate them in place):
    each assignment is validated and saved with the session state."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, validate_assignment=True, extra="ignore"
    )
    _backing: dict[str, Any] = PrivateAttr(default_factory=dict)
    #: Per class and field (``model_fields`` is slower): its key in the persisted dict,
    #: whether no serializer changes it, and for a plain field without a validator a test
    #: of the values pydantic would keep as they are (those skip ``validate_assignment``)
    __assigned__: ClassVar[dict[str, _Assigned]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        decorators = cls.__pydantic_decorators__
        serialized = {n for d in decorators.field_serializers.values() for n in d.info.fields}
        validated = {n for d in decorators.field_validators.values() for n in d.info.fields}
        unchecked = not (decorators.model_validators or cls.model_config.get("frozen"))
        cls.__assigned__ = {}
        for name, field in cls.__pydantic_fields__.items():
            plain = _plain(field) and not (decorators.model_serializers or {name, "*"} & serialized)
            as_is = plain and unchecked and not ({name, "*"} & validated or field.frozen)
            key = field.serialization_alias or field.alias or name
            cls.__assigned__[name] = (key, plain, _kept_as_is(field) if as_is else None)

    @classmethod
    def bind(cls, backing: dict[str, Any]) -> HandlerState:
        """A view of ``backing`` (the slot's persisted dict), validated; raises pydantic's
        ``ValidationError`` naming each bad field."""
        state = cls.model_validate(backing)
        state._backing = backing
        return state

    def __setattr__(self, name: str, value: Any) -> None:
        assigned = type(self).__assigned__.get(name)
        if assigned is None:
            super().__setattr__(name, value)
            return
        key, plain, as_is = assigned
        values = self.__dict__
        if name in values and _same(values[name], value):
            return  # already so (a handler setting a flag on every call): nothing to save
        if as_is is not None and as_is(value):  # what pydantic would keep, unvalidated
            values[name] = value
            self.__pydantic_fields_set__.add(name)
        else:
            type(self).__pydantic_validator__.validate_assignment(self, name, value)
            value = self.__dict__[name]  # validated (into a new __dict__)
        backing = cast(dict[str, Any], self.__pydantic_private__)["_backing"]
        if plain and type(value) in _AS_JSON:  # dumped as it is
            backing[key] = value
        else:
            backing.update(self.model_dump(mode="json", include={name}, by_alias=True))


def _plain(field: FieldInfo) -> bool:
    """Whether the field holds a bool, int, str or None (or a Literal of them), constrained
    at most: what its JSON dump leaves as it is."""
    return all(isinstance(m, BaseMetadata) for m in field.metadata) and _plain_type(
        field.annotation
    )


def _kept_as_is(field: FieldInfo) -> Callable[[Any], bool] | None:
    """A test of the values pydantic keeps as they are in ``field`` (a plain one): of a type
    it names exactly, within its bounds; None when a constraint is not a bound."""
    accepted = _accepted(field.annotation)
    for bound in field.metadata:
        compare = _BOUNDS.get(type(bound))
        if compare is None:
            return None
        accepted = _within(accepted, compare, getattr(bound, compare.__name__))
    return accepted


def _within(
    accepted: Callable[[Any], bool], compare: Callable[[Any, Any], bool], bound: Any
) -> Callable[[Any], bool]:
    return lambda value: accepted(value) and type(value) is int and compare(value, bound)


def _accepted(annotation: Any) -> Callable[[Any], bool]:
    if annotation in _AS_JSON:
        return lambda value: type(value) is annotation
    args = get_args(annotation)
    if get_origin(annotation) is Literal:
        allowed = {(type(a), a) for a in args}
        return lambda value: (type(value), value) in allowed
    members = tuple(a for a in args if a in _AS_JSON)  # a Union of plain types
    if len(members) == len(args):
        return lambda value: type(value) in members
    tests = [_accepted(a) for a in args]
    return lambda value: any(test(value) for test in tests)


_BOUNDS: dict[type, Callable[[Any, Any], bool]] = {Ge: _ge, Gt: _gt, Le: _le, Lt: _lt}


def _plain_type(annotation: Any) -> bool:
    if annotation in _AS_JSON:
        return True
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return all(type(a) in _AS_JSON for a in args)
    return origin in (Union, UnionType) and all(_plain_type(a) for a in args)


_SCALARS = (bool, int, float, str, type(None))
_AS_JSON = (bool, int, str, type(None))  # what a JSON dump leaves as it is (not NaN: a float)


def _same(old: Any, new: Any) -> bool:
    """Whether assigning ``new`` over ``old`` changes nothing: an equal scalar of the same
    type (a container may have been changed in place, so it is always saved)."""
    return type(old) is type(new) and type(new) in _SCALARS and old == new


class StateKey(Generic[T]):
    """A typed key of ``session.stash``: ``BUSY = StateKey[bool]()``."""

    __slots__ = ("name",)

    def __init__(self, name: str = "") -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<StateKey {self.name or hex(id(self))}>"


class Stash(dict[StateKey[Any], Any]):
    """Live per-session values under typed keys; never persisted. A dict, so that reading
    it (on every phase call) runs no Python code; typed through the key."""

    __slots__ = ()

    if TYPE_CHECKING:

        def __getitem__(self, key: StateKey[T]) -> T: ...

        def __setitem__(self, key: StateKey[T], value: T) -> None: ...

        def get(self, key: StateKey[T], default: D) -> T | D: ...  # type: ignore[override]

        def setdefault(self, key: StateKey[T], default: T) -> T: ...  # type: ignore[override]
