"""Finding secrets in text and in message blocks, and replacing them with markers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MARKER = re.compile(r"\[REDACTED:[^\]\s]*\]")
SECRET_GROUP = "secret"
PEM_LABEL = r"(?:[A-Z0-9]+ )*PRIVATE KEY"
ASSIGNED_KEYS = r"(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key)"
BUILTIN_RULES: tuple[tuple[str, str], ...] = (
    ("private-key", rf"-----BEGIN {PEM_LABEL}-----[\s\S]{{0,16384}}?-----END {PEM_LABEL}-----"),
    ("aws-access-key-id", r"\bAKIA[0-9A-Z]{16}\b"),
    ("anthropic-api-key", r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
    ("api-key", r"\bsk-[A-Za-z0-9_-]{16,}"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("bearer-token", r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)"),
    (
        "assigned-secret",
        rf"(?i){ASSIGNED_KEYS}[\"']?\s*[=:]\s*[\"']?(?P<secret>[^\s\"'&,;]{{4,}})",
    ),
)
CUSTOM_KIND = "custom"


@dataclass(frozen=True)
class Rule:
    """One kind of secret and the regex that finds it; a named group ``secret``, when
    present, limits the replacement to that group (``password=`` stays readable)."""

    kind: str
    regex: re.Pattern[str]

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        """Non-empty spans to replace in ``text``."""
        for match in self.regex.finditer(text):
            start, end = match.span()
            if SECRET_GROUP in self.regex.groupindex and match.start(SECRET_GROUP) >= 0:
                start, end = match.span(SECRET_GROUP)
            if end > start:
                yield start, end


class Redactor:
    """Replaces every secret found by ``rules`` with ``[REDACTED:<kind>]``; markers already
    present are left alone, so redacting twice changes nothing."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)

    @classmethod
    def build(cls, patterns: Iterable[str], builtin: bool) -> Redactor:
        """The built-in rules (when ``builtin``), then one ``custom`` rule per pattern."""
        pairs = [*(BUILTIN_RULES if builtin else ()), *((CUSTOM_KIND, p) for p in patterns)]
        return cls(Rule(kind, re.compile(pattern)) for kind, pattern in pairs)

    def text(self, text: str, found: list[str]) -> str:
        """``text`` with its secrets replaced; the kind of each one is appended to ``found``."""
        spans = self._spans(text)
        if not spans:
            return text
        parts, last = [], 0
        for start, end, kind in spans:
            parts += [text[last:start], f"[REDACTED:{kind}]"]
            found.append(kind)
            last = end
        parts.append(text[last:])
        return "".join(parts)

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        """Leftmost-longest spans that do not overlap each other or an existing marker;
        on a tie the earlier rule wins."""
        protected = [m.span() for m in MARKER.finditer(text)]
        candidates = sorted(
            (start, -end, order, rule.kind)
            for order, rule in enumerate(self.rules)
            for start, end in rule.spans(text)
            if not any(s < end and start < e for s, e in protected)
        )
        chosen: list[tuple[int, int, str]] = []
        for start, neg_end, _, kind in candidates:
            if not chosen or start >= chosen[-1][1]:
                chosen.append((start, -neg_end, kind))
        return chosen

    def blocks(
        self, blocks: list[dict[str, Any]], inputs: bool, found: list[str]
    ) -> list[dict[str, Any]]:
        """New blocks with tool_result texts (and tool_use inputs when ``inputs``) redacted."""
        out = []
        for block in blocks:
            kind = block.get("type")
            if kind == "tool_result" and "content" in block:
                block = {**block, "content": self._result_content(block["content"], found)}
            elif kind == "tool_use" and inputs and "input" in block:
                block = {**block, "input": self._value(block["input"], found)}
            out.append(block)
        return out

    def _result_content(self, content: Any, found: list[str]) -> Any:
        if isinstance(content, str):
            return self.text(content, found)
        if not isinstance(content, list):
            return content
        return [
            {**b, "text": self.text(b["text"], found)}
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            else b
            for b in content
        ]

    def _value(self, value: Any, found: list[str]) -> Any:
        if isinstance(value, str):
            return self.text(value, found)
        if isinstance(value, dict):
            return {k: self._value(v, found) for k, v in value.items()}
        if isinstance(value, list):
            return [self._value(v, found) for v in value]
        return value
