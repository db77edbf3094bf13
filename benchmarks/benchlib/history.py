"""The house synthetic coding-agent conversation, deterministic and standard-library only
(the pydantic-ai-harness worker builds the same history in its own interpreter).

Assistant turns: 40-400 characters of text and 1-3 parallel ``tool_use`` blocks (Read, Bash,
Grep, Glob, Edit, Write with realistic inputs), ``usage`` with a growing cache read; user
turns: one ``tool_result`` per call (200 B - 8 KB of code- and log-like text, 20 % as text
blocks, 4 % errors, 3 % with a user text block); ~5 % of turns end with text only.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
from functools import cache
from typing import Any

SEED = 20_240_917
MODEL = "claude-sonnet-4-5"
T0 = 1_750_000_000.0
TIMED, WARM, PAUSED, AFTER = range(4)  # streams of synthetic turns

WORD_TEXT = (
    "the test fails because handler returns None when the config is missing so I will read "
    "module check imports update function add a guard run pytest again look at traceback fix "
    "path parse value cache entry session request response history render token budget next "
    "let me now first then also this that file line error output expected actual"
)
WORDS = tuple(WORD_TEXT.split())
IDENT_TEXT = (
    "session history entry render token cache config parser handler request response value "
    "index item result store journal state clock event budget window limit offset buffer"
)
IDENTS = tuple(IDENT_TEXT.split())
FILES = [f"/repo/src/app/{a}_{b}.py" for a in IDENTS[:8] for b in ("core", "utils", "api")]
TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": f"{name}: " + " ".join(WORDS[:40]),
        "input_schema": {
            "type": "object",
            "properties": {key: {"type": "string", "description": key} for key in keys},
            "required": list(keys[:1]),
        },
    }
    for name, keys in (
        ("Read", ("file_path", "offset", "limit")),
        ("Bash", ("command", "description", "timeout")),
        ("Grep", ("pattern", "path", "glob", "output_mode")),
        ("Glob", ("pattern", "path")),
        ("Edit", ("file_path", "old_string", "new_string")),
        ("Write", ("file_path", "content")),
    )
]
TOOL_WEIGHTS = {"Read": 40, "Bash": 22, "Grep": 14, "Glob": 6, "Edit": 14, "Write": 4}
SYSTEM_PROMPT = "You are a coding agent working in /repo. " + " ".join(WORDS * 12)


@cache
def make_corpus(size: int = 200_000) -> str:
    """Code-like text (Python and log lines) that tool results and inputs are sliced from."""
    rng = random.Random(SEED)
    lines: list[str] = []
    total = 0
    while total < size:
        a, b, c = (rng.choice(IDENTS) for _ in range(3))
        kind = rng.random()
        if kind < 0.45:
            line = f"    def {a}_{b}(self, {c}: int = {rng.randint(0, 999)}) -> {b.title()}:"
        elif kind < 0.8:
            line = f"        self.{a} = {b}.{c}({rng.randint(0, 99)}, key={a!r})  # {b}"
        else:
            line = f"2025-06-{rng.randint(10, 28)} INFO {a}.{b}: {c} took {rng.random():.3f}s"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


class Synth:
    """Deterministic generator of coding-agent messages (Anthropic format)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.corpus = make_corpus()
        self.pending: list[dict[str, Any]] = []
        self.cache_read = 4_000
        self.ids = 0

    def reseed(self, seed: int) -> None:
        """Draw what follows from ``random.Random(seed)`` (pending calls and ids carry on)."""
        self.rng = random.Random(seed)

    def _text(self, low: int, high: int) -> str:
        """A slice of the corpus with a log-uniform length in [low, high] characters."""
        length = int(math.exp(self.rng.uniform(math.log(low), math.log(high))))
        start = self.rng.randrange(0, len(self.corpus) - length)
        return self.corpus[start : start + length]

    def _prose(self, low: int, high: int) -> str:
        """Assistant / user prose of roughly ``low``-``high`` characters."""
        words: list[str] = []
        target = self.rng.randint(low, high)
        while sum(len(w) + 1 for w in words) < target:
            words.append(self.rng.choice(WORDS))
        return " ".join(words).capitalize() + "."

    def _tool_id(self) -> str:
        """A fresh ``toolu_`` id."""
        self.ids += 1
        return f"toolu_{self.ids:08d}{self.rng.getrandbits(64):016x}"

    def _tool_input(self, name: str) -> dict[str, Any]:
        """Realistic input for one tool call."""
        rng = self.rng
        if name == "Read":
            extra = {"offset": rng.randint(1, 400), "limit": 200} if rng.random() < 0.3 else {}
            return {"file_path": rng.choice(FILES), **extra}
        if name == "Bash":
            command = rng.choice(("pytest -q tests/", "git diff --stat", "ruff check src/"))
            return {"command": f"cd /repo && {command}", "description": self._prose(15, 50)}
        if name == "Grep":
            return {
                "pattern": f"def {rng.choice(IDENTS)}_\\w+",
                "path": "/repo/src",
                "output_mode": "content",
            }
        if name == "Glob":
            return {"pattern": f"**/{rng.choice(IDENTS)}*.py"}
        if name == "Edit":
            return {
                "file_path": rng.choice(FILES),
                "old_string": self._text(60, 600),
                "new_string": self._text(60, 800),
            }
        return {"file_path": rng.choice(FILES), "content": self._text(400, 4_000)}

    def _tool_use(self) -> dict[str, Any]:
        """One ``tool_use`` block."""
        name = self.rng.choices(list(TOOL_WEIGHTS), weights=list(TOOL_WEIGHTS.values()))[0]
        return {
            "type": "tool_use",
            "id": self._tool_id(),
            "name": name,
            "input": self._tool_input(name),
        }

    def assistant(self, tools: bool = True) -> dict[str, Any]:
        """An assistant turn: text, then 1-3 parallel tool calls (or text only)."""
        content: list[dict[str, Any]] = [{"type": "text", "text": self._prose(40, 400)}]
        count = self.rng.choices((1, 2, 3), weights=(60, 28, 12))[0] if tools else 0
        uses = [self._tool_use() for _ in range(count)]
        self.pending = uses
        self.cache_read += self.rng.randint(300, 3_000)
        usage = {
            "input_tokens": self.rng.randint(1, 40),
            "cache_creation_input_tokens": self.rng.randint(200, 3_000),
            "cache_read_input_tokens": self.cache_read,
            "output_tokens": self.rng.randint(40, 900),
        }
        stop = "tool_use" if uses else "end_turn"
        return {
            "role": "assistant",
            "content": content + uses,
            "usage": usage,
            "id": f"msg_{self.rng.getrandbits(64):016x}",
            "model": MODEL,
            "stop_reason": stop,
        }

    def _tool_result(self, use: dict[str, Any]) -> dict[str, Any]:
        """The result of one tool call: 200 B - 8 KB of text, sometimes an error."""
        text = self._text(200, 8_000)
        content: Any = text if self.rng.random() < 0.8 else [{"type": "text", "text": text}]
        block = {"type": "tool_result", "tool_use_id": use["id"], "content": content}
        if self.rng.random() < 0.04:
            block["is_error"] = True
        return block

    def user(self) -> dict[str, Any]:
        """The next user message: the results of the pending calls (sometimes with a text
        block), or a text prompt after a text-only assistant turn."""
        if not self.pending:
            return {"role": "user", "content": [{"type": "text", "text": self._prose(30, 600)}]}
        content = [self._tool_result(use) for use in self.pending]
        if self.rng.random() < 0.03:
            content.append({"type": "text", "text": self._prose(20, 200)})
        self.pending = []
        return {"role": "user", "content": content}

    def turn(self, tools_only: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """(user message, next assistant turn); ~5% of build turns end with text only."""
        user = self.user()
        tools = tools_only or self.rng.random() >= 0.05
        return user, self.assistant(tools=tools)


def stream_seed(stream: int, index: int) -> int:
    """Seed of the ``index``-th call of a stream: the same turn whatever the history size,
    so every size (and every lane) times the same sequence of calls."""
    return (SEED * 10 + stream) * 1_000_000 + index


def synthetic_history(size: int, seed: int) -> tuple[list[dict[str, Any]], Synth]:
    """A synthetic history of >= ``size`` messages ending with an assistant turn that calls
    tools, and the generator positioned to continue it (its next user message answers
    those calls)."""
    synth = Synth(seed)
    messages: list[dict[str, Any]] = []
    tools_only = True  # the user's prompt, then tool calls
    while len(messages) < size or not synth.pending:
        user, assistant = synth.turn(tools_only)
        messages += [user, assistant]
        tools_only = False
    return messages, synth


def digest(messages: list[dict[str, Any]]) -> str:
    """A short digest of a history, to show two processes hold the same one."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


class HistoryCache:
    """The newest history of each size, built once and shared by every lane at that size, so
    all lanes run on the same history and then receive the same turns."""

    def __init__(self) -> None:
        self._built: dict[int, tuple[int, list[dict[str, Any]], Synth]] = {}

    def get(self, size: int, seed: int) -> tuple[list[dict[str, Any]], Synth]:
        """The messages (shared, read-only) and a private copy of the positioned generator."""
        built = self._built.get(size)
        if built is None or built[0] != seed:
            built = self._built[size] = (seed, *synthetic_history(size, seed))
        return built[1], copy.deepcopy(built[2])
