"""The outgoing-request guard: every rule the Messages API enforces on ``messages``.

``check_request(messages)`` checks a whole request: not empty, the first message from the
user, roles alternating, non-empty content, no empty or whitespace-only text block,
well-formed thinking blocks in assistant messages only, ``tool_use`` ids unique, and every
``tool_result`` answering a ``tool_use`` of the assistant message right before it (no
``tool_use`` left unanswered). The session runs the same rules incrementally on every
request (``History.request_problems``), checking only the messages that changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

ROLES = ("user", "assistant")
THINKING = ("thinking", "redacted_thinking")
_EMPTY_TEXT = "text is empty or whitespace only"
_THINKING_KEYS = {"thinking": ("thinking", "signature"), "redacted_thinking": ("data",)}


class MessageIds(NamedTuple):
    """What the guard needs of one request message (computed in one pass)."""

    role: Any
    tool_use_ids: tuple[Any, ...]
    tool_result_ids: tuple[Any, ...]
    content_problems: tuple[str, ...] = ()


class IdsView(Protocol):
    """What the guard reads of a request message: its ``MessageIds``, or the history's
    entry when the message is that entry alone and says the same (nothing more kept)."""

    @property
    def role(self) -> Any: ...
    @property
    def tool_use_ids(self) -> tuple[Any, ...]: ...
    @property
    def tool_result_ids(self) -> tuple[Any, ...]: ...
    @property
    def content_problems(self) -> tuple[str, ...]: ...


def message_ids(message: dict[str, Any]) -> MessageIds:
    """The role, tool_use ids, tool_result ids and content problems of a request message."""
    role = message.get("role")
    content = message.get("content")
    if isinstance(content, str):
        return MessageIds(role, (), (), () if content.strip() else (_EMPTY_TEXT,))
    if not isinstance(content, list) or not content:
        missing = "content is empty" if content in ([], "") else "content is missing"
        return MessageIds(role, (), (), (missing,))
    uses, results, problems = [], [], []
    for number, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            results.append(block.get("tool_use_id"))
        elif kind == "text":
            text = block.get("text")
            if not isinstance(text, str) or not text.strip():
                problems.append(f"block {number}: text block is empty or whitespace only")
        elif kind == "tool_use":
            uses.append(block.get("id"))
        elif kind in THINKING:
            problems.extend(_thinking_problems(block, number, role))
        elif kind is None:
            problems.append(f"block {number}: not a content block")
    return MessageIds(role, tuple(uses), tuple(results), tuple(problems))


def _thinking_problems(block: dict[str, Any], number: int, role: Any) -> list[str]:
    kind = block["type"]
    if role != "assistant":
        return [f"block {number}: {kind} block in a {role} message"]
    missing = [k for k in _THINKING_KEYS[kind] if not isinstance(block.get(k), str)]
    return [f"block {number}: {kind} block without {k}" for k in missing]


def check_request(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Every problem the Messages API would reject in ``messages`` (empty list: valid)."""
    ids = [message_ids(m) for m in messages]
    problems = check_roles([m.role for m in ids])
    problems += content_problems(ids, range(len(ids)))
    problems += check_unique(ids)
    return problems + check_pairs(ids, range(len(ids)))


def check_roles(roles: Sequence[Any], offset: int = 0) -> list[str]:
    """Not empty, first message from the user, roles known and alternating (``offset``:
    the index of ``roles[0]`` in the request, when checking a part of it)."""
    if not roles:
        return ["messages is empty: a request needs at least one message"] if not offset else []
    problems = []
    if offset == 0 and roles[0] != "user":
        problems.append(f"message 0: the first message must be from the user, not {roles[0]!r}")
    for i, role in enumerate(roles):
        if role not in ROLES:
            problems.append(f"message {offset + i}: role {role!r} is not one of {ROLES}")
        elif i and role == roles[i - 1]:
            problems.append(
                f"message {offset + i}: second {role} message in a row (roles must alternate;"
                " merge consecutive messages of one role)"
            )
    return problems


def content_problems(ids: Sequence[IdsView], indexes: Iterable[int], offset: int = 0) -> list[str]:
    """The content problems of the messages at ``indexes``."""
    return [f"message {offset + i}: {p}" for i in sorted(indexes) for p in ids[i].content_problems]


def check_unique(ids: Sequence[IdsView], offset: int = 0) -> list[str]:
    """tool_use ids used more than once in the request."""
    first: dict[Any, int] = {}
    problems = []
    for i, message in enumerate(ids):
        for tool_id in message.tool_use_ids:
            if tool_id in first:
                problems.append(
                    f"message {offset + i}: tool_use id {tool_id} already used in message"
                    f" {offset + first[tool_id]} (ids must be unique)"
                )
            else:
                first[tool_id] = i
    return problems


def thinking_blocks(content: Any) -> list[Any]:
    """The thinking and redacted_thinking blocks of some content, in order."""
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") in THINKING]


def check_pairs(ids: Sequence[IdsView], indexes: Iterable[int], offset: int = 0) -> list[str]:
    """Pairing problems around the given message indexes (each checked with its neighbours).
    A tool_use message answered in the same order, the usual case, is settled by one
    comparison."""
    problems: list[str] = []
    last = len(ids) - 1
    for j in sorted({k for i in indexes for k in (i - 1, i) if 0 <= k <= last}):
        message = ids[j]
        if message.role == "assistant":
            uses = message.tool_use_ids
            if uses and (j == last or ids[j + 1].tool_result_ids != uses):
                problems.extend(_check_one(ids, j, offset))
        elif message.tool_result_ids and not answers_in_order(ids[j - 1] if j else None, message):
            problems.extend(_check_one(ids, j, offset))
    return problems


def answers_in_order(previous: IdsView | None, message: IdsView) -> bool:
    """Whether ``message``'s tool results answer the tool calls of ``previous`` (an
    assistant message) one each, in their order: the usual case, settled at once."""
    return (
        previous is not None
        and previous.role == "assistant"
        and previous.tool_use_ids == (results := message.tool_result_ids)
        and (len(results) == 1 or len(set(results)) == len(results))
    )


def check_pairing(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Every pairing problem of a whole request (a subset of ``check_request``)."""
    return check_pairs([message_ids(m) for m in messages], range(len(messages)))


def _check_one(ids: Sequence[IdsView], i: int, offset: int) -> list[str]:
    message, at = ids[i], offset + i
    if message.role == "assistant":
        if not message.tool_use_ids:
            return []
        answered = set(ids[i + 1].tool_result_ids) if i + 1 < len(ids) else set()
        return [
            f"message {at}: tool_use {tool_id} has no tool_result after it"
            for tool_id in message.tool_use_ids
            if tool_id not in answered
        ]
    if not message.tool_result_ids:
        return []
    previous = ids[i - 1] if i > 0 else None
    offered = set(previous.tool_use_ids) if previous and previous.role == "assistant" else set()
    problems, seen = [], set()
    for tool_id in message.tool_result_ids:
        if tool_id not in offered:
            problems.append(
                f"message {at}: tool_result {tool_id} answers no tool_use of message {at - 1}"
            )
        elif tool_id in seen:
            problems.append(f"message {at}: tool_use {tool_id} answered twice")
        seen.add(tool_id)
    return problems
