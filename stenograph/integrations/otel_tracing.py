"""The spans themselves, on the OpenTelemetry API (imported only by
``StenographInstrumentor.instrument``): GenAI semantic-convention attributes for the model
calls, ``stenograph.*`` attributes for the handlers' decisions, events as span events."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import __version__
from ..engine.context import PostSamplingCall, PreCallCall
from ..engine.events import Event

if TYPE_CHECKING:
    from ..engine.session import Session

log = logging.getLogger("stenograph.integrations.otel")
SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
PROVIDER = "anthropic"
OURS = otel_context.create_key("stenograph-span")  # the span events go to
REQUEST_OPTIONS = {
    "max_tokens": "gen_ai.request.max_tokens",
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "stop_sequences": "gen_ai.request.stop_sequences",
}
USAGE_KEYS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens",
)
Attributes = dict[str, Any]


class OtelTelemetry:
    """stenograph's :class:`~stenograph.engine.telemetry.Telemetry` on OpenTelemetry."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self.tracer = trace.get_tracer(
            "stenograph", __version__, tracer_provider=tracer_provider, schema_url=SCHEMA_URL
        )

    def span(self, session: Session, name: str, call: Any) -> AbstractContextManager[object]:
        """The span ``stenograph.<name>``, current while it is open."""
        return self._span(session, name, call)

    @contextmanager
    def _span(self, session: Session, name: str, call: Any) -> Iterator[object]:
        attributes = {
            "stenograph.session.id": session.id,
            "stenograph.preset": session.engine.preset.name,
            "gen_ai.conversation.id": session.id,
            **_start_attributes(call),
        }
        with self.tracer.start_as_current_span(
            f"stenograph.{name}", kind=SpanKind.INTERNAL, attributes=attributes
        ) as span:
            token = otel_context.attach(otel_context.set_value(OURS, span))
            try:
                yield span
                span.set_attributes(_end_attributes(call))
            finally:
                otel_context.detach(token)

    def event(self, session: Session, event: Event) -> None:
        """A span event on the stenograph span open on this thread (none: dropped), and the
        event's figures as the span's attributes."""
        span = trace.get_current_span()
        if otel_context.get_value(OURS) is not span or not span.is_recording():
            return
        try:
            span.add_event(event.kind, _flat(event.to_json()))
            figures = FIGURES.get(event.kind)
            if figures is not None:
                span.set_attributes(figures(event))
            if event.kind == "ExtractionFailed":
                span.set_status(Status(StatusCode.ERROR, str(getattr(event, "error", ""))))
        except Exception:  # telemetry never breaks the session
            log.exception("session %s: event %s not traced", session.id, event.kind)

    def carry(self, work: Callable[[], object]) -> Callable[[], object]:
        """``work`` run in the current context (its spans are children of the current one)."""
        captured = otel_context.get_current()

        def run() -> object:
            token = otel_context.attach(captured)
            try:
                return work()
            finally:
                otel_context.detach(token)

        return run


# attributes of the call -------------------------------------------------------------


def _start_attributes(call: Any) -> Attributes:
    if isinstance(call, PreCallCall):
        return {
            **_chat(call.model),
            **_options(call.extra),
            "stenograph.request.new_entries": call.end - call.input_start,
        }
    if isinstance(call, PostSamplingCall):
        model = (call.request or {}).get("model")
        found = _chat(model) if model else {}
        if call.response is not None:
            found |= _entry_response(call.response.meta, call.response.usage)
        return found
    return {}


def _end_attributes(call: Any) -> Attributes:
    if isinstance(call, PreCallCall):
        request = call.session.last_request or {}
        return {"stenograph.request.messages": len(request.get("messages", ()))}
    return {}


def _chat(model: Any) -> Attributes:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.system": PROVIDER,
        "gen_ai.request.model": str(model),
    }


def _options(request: dict[str, Any]) -> Attributes:
    found: Attributes = {}
    for key, attribute in REQUEST_OPTIONS.items():
        value = request.get(key)
        if isinstance(value, int | float | str) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            found[attribute] = value
    return found


def _entry_response(meta: dict[str, Any], usage: dict[str, Any] | None) -> Attributes:
    """The response's id, model and stop reason, and its usage in the conventions' terms
    (``gen_ai.usage.input_tokens`` counts the cached input too, the cache figures split
    it)."""
    found: Attributes = {}
    if meta.get("id"):
        found["gen_ai.response.id"] = str(meta["id"])
    if meta.get("model"):
        found["gen_ai.response.model"] = str(meta["model"])
    if meta.get("stop_reason"):
        found["gen_ai.response.finish_reasons"] = [str(meta["stop_reason"])]
    return {**found, **_usage(usage or {})}


def _usage(usage: dict[str, Any]) -> Attributes:
    figures = {k: int(usage.get(k) or 0) for k in USAGE_KEYS}
    if not any(k in usage for k in USAGE_KEYS):
        return {}
    read, written = figures["cache_read_input_tokens"], figures["cache_creation_input_tokens"]
    return {
        "gen_ai.usage.input_tokens": figures["input_tokens"] + read + written,
        "gen_ai.usage.output_tokens": figures["output_tokens"],
        "gen_ai.usage.cache_read.input_tokens": read,
        "gen_ai.usage.cache_creation.input_tokens": written,
    }


# the handlers' decisions --------------------------------------------------------------


def _fields(group: str, *names: str) -> Callable[[Any], Attributes]:
    """The event's fields ``names`` as ``stenograph.<group>.<name>``."""
    return lambda event: {f"stenograph.{group}.{n}": getattr(event, n) for n in names}


def _memorized(event: Any) -> Attributes:
    return {
        "stenograph.memorize.entries": len(event.uuids),
        "stenograph.memorize.tokens_estimated": event.estimated,
        **_fields("memorize", "tokens_saved", "gap_seconds", "threshold_seconds")(event),
    }


def _started(event: Any) -> Attributes:
    found: Attributes = {"stenograph.extraction.backend": event.backend}
    if event.backend == PROVIDER:
        found |= {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.system": PROVIDER,
            "gen_ai.agent.name": event.handler,
        }
    return found


def _finished(event: Any) -> Attributes:
    found: Attributes = {
        "stenograph.extraction.turns": event.turns,
        "stenograph.extraction.upto_uuid": event.upto_uuid,
    }
    if event.backend == PROVIDER:
        found |= _usage({k: getattr(event, k) for k in USAGE_KEYS})
    return found


FIGURES: dict[str, Callable[[Any], Attributes]] = {
    "EntriesMemorized": _memorized,
    "MemorizeSkipped": lambda e: {"stenograph.memorize.skipped": e.reason},
    "CacheTtlDetected": lambda e: {"stenograph.memorize.cache_ttl": e.ttl},
    "ThresholdDecision": _fields(
        "threshold", "extract", "reason", "tokens", "growth", "tool_calls"
    ),
    "Compacted": _fields("compaction", "tokens_before", "tokens_after", "kept_messages"),
    "CompactionSkipped": lambda e: {"stenograph.compaction.skipped": e.reason},
    "ExtractionStarted": _started,
    "ExtractionFinished": _finished,
    "ExtractionFailed": lambda e: {"error.type": e.error.split(":", 1)[0]},
    "RequestViolation": lambda e: {"stenograph.request.problems": len(e.problems)},
    "HandlerFailed": lambda e: {"stenograph.handler_failed": e.handler},
}


def _flat(data: dict[str, Any]) -> Attributes:
    """An event's JSON as span-event attributes: scalars and lists of strings as they are,
    anything else as JSON text."""
    found: Attributes = {}
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, str | bool | int | float) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            found[key] = value
        else:
            found[key] = json.dumps(value, sort_keys=True)
    return found
