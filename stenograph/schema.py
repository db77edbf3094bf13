"""A JSON Schema for preset files, generated from the handler settings models.

Setting names are the camelCase ones presets use; each ``[[handlers]]`` table is checked
against the settings of the handler its ``use`` names. Editors (taplo, Even Better TOML)
read it through a ``#:schema <file>`` line at the top of a preset.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic.alias_generators import to_camel

if TYPE_CHECKING:
    from .engine.discovery import HandlerCatalog
    from .engine.settings import HandlerSettings

DRAFT = "http://json-schema.org/draft-07/schema#"
TOP_LEVEL = {
    "name": {"type": "string", "description": "The preset's name (default: the file's stem)."},
    "description": {"type": "string", "description": "What this preset is for."},
    "extends": {
        "type": "string",
        "description": "A built-in preset name, or a path relative to this file.",
    },
    "strict": {
        "type": "boolean",
        "default": False,
        "description": "true: handler failures and request violations raise (for tests).",
    },
}


def preset_schema(catalog: HandlerCatalog) -> dict[str, Any]:
    """The schema of a preset file for every handler ``catalog`` can load."""
    definitions: dict[str, Any] = {}
    names = catalog.names()
    for name in names:
        handler = catalog.get(name)
        definitions[name] = _slot_schema(name, handler.summary, handler.Settings, definitions)
    use = {"enum": names, "description": "The handler this slot runs (`stenograph handlers`)."}
    slot = {
        "type": "object",
        "required": ["use"],
        "properties": {"use": use},
        "allOf": [
            {
                "if": {"properties": {"use": {"const": name}}, "required": ["use"]},
                "then": {"$ref": f"#/definitions/{name}"},
            }
            for name in names
        ],
    }
    handlers = {
        "type": "array",
        "items": slot,
        "description": "Handler slots, in the order they run; a handler may appear twice.",
    }
    return {
        "$schema": DRAFT,
        "title": "stenograph preset",
        "type": "object",
        "additionalProperties": False,
        "properties": {**TOP_LEVEL, "handlers": handlers},
        "definitions": definitions,
    }


def schema_text(catalog: HandlerCatalog) -> str:
    """The schema as indented JSON, ending in a newline."""
    return json.dumps(preset_schema(catalog), indent=2, ensure_ascii=False) + "\n"


def _slot_schema(
    name: str, summary: str, model: type[HandlerSettings], definitions: dict[str, Any]
) -> dict[str, Any]:
    generated = model.model_json_schema(ref_template="#/definitions/{model}")
    definitions.update(generated.get("$defs", {}))
    properties: dict[str, Any] = {"use": {"const": name}}
    for field_name, info in model.model_fields.items():
        field = _tomlable(generated["properties"][field_name])
        field.pop("title", None)
        default = info.get_default(call_default_factory=True)
        field.pop("default", None)
        if default is not None and not info.is_required():
            field["default"] = _jsonable(default)
        properties[to_camel(field_name)] = field
    required = [to_camel(n) for n, info in model.model_fields.items() if info.is_required()]
    return {
        "type": "object",
        "description": summary,
        "properties": properties,
        "required": ["use", *required],
        "additionalProperties": False,
    }


def _tomlable(field: dict[str, Any]) -> dict[str, Any]:
    """TOML has no null: an optional setting is its other branch (leave the key out)."""
    field = dict(field)
    branches = [b for b in field.get("anyOf", ()) if b.get("type") != "null"]
    if "anyOf" in field and len(branches) < len(field["anyOf"]):
        del field["anyOf"]
        field.update(branches[0] if len(branches) == 1 else {"anyOf": branches})
    return field


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
