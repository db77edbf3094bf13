"""The price table: dollars per million tokens per model, cache multipliers, minimum
cacheable lengths; built in (``prices.toml``) and overridable by a file of the same shape."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..engine.errors import StenographError

MODEL_KEYS = ("input", "output", "min_cacheable_tokens")
MULTIPLIER_KEYS = ("cache_write_5m", "cache_write_1h", "cache_read")


def usd(amount: float) -> str:
    """US dollars to four decimals, the sign before the symbol: ``-$0.0213``."""
    return f"-${-amount:,.4f}" if amount < 0 else f"${amount:,.4f}"


class PriceError(StenographError):
    """A price file cannot be read or holds an unknown key or a bad value."""


@dataclass(frozen=True)
class ModelPrice:
    """What one model costs, in US dollars per million tokens."""

    name: str
    input: float
    output: float
    min_cacheable_tokens: int
    cache_write_5m: float = 1.25
    cache_write_1h: float = 2.0
    cache_read: float = 0.1

    def cost(self, uncached: int, write_5m: int, write_1h: int, read: int, output: int) -> float:
        """Dollars for one call with these token counts."""
        base = uncached + write_5m * self.cache_write_5m + write_1h * self.cache_write_1h
        return (self.input * (base + read * self.cache_read) + self.output * output) / 1e6


@dataclass(frozen=True)
class PriceTable:
    """Model rates by name prefix, the cache multipliers, the files they came from."""

    rates: dict[str, dict[str, float]]
    multipliers: dict[str, float]
    fallback: str
    sources: tuple[str, ...]

    def for_model(self, model: str) -> ModelPrice:
        """The entry of the longest key ``model`` starts with, else the fallback's."""
        keys = [key for key in self.rates if model.startswith(key)]
        name = max(keys, key=len) if keys else self.fallback
        rate = self.rates[name]
        return ModelPrice(
            name,
            rate["input"],
            rate["output"],
            int(rate["min_cacheable_tokens"]),
            **self.multipliers,
        )

    def to_json(self) -> dict[str, Any]:
        """The table as JSON: ``unit``, ``multipliers``, ``fallback``, ``sources``, ``models``."""
        return {
            "unit": "USD per million tokens",
            "multipliers": dict(self.multipliers),
            "fallback": self.fallback,
            "sources": list(self.sources),
            "models": {name: dict(rate) for name, rate in self.rates.items()},
        }


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The built-in table, updated key by key with the file at ``path`` when given."""
    builtin = resources.files(__package__).joinpath("prices.toml").read_text("utf-8")
    table = _apply(PriceTable({}, {}, "", ()), tomllib.loads(builtin), "built-in prices")
    if path is None:
        return table
    try:
        data = tomllib.loads(Path(path).read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PriceError(f"{path}: cannot read the price file: {exc}") from exc
    return _apply(table, data, str(path))


def _apply(table: PriceTable, data: dict[str, Any], source: str) -> PriceTable:
    """``table`` with what ``data`` (one parsed price file) sets, checked key by key."""
    _check_keys(data, ("fallback", "multipliers", "models"), source, "")
    given = data.get("multipliers", {})
    _check_keys(given, MULTIPLIER_KEYS, source, "multipliers.")
    multipliers = table.multipliers | {
        key: _number(value, source, f"multipliers.{key}") for key, value in given.items()
    }
    rates = {name: dict(rate) for name, rate in table.rates.items()}
    for name, fields in data.get("models", {}).items():
        where = f"models.{name}."
        _check_keys(fields, MODEL_KEYS, source, where)
        rate = rates.setdefault(name, {})
        rate.update({key: _number(value, source, where + key) for key, value in fields.items()})
        missing = [key for key in MODEL_KEYS if key not in rate]
        if missing:
            raise PriceError(f"{source}: {where[:-1]} lacks {', '.join(missing)}")
    missing = [key for key in MULTIPLIER_KEYS if key not in multipliers]
    if missing:
        raise PriceError(f"{source}: multipliers lacks {', '.join(missing)}")
    fallback = data.get("fallback", table.fallback)
    if fallback not in rates:
        raise PriceError(
            f"{source}: fallback {fallback!r} is not a model of the table;"
            f" known: {', '.join(sorted(rates))}"
        )
    return PriceTable(rates, multipliers, fallback, (*table.sources, source))


def _check_keys(data: Any, allowed: tuple[str, ...], source: str, where: str) -> None:
    if not isinstance(data, dict):
        raise PriceError(f"{source}: {where[:-1] or 'the file'} must be a table")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise PriceError(
            f"{source}: unknown key {where}{unknown[0]}; allowed: {', '.join(allowed)}"
        )


def _number(value: Any, source: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PriceError(f"{source}: {where} must be a number >= 0, got {value!r}")
    return float(value)
