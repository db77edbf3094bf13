"""Drive a session through realistic turns in a few lines: user input, tool calls with
their results, replies and pauses, on a manual clock."""

from __future__ import annotations

from itertools import count
from typing import Any

from ..engine.clock import ManualClock
from ..engine.entries import Entry
from ..engine.request import Request
from ..engine.session import Session


class Conversation:
    """A host loop in miniature. Each response goes through ``pre_call`` and
    ``post_sampling``, as a real host's would; tool results are appended as input.

        talk = Conversation(session)
        talk.user("Fix the test").tool("Read", {"file_path": "a.py"}, "def f(): ...")
        talk.reply("Fixed.").pause(600).user("Thanks!")
        request = talk.request()
    """

    def __init__(self, session: Session, model: str = "claude-test", step: float = 2.0) -> None:
        self.session = session
        self.model = model
        self.step = step
        clock = session.clock
        self.clock = clock if isinstance(clock, ManualClock) else None
        self.requests: list[Request] = []
        self._ids = count(1)

    def user(self, text: str) -> Conversation:
        """The user writes ``text``."""
        self._tick()
        self.session.append({"role": "user", "content": text})
        return self

    def tool(
        self,
        name: str,
        tool_input: dict[str, Any],
        result: Any,
        *,
        is_error: bool = False,
        usage: dict[str, int] | None = None,
    ) -> Conversation:
        """The model calls ``name``; ``result`` comes back as its tool_result."""
        tool_id = f"toolu_{next(self._ids):06d}"
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
        self.respond([block], usage)
        answer: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": result}
        if is_error:
            answer["is_error"] = True
        self._tick()
        self.session.append({"role": "user", "content": [answer]})
        return self

    def reply(self, text: str, usage: dict[str, int] | None = None) -> Conversation:
        """The model answers with ``text`` (a quiet moment)."""
        self.respond([{"type": "text", "text": text}], usage)
        return self

    def respond(self, content: list[dict[str, Any]], usage: dict[str, int] | None = None) -> Entry:
        """One model call: pre-call, then ``content`` as the response."""
        self.requests.append(self.request())
        self._tick()
        response: dict[str, Any] = {"role": "assistant", "content": content}
        if usage:
            response["usage"] = usage
        return self.session.post_sampling(response)

    def pause(self, seconds: float) -> Conversation:
        """Time passes (needs a ``ManualClock`` session)."""
        if self.clock is None:
            raise TypeError("pause() needs a session opened with a ManualClock")
        self.clock.advance(seconds)
        return self

    def request(self) -> Request:
        """What the next model call would send."""
        return self.session.pre_call(model=self.model)

    def _tick(self) -> None:
        if self.clock is not None:
            self.clock.advance(self.step)
