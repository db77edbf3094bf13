"""Bulk work without garbage-collector passes: rebuilding tens of thousands of entries
allocates as many containers, and a full collection run in the middle (which walks every
object of the process) costs more than the work itself. Merely pausing the collector only
defers that walk: the first young collection after it would go through everything the
block built, then the next older one again. So what the block built is moved straight to
the oldest generation (where it would end up anyway, having survived), without a walk."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector for the block, then promote the objects it built to the
    oldest generation and restore the collector (reference counting still frees what the
    block drops). Objects a host froze with ``gc.freeze()`` stay frozen: then, and when the
    collector was off already, nothing is promoted."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            _promote_young()
            gc.enable()


def _promote_young() -> None:
    """Every tracked object to the oldest generation, in O(1): ``freeze`` moves them all to
    the permanent generation, ``unfreeze`` puts that back as the oldest one."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
