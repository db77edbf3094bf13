"""Typed per-session state of a handler slot.

The persisted part is a ``HandlerState`` model beside the handler's ``Settings``: it is
validated when the session loads its state, and each assignment is validated and written
through to the slot's part of ``state.json`` (camelCase keys). The runtime-only part
(locks, clients, caches) lives in ``session.stash`` under typed ``StateKey``s and is
never persisted (pytest's ``StashKey``).
"""

from __future__ import annotations

from types import UnionType
from typing import Any, ClassVar, Generic, Literal, TypeVar, Union, cast, get_args, get_origin

from annotated_types import BaseMetadata
from pydantic import BaseModel, ConfigDict, PrivateAttr
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

T = TypeVar("T")
D = TypeVar("D")


class HandlerState(BaseModel):
    """Base of a handler's persisted state. Assign fields (do not mutate them in place):
    each assignment is validated and saved with the session state."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, validate_assignment=True, extra="ignore"
    )
    _backing: dict[str, Any] = PrivateAttr(default_factory=dict)
    #: Per class: each field's key in the persisted dict (``model_fields`` is slower), and
    #: the fields no serializer of the model's changes
    __state_keys__: ClassVar[dict[str, str]] = {}
    __plain_fields__: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__state_keys__ = {
            name: field.serialization_alias or field.alias or name
            for name, field in cls.__pydantic_fields__.items()
        }
        decorators = cls.__pydantic_decorators__
        serialized = {n for d in decorators.field_serializers.values() for n in d.info.fields}
        cls.__plain_fields__ = frozenset(
            name
            for name, field in cls.__pydantic_fields__.items()
            if not (decorators.model_serializers or {name, "*"} & serialized) and _plain(field)
        )

    @classmethod
    def bind(cls, backing: dict[str, Any]) -> HandlerState:
        """A view of ``backing`` (the slot's persisted dict), validated; raises pydantic's
        ``ValidationError`` naming each bad field."""
        state = cls.model_validate(backing)
        state._backing = backing
        return state

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        key = cls.__state_keys__.get(name)
        if key is None:
            super().__setattr__(name, value)
            return
        values = self.__dict__
        if name in values and _same(values[name], value):
            return  # already so (a handler setting a flag on every call): nothing to save
        cls.__pydantic_validator__.validate_assignment(self, name, value)  # as pydantic does
        backing = cast(dict[str, Any], self.__pydantic_private__)["_backing"]
        value = self.__dict__[name]  # validated (into a new __dict__)
        if name in cls.__plain_fields__ and type(value) in _AS_JSON:  # dumped as it is
            backing[key] = value
        else:
            backing.update(self.model_dump(mode="json", include={name}, by_alias=True))


def _plain(field: FieldInfo) -> bool:
    """Whether the field holds a bool, int, str or None (or a Literal of them), constrained
    at most: what its JSON dump leaves as it is."""
    return all(isinstance(m, BaseMetadata) for m in field.metadata) and _plain_type(
        field.annotation
    )


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


class Stash:
    """Live per-session values under typed keys; never persisted."""

    def __init__(self) -> None:
        self._values: dict[StateKey[Any], Any] = {}

    def __getitem__(self, key: StateKey[T]) -> T:
        return cast(T, self._values[key])

    def __setitem__(self, key: StateKey[T], value: T) -> None:
        self._values[key] = value

    def __delitem__(self, key: StateKey[Any]) -> None:
        del self._values[key]

    def __contains__(self, key: StateKey[Any]) -> bool:
        return key in self._values

    def get(self, key: StateKey[T], default: D) -> T | D:
        """The value under ``key``, or ``default``."""
        return cast(T, self._values[key]) if key in self._values else default

    def setdefault(self, key: StateKey[T], default: T) -> T:
        """The value under ``key``, set to ``default`` first when absent."""
        return cast(T, self._values.setdefault(key, default))
