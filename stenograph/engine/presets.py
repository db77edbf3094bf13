"""Preset files: TOML with ordered ``[[handlers]]`` slots, optionally extending another."""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import PresetError
from .files import read_small_text

TOP_LEVEL_KEYS = ("name", "description", "extends", "strict", "handlers")
MAX_EXTENDS_DEPTH = 16


@dataclass(frozen=True)
class SlotSpec:
    """One ``[[handlers]]`` entry: the handler name and its raw settings as one layer per
    preset file that set any, parent first (``(file and slot, raw values)``)."""

    handler: str
    layers: tuple[tuple[str, dict[str, Any]], ...]
    where: str


@dataclass(frozen=True)
class Preset:
    """A loaded (not yet validated against handlers) preset."""

    name: str
    description: str
    strict: bool
    slots: tuple[SlotSpec, ...]
    label: str
    files: tuple[str, ...] = field(default=())


def builtin_names() -> list[str]:
    """Names of the presets shipped in ``stenograph/presets``."""
    folder = resources.files("stenograph.presets")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_preset(ref: str | Path, _seen: tuple[str, ...] = ()) -> Preset:
    """Load a built-in preset by name, or a preset file by path, following ``extends``."""
    label, text, base_dir = _read(ref)
    if label in _seen or len(_seen) > MAX_EXTENDS_DEPTH:
        raise PresetError(f"Preset {label} extends itself: {' -> '.join((*_seen, label))}.")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(f"Preset {label} is not valid TOML: {exc}.") from None
    except RecursionError:
        raise PresetError(f"Preset {label} is nested too deeply to be a preset.") from None
    _check_top_level(data, label)
    parent = None
    if "extends" in data:
        target = data["extends"]
        if not isinstance(target, str) or not target:
            raise PresetError(f"Preset {label}: 'extends' must be a preset name or a path.")
        parent = load_preset(_parent_ref(target, base_dir, label), (*_seen, label))
    slots = _merge(parent.slots if parent else (), _slots(data, label), label)
    return Preset(
        name=_string(data, "name", label, Path(str(ref)).stem),
        description=_string(data, "description", label, parent.description if parent else ""),
        strict=_strict(data, label, parent.strict if parent else False),
        slots=slots,
        label=label,
        files=((*parent.files, label) if parent else (label,)),
    )


def _read(ref: str | Path) -> tuple[str, str, Path | None]:
    ref_str = str(ref)
    if isinstance(ref, str) and "/" not in ref_str and not ref_str.endswith(".toml"):
        if ref_str in builtin_names():
            text = resources.files("stenograph.presets").joinpath(f"{ref_str}.toml").read_text()
            return f"{ref_str} (built-in)", text, None
        if not Path(ref_str).exists():
            raise PresetError(
                f"Preset '{ref_str}' not found: not a built-in preset"
                f" ({', '.join(builtin_names())}) and no such file."
            )
    path = Path(ref)
    try:
        return str(path), read_small_text(path), path.parent
    except FileNotFoundError:
        raise PresetError(f"Preset file {path} not found.") from None
    except (OSError, ValueError) as exc:
        raise PresetError(f"Preset file {path} cannot be read: {exc}.") from None


def _parent_ref(target: str, base_dir: Path | None, label: str) -> str | Path:
    """What ``extends = target`` in preset ``label`` names: a built-in preset, or a file
    relative to the preset's own folder; neither is an error naming both and the closest."""
    names = builtin_names()
    if "/" not in target and not target.endswith(".toml") and target in names:
        return target
    path = Path(target)
    path = path if path.is_absolute() or base_dir is None else base_dir / path
    if not path.exists():
        close = difflib.get_close_matches(target, names, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise PresetError(
            f"Preset {label}: extends = {target!r} is neither a built-in preset"
            f" ({', '.join(names)}) nor a file ({path} not found).{hint}"
        )
    return path


def _check_top_level(data: dict[str, Any], label: str) -> None:
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            close = difflib.get_close_matches(key, TOP_LEVEL_KEYS, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise PresetError(
                f"Unknown key '{key}' in preset {label}. Allowed: {', '.join(TOP_LEVEL_KEYS)}."
                f"{hint}"
            )


def _string(data: dict[str, Any], key: str, label: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise PresetError(f"Preset {label}: '{key}' must be a string, got {value!r}.")
    return value


def _strict(data: dict[str, Any], label: str, default: bool) -> bool:
    value = data.get("strict", default)
    if not isinstance(value, bool):
        raise PresetError(f"Preset {label}: 'strict' must be true or false, got {value!r}.")
    return value


def _slots(data: dict[str, Any], label: str) -> list[SlotSpec]:
    raw = data.get("handlers", [])
    if not isinstance(raw, list):
        raise PresetError(f"Preset {label}: 'handlers' must be a list of [[handlers]] tables.")
    slots = []
    for i, item in enumerate(raw):
        where = f"{label} (handlers[{i}])"
        if not isinstance(item, dict):
            raise PresetError(f"Preset {where} must be a table, got {item!r}.")
        use = item.get("use")
        if not isinstance(use, str) or not use:
            raise PresetError(f'Preset {where} needs use = "<handler name>".')
        values = {k: v for k, v in item.items() if k != "use"}
        slots.append(SlotSpec(use, ((where, values),) if values else (), where))
    return slots


def _merge(parent: tuple[SlotSpec, ...], child: list[SlotSpec], label: str) -> tuple[SlotSpec, ...]:
    """A child slot updates the parent's n-th slot of the same handler, else is appended."""
    merged = list(parent)
    used: dict[str, int] = {}
    for spec in child:
        n = used.get(spec.handler, 0)
        used[spec.handler] = n + 1
        matches = [i for i, s in enumerate(merged[: len(parent)]) if s.handler == spec.handler]
        if n < len(matches):
            base = merged[matches[n]]
            merged[matches[n]] = SlotSpec(spec.handler, base.layers + spec.layers, spec.where)
        else:
            merged.append(spec)
    return tuple(merged)
