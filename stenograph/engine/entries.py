"""History entries: an Anthropic message plus what stenograph knows about it."""

from __future__ import annotations

import copy
import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeGuard

from .clock import NUMBERS, format_timestamp, parse_timestamp
from .speedups import C

ROLES = ("user", "assistant")
USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)
# The cache-write split by TTL (the API's ``usage.cache_creation``), kept flat beside them.
TTL_USAGE_KEYS = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
_ALL_USAGE_KEYS = USAGE_KEYS + TTL_USAGE_KEYS
_NO_USAGE = (0,) * len(USAGE_KEYS)  # what each of USAGE_KEYS counts when missing


@dataclass(eq=False, slots=True)
class Entry:  # built with every field given by position: keywords double the cost
    """One message of the history. ``content`` is never changed after append. ``tokens``
    (tiktoken estimate of ``content``) and ``reduced`` (of its usual memorized form) are -1
    until counted; ``prepared``: that usual memorized form, made with the counts (``content``
    itself when it has no tool result: sent as is); ``render`` holds what is sent when it is
    not ``content``; ``cache`` (other counts) is made on first use."""

    role: str
    content: str | list[dict[str, Any]]
    uuid: str
    timestamp: float | None
    index: int = -1
    usage: dict[str, int] | None = None
    memorized: bool = False
    memo: dict[str, Any] | None = None
    sent_content: str | list[dict[str, Any]] | None = None
    _meta: dict[str, Any] | None = None
    tool_use_ids: tuple[str, ...] = ()
    tool_result_ids: tuple[str, ...] = ()
    #: the content alone is a message the request guard finds nothing wrong with, whose
    #: tool ids are the entry's (text and tool blocks only): the guard reads the entry itself
    plain: bool = field(default=False, repr=False)
    tokens: int = field(default=-1, repr=False)
    reduced: int = field(default=-1, repr=False)
    prepared: str | list[dict[str, Any]] | None = field(default=None, repr=False)
    render: str | list[dict[str, Any]] | None = field(default=None, repr=False)
    cache: dict[Any, Any] | None = field(default=None, repr=False)
    #: what the request guard reads of a message that is this entry alone (``guard.IdsView``):
    #: a message with content problems keeps its own ``MessageIds``
    content_problems: ClassVar[tuple[str, ...]] = ()

    @property
    def meta(self) -> dict[str, Any]:
        """What else the host or the API said about the message (made on first use)."""
        if self._meta is None:
            self._meta = {}
        return self._meta

    @meta.setter
    def meta(self, value: dict[str, Any]) -> None:
        self._meta = value

    @property
    def has_tools(self) -> bool:
        """Whether the entry holds a tool_use or a tool_result block."""
        return bool(self.tool_use_ids or self.tool_result_ids)

    def blocks(self) -> list[dict[str, Any]]:
        """The content as a list of blocks (a string becomes one text block)."""
        if isinstance(self.content, str):
            return [{"type": "text", "text": self.content}] if self.content else []
        return self.content

    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools this entry calls."""
        return tuple(b.get("name", "") for b in self.blocks() if b.get("type") == "tool_use")

    def usage_total(self) -> int | None:
        """input + cache creation + cache read + output tokens, when usage was reported."""
        usage = self.usage
        return sum(map(usage.get, USAGE_KEYS, _NO_USAGE)) if usage else None

    def message(self) -> dict[str, Any]:
        """The full Anthropic message, as the host appended it."""
        return {"role": self.role, "content": self.content}

    def to_record(self) -> dict[str, Any]:
        """A JSON-safe dict for the session journal."""
        record: dict[str, Any] = {"role": self.role, "content": self.content, "uuid": self.uuid}
        if self.timestamp is not None:
            record["timestamp"] = format_timestamp(self.timestamp)
        if self.usage:
            record["usage"] = self.usage
        if self._meta:
            record["meta"] = self._meta
        return record


_prefix = ""
_counter = itertools.count()


def _new_prefix() -> None:
    """Draw this process's id prefix (again in a forked child) and restart the counter."""
    global _prefix, _counter
    h = os.urandom(10).hex()
    _prefix = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-"
    _counter = itertools.count()


_new_prefix()
os.register_at_fork(after_in_child=_new_prefix)


def new_uuid() -> str:
    """A new id shaped like a version 4 UUID: 74 random bits drawn once per process, then a
    counter (unique in the process, and across processes but for a 2**-74 chance)."""
    return f"{_prefix}{next(_counter):012x}"


class EntryError(ValueError):
    """A message given to ``Session.append`` cannot be used."""


RESPONSE_META = ("id", "model", "stop_reason")
# epoch seconds a day inside years 1-9999 UTC: formatted without fail (others are tried)
SURELY_IN_RANGE = (-62_135_596_800 + 86_400, 253_402_300_799 - 86_400)


def make_entry(message: Any, now: float, *, owned: bool = False) -> Entry:
    """Validate and copy a host message into an Entry (uuid/timestamp filled when absent);
    ``owned``: the message is a fresh object nobody else holds, so it is not copied. In C
    for a message holding a role and content alone (``C.make_entry``)."""
    entry = None if C is None else C.make_entry(message, now, owned)
    return _make_entry(message, now, owned) if entry is None else entry


def _make_entry(message: Any, now: float, owned: bool) -> Entry:
    """:func:`make_entry` in Python (the C twin's reference: tests hold the two equal)."""
    role = _role(message, "a message")
    content, uses, results, plain = _content(message.get("content"), owned)
    entry = Entry(
        role, content, "", float(now), -1, None, False, None, None, None, uses, results, plain
    )
    if len(message) > 2:  # more than role and content
        meta = message.get("meta")
        entry._meta = dict(meta) if isinstance(meta, dict) and meta else None
        if role == "assistant":
            entry.usage = _usage(message.get("usage"))
    _stamp(entry, message)
    return entry


def _role(message: Any, what: str) -> str:
    """The role of ``message``, which must be a dict; an ``EntryError`` otherwise."""
    if not isinstance(message, dict):
        raise EntryError(f"{what} must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if role not in ROLES:
        raise EntryError(f"message role must be 'user' or 'assistant', got {role!r}")
    return str(role)


def response_entry(response: Any, now: float) -> Entry:
    """The model's response (an anthropic ``Message``, or a dict shaped like one) as an
    assistant Entry: content, usage, uuid/timestamp when given, id/model/stop_reason in meta."""
    if isinstance(response, dict):
        data, owned = response, False
    elif hasattr(response, "model_dump"):  # dumped to new objects: no copy needed
        data, owned = response.model_dump(mode="json", exclude_none=True), True
    else:
        raise TypeError(
            f"post_sampling expects an anthropic Message or a dict, got {response!r:.80}"
        )
    entry = None if C is None else C.response_entry(data, now, owned)
    return _response_entry(data, now, owned) if entry is None else entry


def _response_entry(data: dict[str, Any], now: float, owned: bool) -> Entry:
    """:func:`response_entry` of the response as a dict, in Python (the C twin's reference:
    uuid and timestamp as given, or drawn and ``now``)."""
    content, uses, results, plain = _content(data.get("content", []), owned)
    usage = _usage(data.get("usage"))
    meta = {k: data[k] for k in RESPONSE_META if data.get(k) is not None} or None
    known = ("assistant", content, "", float(now), -1, usage, False, None, None, meta)
    entry = Entry(*known, uses, results, plain)
    _stamp(entry, data)
    return entry


def _stamp(entry: Entry, message: dict[str, Any]) -> None:
    """The message's uuid and timestamp when it has them (a new uuid otherwise)."""
    uid = message.get("uuid")
    entry.uuid = str(uid) if uid else new_uuid()
    if "timestamp" in message:
        try:
            entry.timestamp = parse_timestamp(message["timestamp"])
            if (
                entry.timestamp is not None
                and not SURELY_IN_RANGE[0] < entry.timestamp < SURELY_IN_RANGE[1]
            ):
                format_timestamp(entry.timestamp)  # the journal must be able to hold it
        except (OverflowError, ValueError, OSError):
            raise EntryError(
                f"timestamp {message['timestamp']!r:.80} is out of range (years 1-9999 UTC)"
            ) from None
        if entry.timestamp is None:
            entry.meta["invalid_timestamp"] = repr(message["timestamp"])[:80]


def _content(
    value: Any, owned: bool
) -> tuple[str | list[dict[str, Any]], tuple[str, ...], tuple[str, ...], bool]:
    """(content, tool_use ids, tool_result ids, plain: see ``Entry.plain``), the blocks
    checked and copied."""
    if isinstance(value, str):
        return value, (), (), not (value.isspace() or not value)
    if value is None:
        return "", (), (), False
    if not isinstance(value, list):
        raise EntryError(f"message content must be a string or a list of blocks, got {value!r:.80}")
    blocks = value if owned else copy_json(value)
    scanned = None if C is None else C.scan_blocks(blocks)
    return (blocks, *(_scan_blocks(blocks) if scanned is None else scanned))


def _scan_blocks(blocks: list[Any]) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """(tool_use ids, tool_result ids, plain) of copied blocks (``C.scan_blocks`` in C)."""
    uses, results, plain = [], [], bool(blocks)
    for i, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use" or kind == "server_tool_use":
            tool_id = block.get("id")
            if isinstance(tool_id, str):
                uses.append(tool_id)
            if kind != "tool_use" or not isinstance(tool_id, str):
                plain = False  # the guard pairs tool_use blocks only, by their ids
        elif kind == "tool_result":
            tool_id = block.get("tool_use_id")
            if isinstance(tool_id, str):
                results.append(tool_id)
            else:
                plain = False
        elif kind == "text":
            text = block.get("text")
            if type(text) is not str or not text or text.isspace():
                plain = False  # a problem of the guard's
        elif not isinstance(kind, str):
            raise EntryError(f"content block {i} must be a dict with a 'type', got {block!r:.80}")
        else:
            plain = False  # thinking, images...: the guard reads the message itself
    return tuple(uses), tuple(results), plain


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data: every dict and list copied, strings and numbers (which
    nothing can change) shared with the original; pydantic models (e.g. the SDK's content
    blocks) dumped to JSON, other objects deep-copied."""
    try:
        return _copy(value) if C is None else C.copy_json(value, _copy)
    except RecursionError:
        raise EntryError("message content is nested too deeply") from None


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    if isinstance(value, dict):  # subclasses too, copied into plain dicts and lists
        return {k: v if type(v) in _ATOMS else _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _ATOMS else _copy(v) for v in value]
    if isinstance(value, str | int | float | bool | None):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    return copy.deepcopy(value)


def _usage(value: Any) -> dict[str, int] | None:
    if value is None:
        return None
    if type(value) is not dict:  # a plain dict (a journal's) has no model_dump
        if hasattr(value, "model_dump"):
            value = value.model_dump()
        if not isinstance(value, dict):
            return None
    split = value.get("cache_creation")
    flat = {**value, **split} if isinstance(split, dict) else value
    usage = {}
    for key in _ALL_USAGE_KEYS:
        number = flat.get(key)
        if type(number) is int:  # the usual: checked in one step
            if number >= 0:
                usage[key] = number
        elif _count(number):
            usage[key] = int(number)
    return usage or None


def _count(number: Any) -> TypeGuard[int | float]:
    """A number of another type that counts tokens: not a bool, NaN or infinity."""
    return isinstance(number, NUMBERS) and not isinstance(number, bool) and 0 <= number < math.inf


def entry_from_record(record: dict[str, Any]) -> Entry:
    """Rebuild an Entry from its journal record, freshly parsed: content and meta are taken,
    not copied; a record of the wrong shape raises ``EntryError``."""
    role = _role(record, "an entry record")
    content, uses, results, plain = _content(record.get("content"), True)
    usage = _usage(record.get("usage")) if role == "assistant" else None
    meta = record.get("meta")
    meta = meta if isinstance(meta, dict) and meta else None
    entry = Entry(role, content, "", None, -1, usage, False, None, None, meta, uses, results, plain)
    _stamp(entry, record)
    return entry


def setup_twins(c: Any) -> None:
    """Tell the C twins (``c``: ``stenograph._speedups``) what they build and read."""
    c.entries_setup(Entry, new_uuid, _usage, _ALL_USAGE_KEYS, RESPONSE_META, SURELY_IN_RANGE)


if C is not None:
    setup_twins(C)
