"""pytest fixtures for handler authors. Enable them in your ``conftest.py``:

pytest_plugins = ["stenograph.testing.fixtures"]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ..engine.clock import ManualClock
from .messages_server import MessagesServer


@pytest.fixture
def manual_clock() -> ManualClock:
    """A clock that only moves when told to, starting at 1e9 (2001-09-09)."""
    return ManualClock(1e9)


@pytest.fixture
def messages_server() -> Iterator[MessagesServer]:
    """A local Messages-API server on 127.0.0.1; script it with ``.script(Reply...)``."""
    with MessagesServer() as server:
        yield server


@pytest.fixture
def anthropic_client(messages_server: MessagesServer) -> Any:
    """The real ``anthropic.Anthropic`` pointed at ``messages_server`` (no retries)."""
    import anthropic

    return anthropic.Anthropic(api_key="test-key", base_url=messages_server.url, max_retries=0)
