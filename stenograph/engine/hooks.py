"""Calling a hook by name: ``session.hook.<name>(...)``, as ``config.hook`` in pytest."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import hookspecs

if TYPE_CHECKING:
    from .engine import Engine
    from .session import Session


class SessionHooks:
    """``session.hook.<name>(**arguments)``: call a hook on every slot of the session's
    engine, in preset order (see :meth:`Engine.call_hook`), as ``config.hook`` in pytest."""

    __slots__ = ("_engine", "_session")

    def __init__(self, engine: Engine, session: Session) -> None:
        self._engine, self._session = engine, session

    def __getattr__(self, hook_name: str) -> Callable[..., Any]:
        check_hook(hook_name)
        return functools.partial(self._engine.call_hook, hook_name, self._session)


def check_hook(hook_name: str) -> None:
    """An ``AttributeError`` naming the hooks (and the nearest one) unless ``hook_name`` is
    one of them."""
    if hook_name in _HOOKS:
        return
    near = difflib.get_close_matches(hook_name, hookspecs.SLOT_HOOKS, n=1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    raise AttributeError(
        f"no hook {hook_name!r}; the hooks are {', '.join(hookspecs.SLOT_HOOKS)}.{hint}"
    )


_HOOKS = frozenset(hookspecs.SLOT_HOOKS)
