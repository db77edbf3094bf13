"""The C twins of the entry path (``stenograph._speedups``: the copy, the JSON check and the
block scan of a message becoming an entry, and ``History.add`` of an entry appended as
hosts append), or None: not built (no C compiler at install) or turned off with
``STENOGRAPH_PURE_PYTHON=1``. The Python twins give the same results."""

from __future__ import annotations

import os
from types import ModuleType


def load() -> ModuleType | None:
    """The compiled module, unless it is absent or turned off."""
    if os.environ.get("STENOGRAPH_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from stenograph import _speedups
    except ImportError:
        return None
    return _speedups


C = load()
