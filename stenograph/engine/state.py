"""Typed per-session state of a handler slot.

The persisted part is a ``HandlerState`` model beside the handler's ``Settings``: it is
validated when the session loads its state, and each assignment is validated and written
through to the slot's part of ``state.json`` (camelCase keys). The runtime-only part
(locks, clients, caches) lives in ``session.stash`` under typed ``StateKey``s and is
never persisted (pytest's ``StashKey``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict, PrivateAttr
from pydantic.alias_generators import to_camel

T = TypeVar("T")
D = TypeVar("D")


class HandlerState(BaseModel):
    """Base of a handler's persisted state. Assign fields (do not mutate them in place):
    each assignment is validated and saved with the session state."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, validate_assignment=True, extra="ignore"
    )
    _backing: dict[str, Any] = PrivateAttr(default_factory=dict)
    #: Per class: the field names (pydantic's ``model_fields`` is a slower descriptor).
    __state_fields__: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__state_fields__ = frozenset(cls.__pydantic_fields__)

    @classmethod
    def bind(cls, backing: dict[str, Any]) -> HandlerState:
        """A view of ``backing`` (the slot's persisted dict), validated; raises pydantic's
        ``ValidationError`` naming each bad field."""
        state = cls.model_validate(backing)
        state._backing = backing
        return state

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        if name not in cls.__state_fields__:
            super().__setattr__(name, value)
            return
        values = self.__dict__
        if name in values and _same(values[name], value):
            return  # already so (a handler setting a flag on every call): nothing to save
        super().__setattr__(name, value)
        self._backing.update(self.model_dump(mode="json", include={name}, by_alias=True))


_SCALARS = (bool, int, float, str, type(None))


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
