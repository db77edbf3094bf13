"""The host's list is the truth: a host that passes its whole conversation on each call
(as with the plain SDK) is compared with the history, message by message, and the
history follows it: new messages are appended, an edited earlier message is adopted, a
shorter list rewinds the history, and another conversation is refused."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .entries import Entry, copy_json
from .errors import StenographError


class ConversationMismatch(StenographError, ValueError):
    """The host's list is another conversation, not this session's."""


@dataclass(frozen=True)
class Synced:
    """What :meth:`Session.sync` did."""

    appended: tuple[Entry, ...] = ()
    edited: tuple[Entry, ...] = ()
    removed: int = 0


@dataclass
class Plan:
    """Keep the first ``keep`` entries, give ``edits`` (index -> host message) their new
    content, then append ``new``."""

    keep: int
    edits: dict[int, dict[str, Any]] = field(default_factory=dict)
    new: list[Any] = field(default_factory=list)


class HostMessages:
    """Host messages as the history holds them (role, JSON content). Content holding SDK
    objects is dumped once per list object (while its items stay the same objects)."""

    def __init__(self) -> None:
        self._dumped: dict[int, tuple[Any, tuple[int, ...], Any]] = {}

    def plain(self, message: Any) -> dict[str, Any]:
        """``message`` (a dict or an SDK model) as a dict with JSON content."""
        if type(message) is dict:  # the usual: no attribute looked up
            return message
        if hasattr(message, "model_dump"):
            return cast(dict[str, Any], message.model_dump(mode="json", exclude_none=True))
        if not isinstance(message, dict):
            return {"role": getattr(message, "role", None), "content": message}
        return message

    def content(self, message: dict[str, Any]) -> Any:
        """The message's content in JSON form."""
        content = message.get("content")
        if content is None:
            return ""
        if isinstance(content, str) or not isinstance(content, list):
            return content
        key, items = id(content), tuple(map(id, content))
        cached = self._dumped.get(key)
        if cached is not None and cached[0] is content and cached[1] == items:
            return cached[2]
        dumped = copy_json(content)
        self._dumped[key] = (content, items, dumped)
        return dumped

    def forget_except(self, messages: Sequence[Any]) -> None:
        """Keep cached dumps only for the content lists of ``messages`` (pruned once the
        cache holds many more than the list, so a call does not walk it)."""
        if len(self._dumped) <= 2 * len(messages) + 16:
            return
        live = {id(m.get("content")) for m in messages if isinstance(m, dict)}
        self._dumped = {k: v for k, v in self._dumped.items() if k in live}


def plan(entries: Sequence[Entry], given: Sequence[dict[str, Any]], host: HostMessages) -> Plan:
    """How the history must change to hold exactly ``given``. Raises
    ``ConversationMismatch`` when two or more messages overlap and none of them matches."""
    overlap = min(len(entries), len(given))
    same, keep = [], overlap
    for i in range(overlap):
        entry, message = entries[i], given[i]
        if message.get("role") != entry.role:
            keep = i
            break
        content = message.get("content")
        same.append(content == entry.content or host.content(message) == entry.content)
    if overlap >= 2 and not any(same):
        raise ConversationMismatch(
            f"the messages passed are another conversation: none of the first {len(same)}"
            f" matches the session's (of {len(entries)}). Open another session for it, or"
            " call session.truncate(after=None) to start this one over."
        )
    edits = {i: given[i] for i, ok in enumerate(same[:keep]) if not ok}
    return Plan(keep=keep, edits=edits, new=list(given[keep:]))
