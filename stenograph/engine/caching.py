"""Anthropic's prompt-cache TTLs as requests name them."""

from __future__ import annotations

from typing import Any

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def cache_ttl(cache_control: Any) -> str | None:
    """The TTL of a ``cache_control`` value, "5m" (the API's default) or "1h"; None when
    there is none."""
    if not isinstance(cache_control, dict):
        return None
    return "1h" if cache_control.get("ttl") == "1h" else "5m"
