"""Bulk work without garbage-collector passes: rebuilding tens of thousands of entries
allocates as many containers, and a full collection run in the middle (which walks every
object of the process) costs more than the work itself."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector for the block (restored after; reference counting
    still frees what the block drops)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
