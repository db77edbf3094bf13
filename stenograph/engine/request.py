"""The request ``Session.pre_call`` returns, typed as the official SDK types it, so that
``client.messages.create(**request, max_tokens=...)`` is checked by mypy and pyright."""

from __future__ import annotations

from typing import TYPE_CHECKING, Required, TypedDict

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
