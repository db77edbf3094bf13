"""The request ``Session.pre_call`` returns, typed as the official SDK types it, so that
``client.messages.create(**request, max_tokens=...)`` is checked by mypy and pyright."""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Required, TypedDict

from .speedups import C

if TYPE_CHECKING:  # the SDK is not loaded for this module at run time
    from anthropic.types import MessageParam, TextBlockParam, ToolUnionParam


class Request(TypedDict, total=False):
    """What ``pre_call`` returns: ``model`` and ``messages`` always, ``system`` and
    ``tools`` when given; other request fields passed to ``pre_call`` are there as given
    (not typed here)."""

    model: Required[str]
    messages: Required[list[MessageParam]]
    system: str | list[TextBlockParam]
    tools: list[ToolUnionParam]


class RequestMessages(list[dict[str, Any]]):
    """The list a request's ``messages`` is: a plain list that notes being changed
    (``touched``), so that the session can tell whether the list it handed out last time,
    once nobody else holds it, still says what it handed out (see :func:`sole_messages`)."""

    __slots__ = ("touched",)

    def __init__(self, messages: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(messages)
        self.touched = False


def _touching(name: str) -> Callable[..., Any]:
    method = getattr(list, name)

    def touch(self: RequestMessages, *args: Any) -> Any:
        self.touched = True
        return method(self, *args)

    touch.__name__ = touch.__qualname__ = name
    touch.__doc__ = method.__doc__
    return touch


for _name in (
    "__setitem__",
    "__delitem__",
    "__iadd__",
    "__imul__",
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "sort",
    "reverse",
):
    setattr(RequestMessages, _name, _touching(_name))


def _sole(
    request: dict[str, Any], alone: tuple[int, int] | None
) -> tuple[RequestMessages | None, tuple[int, int]]:
    """(the messages of ``request`` when its references and theirs are ``alone``'s and the
    list is untouched, else None; those references)."""
    messages = request.get("messages")
    if type(messages) is not RequestMessages or messages.touched:
        return None, (0, 0)
    counts = sys.getrefcount(request), sys.getrefcount(messages)
    return (messages if counts == alone else None), counts


class _Holder:
    last_request: dict[str, Any]


def _alone() -> tuple[int, int] | None:
    """The references :func:`_sole` counts for a request held by one attribute alone, and
    its messages by the request alone, handed on as :func:`sole_messages` hands it; None
    where reference counts say nothing (not CPython, or CPython without the GIL)."""
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    holder = _Holder()
    holder.last_request = {"messages": RequestMessages()}
    return (lambda request: _sole(request, None))(holder.last_request)[1]


_ALONE = _alone()


def setup_twin(c: Any) -> None:
    """Tell the C twin of the request list's update (``c.request_reuse``) which type the
    list is and what references it sees for a request held by one attribute alone."""
    holder = _Holder()
    holder.last_request = {"messages": RequestMessages()}
    c.request_setup(RequestMessages, holder)


if C is not None and _ALONE is not None:
    setup_twin(C)


def sole_messages(request: dict[str, Any]) -> RequestMessages | None:
    """The messages of ``request`` (the session's ``last_request``, passed as the attribute)
    when nothing else holds that request or its messages and nobody changed the list: the
    session may then bring the list up to date in place instead of copying the history's."""
    return _sole(request, _ALONE)[0]
