"""The session history: entries, their indexes, the rendered request kept up to date
incrementally, and token tallies. No operation rescans the whole history per call."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .entries import Entry
from .guard import (
    IdsView,
    MessageIds,
    answers_in_order,
    check_pairs,
    check_roles,
    check_unique,
    content_problems,
    message_ids,
    thinking_blocks,
)
from .rendering import (
    base_content,
    has_results,
    merge_run,
    reduce_content,
    render_content,
    render_content_is_base,
)
from .request import RequestMessages
from .speedups import C
from .tokens import ESTIMATORS, content_tokens, token_bound

NO_MEMO: dict[str, Any] = {"keep": (), "reduce_inputs": False}
_NO_IDS = MessageIds(None, (), ())  # a message's place until its ids are set
# counts of what is sent, dropped when it changes (the full content's stay)
_DERIVED_COUNTS = (*(("sent", e) for e in ESTIMATORS), ("base", "tiktoken"))


@dataclass
class _Anchor:
    """Context size bookkeeping for one estimator: the newest usage and what came after."""

    upto: int = 0
    total: int = 0
    after: int = 0


@dataclass
class _Totals:
    """Running full / sent token sums for one estimator (kept only once asked for)."""

    upto: int = 0
    full: int = 0
    sent: int = 0


class History:
    """Every entry in order, with the request messages they render to."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.by_uuid: dict[str, Entry] = {}
        self.tool_use_entry: dict[str, Entry] = {}
        self.tool_result_entry: dict[str, Entry] = {}
        self.unmemorized_tool_entries: dict[int, Entry] = {}
        self._messages: list[dict[str, Any]] = []
        self._ids: list[IdsView] = []  # the request guard's view of _messages
        self._use_counts: dict[Any, int] = {}  # tool_use ids over _messages
        self._repeated_uses = 0  # tool_use ids counted more than once
        self._runs: list[Entry | list[Entry]] = []  # per message: its entry, or a list of two+
        self._message_of = array("q")  # per entry index: its message (-1 or absent: none)
        self._changed: set[int] = set()
        self._anchors: dict[str, _Anchor] = {}
        self._totals: dict[str, _Totals] = {}
        self._tool_calls = array("q", [0])  # tool_use blocks up to each entry (no int objects)
        self.window_start = 0
        self.preamble: list[dict[str, Any]] = []
        self._window_message = 0
        self._before_window: dict[str, int] = {}
        # the request list handed out last: messages[_handed_start:_handed], the preamble
        # none (start -1: a copy of another shape); _replaced: messages changed below _handed
        self._handed, self._handed_start = 0, -1
        self._replaced: set[int] = set()

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __getitem__(self, index: int) -> Entry:
        return self.entries[index]

    def add(self, entry: Entry) -> Entry:
        """Append ``entry`` (uuid must be new) and extend the rendered messages: in C for
        an entry appended as hosts append (``C.history_add``), else by :meth:`_add`."""
        if C is None or not C.history_add(self, entry):
            self._add(entry)
        return entry

    def _add(self, entry: Entry) -> None:
        """:meth:`add` in Python (the C twin's reference: tests hold the two equal)."""
        if entry.uuid in self.by_uuid:
            raise ValueError(f"an entry with uuid {entry.uuid!r} is already in the history")
        entry.index = len(self.entries)
        self.entries.append(entry)
        self.by_uuid[entry.uuid] = entry
        calls = 0
        if entry.tool_use_ids or entry.tool_result_ids:
            for tool_id in entry.tool_use_ids:
                self.tool_use_entry.setdefault(tool_id, entry)
            for tool_id in entry.tool_result_ids:
                self.tool_result_entry.setdefault(tool_id, entry)
            if not entry.memorized:
                self.unmemorized_tool_entries[entry.index] = entry
            if entry.role == "assistant":
                calls = len(entry.tool_use_ids)
        self._tool_calls.append(self._tool_calls[-1] + calls)
        if entry.content:
            self._place(entry)

    def rebuild(self, entries: list[Entry]) -> None:
        """Start over from ``entries`` (after a host edit or a rewind: rare, O(n)). The
        window is cleared; the caller sets it again when it still holds."""
        History.__init__(self)
        for entry in entries:
            self.add(entry)

    def take_content(self, entry: Entry, fresh: Entry) -> list[Entry]:
        """``entry`` holds ``fresh``'s content from now on (a handler's replacement for the
        old content is dropped; a memorized entry stays memorized); what was counted or
        rendered for it, and for the results of its tool calls (their placeholders name
        the tool), is dropped. Returns those entries, to count again; the caller rebuilds."""
        ids = {*entry.tool_use_ids, *fresh.tool_use_ids}
        entry.content, entry.sent_content = fresh.content, None
        entry.tool_use_ids, entry.tool_result_ids = fresh.tool_use_ids, fresh.tool_result_ids
        entry.plain = fresh.plain
        answers = {id(e): e for i in ids if (e := self.tool_result_entry.get(i)) is not None}
        dropped = [entry, *(e for e in answers.values() if e is not entry)]
        entry.tokens = -1
        for each in dropped:
            each.reduced, each.prepared, each.render, each.cache = -1, None, None, None
        return dropped

    def tool_calls_after(self, uuid: str | None) -> int:
        """tool_use blocks in assistant entries after the entry ``uuid`` (all of them when
        ``uuid`` is None or unknown); O(1)."""
        entry = self.by_uuid.get(uuid) if uuid else None
        before = self._tool_calls[entry.index + 1] if entry is not None else 0
        return self._tool_calls[-1] - before

    def tool_name(self, tool_use_id: str) -> str:
        """The name of the tool a tool_use id called ('' when unknown)."""
        entry = self.tool_use_entry.get(tool_use_id)
        if entry is None or isinstance(entry.content, str):
            return ""
        for block in entry.content:
            if block.get("id") == tool_use_id:
                return str(block.get("name", ""))
        return ""

    # rendering -------------------------------------------------------------------------

    def rendered(self, entry: Entry) -> str | list[dict[str, Any]]:
        """What is sent for ``entry`` (cached until the entry is marked again)."""
        if not entry.memorized and entry.sent_content is None:
            return entry.content
        if entry.render is None:
            if entry.prepared is not None and _usual(entry, entry.memo or {}):
                entry.render = entry.prepared
            else:
                entry.render = render_content(entry, self.tool_name)
        return entry.render

    def _place(self, entry: Entry) -> None:
        runs, message_of = self._runs, self._message_of
        if len(message_of) < entry.index:  # entries without content are in no message
            message_of.extend([-1] * (entry.index - len(message_of)))
        last = runs[-1] if runs else None
        if last is not None and _first(last).role == entry.role:
            if isinstance(last, Entry):
                last = runs[-1] = [last]
            last.append(entry)
            message_of.append(message_of[-1])  # the message of the last entry placed
            self._extend_last(entry, last)
            return
        index = len(self._messages)
        runs.append(entry)
        message_of.append(index)
        message = {"role": entry.role, "content": self.rendered(entry)}
        self._messages.append(message)
        self._ids.append(_NO_IDS)
        self._set_ids(index, _view(entry, message))
        if index:
            self._settle(index)

    def _settle(self, index: int) -> None:
        """Take the new message ``index`` and an assistant message before it off the guard's
        list when appending ``index`` proved them right, by the checks ``request_problems``
        would make (no content problem, no replaced thinking, tool results answering the
        previous message's tool calls in order): an append-only conversation leaves nothing
        to check at the request but the assistant message last placed."""
        ids, runs = self._ids, self._runs
        message, previous = ids[index], ids[index - 1]
        if message.content_problems or not _own_content(runs[index]):
            return
        if message.role == "assistant":
            if not message.tool_use_ids:
                self._changed.discard(index)
            return
        if message.tool_result_ids and not answers_in_order(previous, message):
            return
        if previous.tool_use_ids and not message.tool_result_ids:
            return  # left unanswered
        self._changed.discard(index)
        if (
            index > 1  # the first message stays: the request's first role is checked with it
            and previous.role == "assistant"
            and not previous.content_problems
            and _own_content(runs[index - 1])
        ):
            self._changed.discard(index - 1)

    def _extend_last(self, entry: Entry, run: list[Entry]) -> None:
        """Add ``entry`` to the last message, ``run``, without re-merging it whole (what
        ``merge_run`` would give, in O(1) Python steps), unless tool_results must move."""
        index = len(self._messages) - 1
        if len(run) <= 2:  # a one-entry message is sent as is, not merged
            self._rebuild(index)
            return
        old = _as_blocks(self._messages[index]["content"])
        new = _as_blocks(self.rendered(entry))
        if entry.role == "user" and any(b.get("type") == "tool_result" for b in new):
            if old and old[-1].get("type") != "tool_result":
                self._rebuild(index)
                return
            new.sort(key=lambda b: b.get("type") != "tool_result")
        message = {"role": entry.role, "content": old + new}
        ids = message_ids({"role": entry.role, "content": new})
        before = self._ids[index]
        self._put(index, message)
        if ids.content_problems:  # rare: checked whole, so block numbers are the message's
            self._set_ids(index, message_ids(message))
            return
        self._set_ids(
            index,
            MessageIds(
                entry.role,
                before.tool_use_ids + ids.tool_use_ids,
                before.tool_result_ids + ids.tool_result_ids,
                before.content_problems + ids.content_problems,
            ),
        )

    def _rebuild(self, message_index: int, same_ids: bool = False) -> None:
        run = self._runs[message_index]
        if isinstance(run, Entry):
            message = {"role": run.role, "content": self.rendered(run)}
        else:
            message = merge_run(run[0].role, [self.rendered(e) for e in run])
        self._put(message_index, message)
        if not same_ids:  # the request guard checks what changed
            view = _view(run, message) if isinstance(run, Entry) else message_ids(message)
            self._set_ids(message_index, view)

    def _put(self, index: int, message: dict[str, Any]) -> None:
        """Replace message ``index`` (noted for the request list handed out)."""
        self._messages[index] = message
        if index < self._handed:
            self._replaced.add(index)

    def _run(self, message_index: int) -> Sequence[Entry]:
        """The entries of message ``message_index``."""
        return _entries_of(self._runs[message_index])

    def _message(self, index: int) -> int:
        """The message entry ``index`` is sent in (-1: none, as it has no content)."""
        message_of = self._message_of
        return message_of[index] if index < len(message_of) else -1

    def _set_ids(self, index: int, ids: IdsView) -> None:
        """Record the guard's view of message ``index`` (tool_use ids counted)."""
        counts = self._use_counts
        for tool_id in self._ids[index].tool_use_ids:
            counts[tool_id] -= 1
            self._repeated_uses -= counts[tool_id] >= 1
        for tool_id in ids.tool_use_ids:
            counts[tool_id] = counts.get(tool_id, 0) + 1
            self._repeated_uses += counts[tool_id] > 1
        self._ids[index] = ids
        self._changed.add(index)

    def refresh(self, *entries: Entry, memorized: bool = False) -> None:
        """Re-render ``entries`` after their memorized flag or sent content changed (each
        message they belong to is rebuilt once). ``memorized``: only the flag changed, so
        the tool ids sent stay the same (a placeholder keeps its call's id), and a message
        whose entries render as before (no result to reduce) is not rebuilt."""
        rest = self._switch(entries) if memorized and not self._totals else entries
        messages = set()
        pending = self.unmemorized_tool_entries
        for entry in rest:
            if entry.memorized:
                pending.pop(entry.index, None)
            if memorized and not entry.tool_result_ids and render_content_is_base(entry):
                continue  # sent as before: nothing to drop or rebuild
            self._recount(entry)
            message = self._message(entry.index)
            if message >= 0:
                messages.add(message)
        for message_index in sorted(messages):
            self._rebuild(message_index, same_ids=memorized)
        self._before_window.clear()

    def _switch(self, entries: tuple[Entry, ...]) -> list[Entry]:
        """Send the newly memorized ``entries`` in the form their counts prepared, in one
        pass (the usual memorize: one entry per message, nothing kept, inputs whole); the
        entries left for the general path are returned."""
        pending_pop = self.unmemorized_tool_entries.pop
        message_of, runs, messages = self._message_of, self._runs, self._messages
        placed, handed, replaced = len(message_of), self._handed, self._replaced
        rest, memo, plain = [], None, False
        for entry in entries:
            if entry.memo is not memo:
                memo = entry.memo
                plain = not memo or not (memo.get("keep") or memo.get("reduce_inputs"))
            form = entry.prepared
            if not plain or form is None or entry.sent_content is not None:
                rest.append(entry)
                continue
            index = entry.index
            pending_pop(index, None)
            if form is entry.content:
                continue  # no tool result: sent as before
            message = message_of[index] if index < placed else -1
            if message < 0 or runs[message] is not entry:
                rest.append(entry)
                continue
            entry.render = form
            if entry.cache:
                _drop_derived(entry.cache)
            messages[message] = {"role": entry.role, "content": form}
            if message < handed:
                replaced.add(message)
        return rest

    def _recount(self, entry: Entry) -> None:
        """Drop the entry's cached rendering; move the running sent totals by the change."""
        if not self._totals:  # nothing counted over the history: only drop
            entry.render = None
            if entry.cache:
                _drop_derived(entry.cache)
            return
        counted = [(e, t) for e, t in self._totals.items() if entry.index < t.upto]
        if counted:
            cache = entry.cache or {}
            before = [cache.get(("sent", e), self.full_tokens(entry, e)) for e, _ in counted]
        entry.render = None
        if entry.cache:
            _drop_derived(entry.cache)
        for (estimator, totals), tokens in zip(counted, before if counted else (), strict=True):
            totals.sent += self.sent_tokens(entry, estimator) - tokens

    def messages(self) -> list[dict[str, Any]]:
        """The request messages: the preamble, then the entries from ``window_start`` on,
        the preamble's last message merged with the first when their roles match (a new
        list; treat the dicts as read-only)."""
        head = self.preamble
        start = self._window_message
        if not head:  # the usual case: one list copy
            return self._messages[start:] if start else self._messages.copy()
        window = self._messages[self._window_message :]
        if not window or head[-1]["role"] != window[0]["role"]:
            return head + window
        joint = merge_run(window[0]["role"], [head[-1]["content"], window[0]["content"]])
        return [*head[:-1], joint, *window[1:]]

    def request_messages(self, reuse: RequestMessages | None = None) -> RequestMessages:
        """:meth:`messages` as a ``RequestMessages``. ``reuse``: the list this returned
        last, which nobody else holds any more (see ``request.sole_messages``): brought up
        to date in place (the messages appended since put at its end, those replaced put
        back) rather than copied, unless the preamble or the window start changed, or the
        history was rebuilt, or a quarter of it was replaced."""
        messages, start, handed = self._messages, self._window_message, self._handed
        replaced, self._replaced = self._replaced, set()
        if (
            reuse is None
            or self.preamble
            or start != self._handed_start
            or len(reuse) != handed - start
            or len(replaced) * 4 > len(reuse)
        ):
            # the usual case copies the list once (``messages()`` would copy it twice)
            whole = not (self.preamble or start)
            fresh = RequestMessages(messages if whole else self.messages())
            self._handed, self._handed_start = len(messages), -1 if self.preamble else start
            return fresh
        for index in replaced:
            if index >= start:
                list.__setitem__(reuse, index - start, messages[index])
        list.extend(reuse, messages[handed:])
        self._handed = len(messages)
        return reuse

    def request_problems(self) -> list[str]:
        """What the Messages API would reject in the request (see ``guard``), checking the
        messages changed since the last check, the start of the request, and tool_use ids
        across the request only when some id occurs twice in the history. Messages with a
        problem stay to be checked until the problem is gone."""
        start, ids = self._window_message, self._ids
        if not (self._changed or self.preamble or start or self._repeated_uses) and ids:
            return []  # every message was settled as it was placed (see ``_settle``)
        pending = self._changed
        # what lies before the window is not sent now: still to check if the window moves
        # back over it (its problem would otherwise never be found)
        self._changed = {i for i in pending if i < start} if start else set()
        changed = sorted({i - start for i in pending if i >= start} if start else pending)
        if self.preamble or start:
            head, ids, merged = self._head(ids[start:])
            if merged and changed[:1] != [0]:
                changed.insert(0, 0)  # the merged message is checked whole every time
            problems = check_roles([m.role for m in head] + ([ids[0].role] if ids else []))
            problems += content_problems(head, range(len(head)))
        else:
            head = []
            problems = check_roles([ids[0].role] if ids else []) if 0 in pending or not ids else []
        before = len(head)
        for i in changed:
            for problem in ids[i].content_problems:
                problems.append(f"message {before + i}: {problem}")
        problems += check_pairs(ids, changed, before)
        problems += self._changed_thinking(changed, start, before)
        if self._repeated_uses:
            problems += check_unique([*head, *ids])
        if problems:  # checked again next time: a refused request is never handed out later
            self._changed |= pending
        return problems

    def _head(self, window: list[IdsView]) -> tuple[list[MessageIds], list[IdsView], bool]:
        """The guard's views of the preamble's messages and of the window's, as sent, and
        whether the preamble's last message is merged with the window's first (their roles
        match: see :meth:`messages`)."""
        head = [message_ids(m) for m in self.preamble]
        if not (head and window and head[-1].role == window[0].role):
            return head, window, False
        first = self._messages[self._window_message]["content"]
        joint = merge_run(window[0].role, [self.preamble[-1]["content"], first])
        return head[:-1], [message_ids(joint), *window[1:]], True

    def _changed_thinking(self, messages: list[int], start: int, before: int) -> list[str]:
        """Thinking blocks a handler's replacement content changed (they must be sent as
        the API returned them)."""
        runs = self._runs
        return [
            f"message {before + i}: thinking blocks of entry {entry.uuid} changed"
            for i in messages
            for entry in _entries_of(runs[start + i])
            if entry.sent_content is not None
            and thinking_blocks(entry.sent_content) != thinking_blocks(entry.content)
        ]

    # window ----------------------------------------------------------------------------

    def safe_start(self, index: int) -> bool:
        """Whether the request may start at entry ``index``: the first entry of a message,
        which answers no tool call, right after a message with no tool call (pairs are
        never split, a response's parts stay together, no tool call is dropped)."""
        if index == 0:
            return True
        message = self._message(index)
        if message <= 0 or _first(self._runs[message]).index != index:
            return False
        before, run = self._run(message - 1), self._run(message)
        return not any(e.tool_result_ids for e in run) and not any(e.tool_use_ids for e in before)

    def set_window(self, start: int, preamble: list[dict[str, Any]]) -> None:
        """Send ``preamble`` then the entries from ``start`` on (``start`` must be safe)."""
        if not self.safe_start(start):
            raise ValueError(f"entry {start} is not a safe place to start a request")
        self.window_start, self.preamble = start, list(preamble)
        self._window_message = self._message(start) if start else 0
        self._before_window.clear()

    def request_tokens(self, estimator: str = "tiktoken", exact: bool = True) -> int:
        """Estimated tokens of the request messages (preamble and window only); ``exact``
        False: as for :meth:`context_size`."""
        totals = self._synced_totals(estimator, exact)
        rest = sum(token_bound(self.rendered(e)) for e in self.entries[totals.upto :])
        if estimator not in self._before_window:
            entries = self.entries[: self.window_start]
            self._before_window[estimator] = sum(self.sent_tokens(e, estimator) for e in entries)
        preamble = sum(content_tokens(m["content"], estimator) for m in self.preamble)
        return preamble + totals.sent + rest - self._before_window[estimator]

    # tokens ----------------------------------------------------------------------------

    def full_tokens(self, entry: Entry, estimator: str = "tiktoken") -> int:
        """Estimated tokens of the entry's full content (cached)."""
        if estimator == "tiktoken":
            if entry.tokens < 0:
                entry.tokens = content_tokens(entry.content)
            return entry.tokens
        return self._cached(entry, ("full", estimator), entry.content, estimator)

    def sent_tokens(self, entry: Entry, estimator: str = "tiktoken") -> int:
        """Estimated tokens of what is sent for the entry (cached)."""
        if not entry.content:
            return 0
        if not entry.memorized and entry.sent_content is None:
            return self.full_tokens(entry, estimator)
        if estimator == "tiktoken" and entry.reduced >= 0 and _usual(entry, entry.memo or {}):
            return entry.reduced
        return self._cached(entry, ("sent", estimator), self.rendered(entry), estimator)

    @staticmethod
    def _cached(entry: Entry, key: Any, content: Any, estimator: str = "tiktoken") -> int:
        if entry.cache is None:
            entry.cache = {}
        if key not in entry.cache:
            entry.cache[key] = content_tokens(content, estimator)
        return int(entry.cache[key])

    def count(self, entry: Entry) -> None:
        """Count ``entry`` ahead of need (the session's background worker does, as entries
        arrive): its full content and, for tool results, its usual memorized form, kept for
        the memorize that sends it (``Entry.prepared``)."""
        self.full_tokens(entry)
        if entry.sent_content is not None or entry.memorized:
            return
        if not has_results(entry.content):  # its usual memorized form is itself
            entry.prepared, entry.reduced = entry.content, entry.tokens
        elif all(i in self.tool_use_entry for i in entry.tool_result_ids):
            form = reduce_content(entry.content, NO_MEMO, self.tool_name)
            entry.reduced = content_tokens(form)
            entry.prepared = form

    @staticmethod
    def usual_savings(entries: list[Entry]) -> int | None:
        """The tokens the usual memorize (nothing kept, inputs whole) of ``entries`` saves,
        from the counts ``count`` made (None when one is missing); only entries holding
        tool results change, so only theirs are needed."""
        saved = 0
        for e in entries:
            if e.tool_result_ids:
                if e.reduced < 0 or e.tokens < 0 or e.sent_content is not None:
                    return None
                if e.tokens > e.reduced:
                    saved += e.tokens - e.reduced
        return saved

    def saving(
        self, entry: Entry, keep: set[str], reduce_inputs: bool, *, count: bool = True
    ) -> int | None:
        """Tokens ``entry`` stops sending once memorized keeping the tool ids ``keep`` (its
        base content against its reduced form; whether it is marked yet does not matter).
        An entry whose reduced form is its full form is not counted. With ``count`` False,
        only counts already made are used: None when one is missing."""
        if not self._reduces(entry, keep, reduce_inputs):
            return 0
        memo = {"keep": keep, "reduce_inputs": reduce_inputs}
        before = self._base_tokens(entry, count)
        after = self._reduced_tokens(entry, memo, count)
        if before is None or after is None:
            return None
        return max(0, before - after)

    def estimated_saving(self, entry: Entry, keep: set[str], reduce_inputs: bool) -> int:
        """``saving`` at chars/4, without the tokenizer (cheap)."""
        if not self._reduces(entry, keep, reduce_inputs):
            return 0
        base = base_content(entry)
        memo = {"keep": keep, "reduce_inputs": reduce_inputs}
        reduced = reduce_content(base, memo, self.tool_name)
        return max(0, content_tokens(base, "chars4") - content_tokens(reduced, "chars4"))

    @staticmethod
    def _reduces(entry: Entry, keep: set[str], reduce_inputs: bool) -> bool:
        """Whether memorizing may change what is sent for ``entry``."""
        if isinstance(base_content(entry), str):
            return False
        if reduce_inputs and not keep.issuperset(entry.tool_use_ids):
            return True
        return not keep.issuperset(entry.tool_result_ids)

    def _base_tokens(self, entry: Entry, count: bool) -> int | None:
        if entry.sent_content is None:
            return self.full_tokens(entry) if count or entry.tokens >= 0 else None
        if count:
            return self._cached(entry, ("base", "tiktoken"), entry.sent_content)
        return (entry.cache or {}).get(("base", "tiktoken"))

    def _reduced_tokens(self, entry: Entry, memo: dict[str, Any], count: bool) -> int | None:
        """Tokens of the entry's base content reduced with ``memo``; the form that keeps
        nothing (the usual one) is kept in ``entry.reduced``."""
        usual = _usual(entry, memo)
        if usual and entry.reduced >= 0:
            return entry.reduced
        if not count:
            return None
        tokens = content_tokens(reduce_content(base_content(entry), memo, self.tool_name))
        if usual:
            entry.reduced = tokens
        return tokens

    def _synced_totals(self, estimator: str, exact: bool = True) -> _Totals:
        """The running totals, brought up to the end of the history (``exact`` False: up
        to the first entry whose tiktoken count is not made yet)."""
        totals = self._totals.setdefault(estimator, _Totals())
        bounded = not exact and estimator == "tiktoken"
        for entry in self.entries[totals.upto :]:
            if bounded and not self._sent_counted(entry):
                break
            totals.full += self.full_tokens(entry, estimator)
            totals.sent += self.sent_tokens(entry, estimator)
            totals.upto += 1
        return totals

    @staticmethod
    def _sent_counted(entry: Entry) -> bool:
        """Whether the entry's tiktoken counts, full and sent, are made (or need none)."""
        if not entry.content:
            return True
        if entry.tokens < 0:
            return False
        if not entry.memorized and entry.sent_content is None:
            return True
        if entry.reduced >= 0 and _usual(entry, entry.memo or {}):
            return True
        return ("sent", "tiktoken") in (entry.cache or {})

    def token_totals(self, estimator: str = "tiktoken") -> tuple[int, int]:
        """(full, sent) estimated tokens over the whole history."""
        totals = self._synced_totals(estimator)
        return totals.full, totals.sent

    def context_size(self, estimator: str = "tiktoken", exact: bool = True) -> int:
        """Claude Code's context size: the newest reported usage (input + cache creation +
        cache read + output) plus estimates for the entries after it; with no usage at all,
        the sum of estimates. Only entries after the newest usage are ever counted.
        ``exact`` False: an entry not counted yet adds the bound :func:`.tokens.token_bound` of its
        tokens instead (no tokenizer runs; the figure is then at least the exact one)."""
        anchor = self._anchors.get(estimator) or self._anchors.setdefault(estimator, _Anchor())
        entries = self.entries
        end = len(entries)
        for index in range(end - 1, anchor.upto - 1, -1):  # the newest usage since the last
            entry = entries[index]
            if entry.role == "assistant" and (total := entry.usage_total()) is not None:
                anchor.total, anchor.after, anchor.upto = total, 0, index + 1
                break
        if not exact and estimator == "tiktoken":
            while anchor.upto < end and entries[anchor.upto].tokens >= 0:
                anchor.after += entries[anchor.upto].tokens
                anchor.upto += 1
            rest = entries[anchor.upto :]
            return anchor.total + anchor.after + sum([token_bound(e.content) for e in rest])
        if anchor.upto < end:
            full = self.full_tokens
            anchor.after += sum([full(e, estimator) for e in entries[anchor.upto :]])
            anchor.upto = end
        return anchor.total + anchor.after


def _drop_derived(cache: dict[Any, Any]) -> None:
    """Drop the counts of what is sent from an entry's ``cache`` (the full content's stay)."""
    for key in _DERIVED_COUNTS:
        cache.pop(key, None)


def _usual(entry: Entry, memo: dict[str, Any]) -> bool:
    """Whether ``memo`` reduces the entry as ``NO_MEMO`` does (the usual memorize: no tool
    id of the entry kept, its inputs left whole) and its content is its own."""
    if entry.sent_content is not None:
        return False
    if memo.get("reduce_inputs") and entry.tool_use_ids:
        return False
    keep = memo.get("keep")
    return not keep or set(keep).isdisjoint(entry.tool_result_ids)


def _own_content(run: Entry | list[Entry]) -> bool:
    """Whether no entry of a message's run sends replaced content (whose thinking blocks
    the guard compares with the entry's own)."""
    if isinstance(run, Entry):
        return run.sent_content is None
    return all(e.sent_content is None for e in run)


def _entries_of(run: Entry | list[Entry]) -> Sequence[Entry]:
    """The entries of a message's run."""
    return (run,) if isinstance(run, Entry) else run


def _first(run: Entry | list[Entry]) -> Entry:
    """The first entry of a message's run."""
    return run if isinstance(run, Entry) else run[0]


def _view(entry: Entry, message: dict[str, Any]) -> IdsView:
    """The guard's view of ``message``, the message that is ``entry`` alone: the entry
    itself when the message says what the entry says (its own plain content, or ids of its
    own and no problem), else the message's ``MessageIds`` (holding the entry's id tuples
    when they are the same: kept once)."""
    if entry.plain and message["content"] is entry.content:
        return entry  # nothing to scan
    ids = message_ids(message)
    if ids.tool_use_ids != entry.tool_use_ids or ids.tool_result_ids != entry.tool_result_ids:
        return ids
    if ids.content_problems:
        return MessageIds(entry.role, entry.tool_use_ids, entry.tool_result_ids, ids[3])
    return entry


def _as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Content as a new list of blocks (a string becomes one text block, as in merge_run)."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
