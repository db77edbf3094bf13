"""OpenTelemetry for stenograph, the way the ``opentelemetry-instrumentation-*`` packages
do it:

    from stenograph.integrations.otel import StenographInstrumentor
    StenographInstrumentor().instrument(tracer_provider=provider)   # every engine
    StenographInstrumentor().instrument(engine=engine)              # one engine

Each pre-call and post-sampling phase gets a span, and so does each run of the notes
writer (with a ``chat`` span per model call of the fork); the spans carry the GenAI
semantic-convention attributes of the model call and stenograph's own attributes for what
the handlers decided, and every event is a span event. Needs ``opentelemetry-api``
(``pip install 'stenograph[otel]'``); without it, ``instrument()`` logs a warning and does
nothing. Nothing of OpenTelemetry is imported until ``instrument()`` is called.
"""

from __future__ import annotations

import logging
from typing import Any

from ..engine.engine import Engine

log = logging.getLogger("stenograph.integrations.otel")


class StenographInstrumentor:
    """Turns stenograph's spans on and off: for every engine (the default) or one."""

    def instrument(self, *, tracer_provider: Any = None, engine: Engine | None = None) -> bool:
        """Trace every engine (``engine``: only that one) with ``tracer_provider`` (default:
        the global one, ``opentelemetry.trace.get_tracer_provider()``). Returns False, with
        a warning, when ``opentelemetry-api`` is not installed."""
        try:
            from .otel_tracing import OtelTelemetry
        except ImportError as exc:
            log.warning(
                "stenograph telemetry stays off: opentelemetry-api is not installed"
                " (pip install 'stenograph[otel]'): %s",
                exc,
            )
            return False
        telemetry = OtelTelemetry(tracer_provider)
        if engine is None:
            Engine.telemetry = telemetry
        else:
            engine.telemetry = telemetry
        return True

    def uninstrument(self, *, engine: Engine | None = None) -> None:
        """Stop tracing every engine (``engine``: only that one, even when every engine is
        traced)."""
        if engine is None:
            Engine.telemetry = None
        else:
            engine.telemetry = None

    @staticmethod
    def is_instrumented(engine: Engine | None = None) -> bool:
        """Whether ``engine`` (default: engines in general) is traced."""
        return (engine.telemetry if engine is not None else Engine.telemetry) is not None
