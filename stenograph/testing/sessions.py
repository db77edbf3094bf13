"""Open a session on a one-handler preset, built in memory (no file needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..engine.clock import Clock, ManualClock
from ..engine.engine import Engine
from ..engine.handler import Handler
from ..engine.presets import Preset, SlotSpec
from ..engine.session import Session


def single_handler_session(
    handler: str | type[Handler],
    settings: dict[str, Any] | None = None,
    *,
    strict: bool = True,
    state_dir: str | Path | None = None,
    clock: Clock | None = None,
    services: dict[str, Any] | None = None,
    session_id: str = "test",
) -> Session:
    """A session whose preset is just ``handler`` (a name, or a class not installed as a
    plugin) with ``settings``; strict, in memory, on a ``ManualClock`` unless told
    otherwise. Settings are validated exactly as from a preset file."""
    name = handler if isinstance(handler, str) else handler.name
    values = dict(settings or {})
    where = "test preset (handlers[0])"
    slot = SlotSpec(name, ((where, values),) if values else (), where)
    preset = Preset(
        name=f"only-{name}", description="", strict=strict, slots=(slot,), label="test preset"
    )
    extra = () if isinstance(handler, str) else (handler,)
    engine = Engine(preset, handlers=extra, services=services)
    return engine.open_session(session_id, state_dir=state_dir, clock=clock or ManualClock(1e9))
