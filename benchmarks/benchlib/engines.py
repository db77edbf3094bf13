"""The engines the lanes run on: a shipped preset whose notes stay offline, or an in-memory
preset of chosen handlers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import stenograph
from stenograph.engine.presets import Preset, SlotSpec


def make_engine(
    preset: str = "default", scratch: Path | None = None, package: Any = stenograph
) -> stenograph.Engine:
    """A shipped preset as it is, except that forked-extraction (when the preset has it) is
    forced to its offline backend (no network, even with ANTHROPIC_API_KEY set) and writes
    its notes under ``scratch`` (when given); ``package``: stenograph, or another revision
    of it imported under another name (``versus.py``)."""
    engine = package.Engine.from_preset(preset)
    if not any(slot.name == "forked-extraction" for slot in engine.slots):
        return engine
    fork: dict[str, Any] = {"backend": "offline"}
    if scratch is not None:
        fork["memory_path"] = str(scratch / "notes" / "{session_id}" / "session-memory.md")
    return package.Engine.from_preset(preset, overrides={"forked-extraction": fork})


def engine_of(
    name: str, slots: dict[str, dict[str, Any]], services: dict[str, Any] | None = None
) -> stenograph.Engine:
    """An engine on an in-memory preset (no file) holding one slot per handler of ``slots``
    (handler name -> settings, in order)."""
    specs = tuple(
        SlotSpec(handler, (("bench", settings),) if settings else (), f"handlers[{index}]")
        for index, (handler, settings) in enumerate(slots.items())
    )
    preset = Preset(name=name, description="", strict=True, slots=specs, label=f"{name} (bench)")
    return stenograph.Engine(preset, services=services)
