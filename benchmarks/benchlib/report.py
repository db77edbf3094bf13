"""What every script shares around its lanes: the command line (``--quick``, ``--json``), the
machine description, progress lines, the JSON or human-readable output."""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .stats import Samples


def machine() -> dict[str, Any]:
    """Where the figures come from, with the load average when the run started."""
    import anthropic
    import tiktoken

    import stenograph

    return {
        "nproc": os.cpu_count(),
        "loadavg": [round(load, 2) for load in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "stenograph": getattr(stenograph, "__version__", "?"),
        "anthropic": anthropic.__version__,
        "tiktoken": getattr(tiktoken, "__version__", "?"),
        "gc_enabled": gc.isenabled(),
    }


def parser(doc: str) -> argparse.ArgumentParser:
    """``--quick`` and ``--json``, as every benchmark here takes them."""
    out = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    out.add_argument("--quick", action="store_true", help="a smoke run (seconds, for CI)")
    out.add_argument("--json", action="store_true", help="print JSON results only")
    return out


def cli(doc: str, argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed ``--quick`` / ``--json`` command line."""
    return parser(doc).parse_args(argv)


class Log:
    """Progress lines on stderr, stamped with the seconds since the start."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {message}", file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.started


def to_json(value: Any) -> Any:
    """Results as JSON-ready data (Samples summarised, floats rounded)."""
    if isinstance(value, Samples):
        return value.summary()
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, Path):
        return str(value)
    return value


def finish(results: dict[str, Any], as_json: bool, report: Callable[[dict[str, Any]], None]) -> int:
    """Print the report (or the JSON); exit status 0."""
    if as_json:
        print(json.dumps(to_json(results), indent=1, ensure_ascii=False))
    else:
        print(f"machine: {results['machine']}")
        report(results)
        print(f"\ntargets: {results.get('targets')}\nwall time {results['wall_seconds']} s")
    return 0


def quiet_model_deprecation() -> None:
    """The SDK warns that the house model name is deprecated; irrelevant to a local server."""
    warnings.filterwarnings(
        "ignore", message=r"The model .* is deprecated", category=DeprecationWarning
    )


def warm_tokenizer() -> float:
    """Load the tiktoken encoding once (a one-time cost per process); milliseconds taken."""
    from stenograph.engine.tokens import count_tiktoken

    start = time.perf_counter_ns()
    count_tiktoken("warm up")
    return (time.perf_counter_ns() - start) / 1e6
