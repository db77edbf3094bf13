"""Handler settings: one pydantic-settings model per handler, resolved in layers.

Layers, lowest first: the model's defaults < the preset file (and what it extends) <
environment variables ``STENOGRAPH_<HANDLER>__<FIELD>`` < ``overrides=`` in code. Keys
may be written in camelCase (as in the seeds) or snake_case.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ValidationError
from pydantic.alias_generators import to_camel, to_snake
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from .errors import PresetError


class HandlerSettings(BaseSettings):
    """Base of every handler's settings model: unknown keys are refused."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, validate_default=True)

    @classmethod
    def settings_customise_sources(  # type: ignore[override]
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        **_sources: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only explicit values: the engine layers env and presets itself, on purpose."""
        return (init_settings,)


def env_prefix(handler: str) -> str:
    """``inactivity-memorize`` -> ``STENOGRAPH_INACTIVITY_MEMORIZE__``."""
    return "STENOGRAPH_" + handler.upper().replace("-", "_").replace(".", "_") + "__"


def env_warnings(
    handler_names: list[str],
    models: Mapping[str, type[HandlerSettings]],
    environ: Mapping[str, str] = os.environ,
) -> list[str]:
    """``STENOGRAPH_<HANDLER>__<FIELD>`` variables that set nothing: an unknown handler, or
    a field the handler (when ``models`` has its settings) does not have; each with the
    closest name. Variables without ``__`` belong to other tools and are not looked at."""
    prefixes = {env_prefix(name): name for name in handler_names}
    warnings = []
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith("STENOGRAPH_") or "__" not in upper:
            continue
        head, _, field = upper.partition("__")
        handler = prefixes.get(head + "__")
        if handler is None:
            close = difflib.get_close_matches(head + "__", list(prefixes), n=1)
            hint = f" Did you mean {close[0]}{field}?" if close else ""
            warnings.append(
                f"Environment variable {variable} is ignored: no handler named like"
                f" {head[len('STENOGRAPH_') :]!r} (handlers: {', '.join(handler_names)}).{hint}"
            )
            continue
        model = models.get(handler)
        fields = [name.upper() for name in model.model_fields] if model else []
        if model is None or field in fields:
            continue
        squeezed = {name.replace("_", ""): name for name in fields}
        close = [squeezed[field.replace("_", "")]] if field.replace("_", "") in squeezed else []
        close = close or difflib.get_close_matches(field, fields, n=1)
        hint = f" Did you mean {head}__{close[0]}?" if close else ""
        warnings.append(
            f"Environment variable {variable} is ignored: handler '{handler}' has no setting"
            f" {field!r} (settings: {', '.join(fields)}).{hint}"
        )
    return warnings


@dataclass(frozen=True)
class ResolvedSettings:
    """A validated settings object and, per field, the layer that set it."""

    values: HandlerSettings
    origins: dict[str, str]


class SettingsResolver:
    """Turns raw layered values into one validated settings object for a slot."""

    LAYER_DEFAULT: ClassVar[str] = "default"

    def __init__(self, handler: str, model: type[HandlerSettings], where: str) -> None:
        self.handler, self.model, self.where = handler, model, where

    def field_name(self, key: str) -> str:
        """Map a camelCase or snake_case key to the model's field name, or fail clearly."""
        fields = self.model.model_fields
        for candidate in (key, to_snake(key)):
            if candidate in fields:
                return candidate
        allowed = sorted(to_camel(name) for name in fields)
        close = difflib.get_close_matches(to_camel(to_snake(key)), allowed, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise PresetError(
            f"Unknown setting '{key}' for handler '{self.handler}' in {self.where}."
            f" Allowed: {', '.join(allowed) or '(none)'}.{hint}"
        )

    def normalise(self, values: dict[str, Any]) -> dict[str, Any]:
        """Keys mapped to field names; a key given twice (camel + snake) is an error."""
        out: dict[str, Any] = {}
        for key, value in values.items():
            name = self.field_name(str(key))
            if name in out:
                raise PresetError(
                    f"Setting '{key}' of '{self.handler}' given twice in {self.where}."
                )
            out[name] = value
        return out

    def env_values(self) -> dict[str, Any]:
        """Values from ``STENOGRAPH_<HANDLER>__<FIELD>`` variables (case-insensitive)."""
        source = EnvSettingsSource(self.model, env_prefix=env_prefix(self.handler))
        try:
            values = source()
        except SettingsError as exc:  # a list/dict setting whose variable is not JSON
            raise PresetError(self._env_error(str(exc))) from None
        return {k: v for k, v in values.items() if k in self.model.model_fields}

    def _env_error(self, message: str) -> str:
        found = re.search(r'field "(\w+)"', message)
        name = found.group(1) if found else ""
        variable = f"{env_prefix(self.handler)}{name.upper()}"
        value = next((v for k, v in os.environ.items() if k.upper() == variable), None)
        return (
            f"Environment variable {variable} (setting '{to_camel(name)}' of handler"
            f" '{self.handler}') must be JSON, e.g. '[\"Read\", \"Bash\"]' for a list;"
            f" got {value!r}."
        )

    def resolve(self, layers: list[tuple[str, dict[str, Any]]]) -> ResolvedSettings:
        """Merge ``(label, values)`` layers lowest first, then validate once."""
        merged: dict[str, Any] = {}
        origins = {name: self.LAYER_DEFAULT for name in self.model.model_fields}
        for label, values in layers:
            for name, value in values.items():
                merged[name] = value
                origins[name] = label
        try:
            return ResolvedSettings(self.model(**merged), origins)
        except ValidationError as exc:
            raise PresetError(self._explain(exc, origins)) from None

    def _explain(self, exc: ValidationError, origins: dict[str, str]) -> str:
        lines = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"])
            what = f"value for '{to_camel(name)}'" if name else "settings"  # a check across them
            field = self.model.model_fields.get(str(err["loc"][0])) if err["loc"] else None
            allowed = f" ({field.description})" if field and field.description else ""
            layer = origins.get(str(err["loc"][0]), "") if err["loc"] else _layers(err, origins)
            lines.append(
                f"Invalid {what} of handler '{self.handler}' in"
                f" {self.where} (set by {layer}): {err['msg']}; got {err.get('input')!r}.{allowed}"
            )
        return "\n".join(lines)


def _layers(err: Any, origins: dict[str, str]) -> str:
    """Who set the values a check across settings refused (its input: the settings given)."""
    given = err.get("input")
    names = [str(k) for k in given if k in origins] if isinstance(given, dict) else []
    return "; ".join(f"{to_camel(n)}: {origins[n]}" for n in names) or "the defaults"
