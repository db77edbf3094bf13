"""OpenTelemetry: spans per phase and per notes fork, with the GenAI semantic-convention
attributes and stenograph's own, checked with the SDK's in-memory exporter on a real
engine, a wrapped anthropic client and the local Messages-API server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from framework_agents import agent_model, all_handlers_preset, read_file_output, require_extra

import stenograph
from stenograph.integrations.anthropic import wrap
from stenograph.integrations.otel import StenographInstrumentor
from stenograph.testing import Reply

require_extra("opentelemetry.sdk.trace", "otel")
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    StenographInstrumentor().uninstrument()
    provider.shutdown()


def run_agent(client: Any, clock: stenograph.ManualClock, questions: int) -> list[Any]:
    """The host's plain SDK loop: each question gets a read_file call, then an answer; a
    pause of 400 s before each new question. Returns the responses."""
    messages: list[Any] = []
    responses = []
    for i in range(questions):
        clock.advance(400)
        messages.append({"role": "user", "content": f"Question {i}: what does file {i} do?"})
        while True:
            response = client.messages.create(
                model="claude-test", max_tokens=300, tools=TOOLS, messages=messages
            )
            responses.append(response)
            messages.append({"role": "assistant", "content": response.content})
            calls = [b for b in response.content if b.type == "tool_use"]
            if not calls:
                break
            clock.advance(5)
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": c.id,
                    "content": read_file_output(c.input["path"]),
                }
                for c in calls
            ]
            messages.append({"role": "user", "content": results})
    return responses


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, span.name
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


def test_phases_and_notes_forks_are_spans_with_genai_and_handler_attributes(
    tmp_path, messages_server, traced
):
    provider, exporter = traced
    anthropic_client = anthropic.Anthropic(  # the SDK's own spans go to the same provider
        api_key="k",
        base_url=messages_server.url,
        max_retries=0,
        open_telemetry={"tracer_provider": provider},
    )
    engine = stenograph.Engine.from_preset(
        all_handlers_preset(tmp_path), services={"anthropic": anthropic_client}
    )
    StenographInstrumentor().instrument(engine=engine, tracer_provider=provider)
    clock = stenograph.ManualClock(1e9)
    session = engine.open_session("otel-1", state_dir=tmp_path, clock=clock)
    messages_server.responder = agent_model
    with provider.get_tracer("host").start_as_current_span("agent turn") as host:
        responses = run_agent(wrap(anthropic_client, session), clock, questions=4)
        assert session.wait_for_background(10)
    session.close()
    spans = list(exporter.get_finished_spans())
    assert {s.context.trace_id for s in spans} == {host.get_span_context().trace_id}

    pre, post = named(spans, "stenograph.pre_call"), named(spans, "stenograph.post_sampling")
    assert len(pre) == len(post) == len(responses)
    for span in pre + post:
        assert parent_of(span, spans).name == "agent turn" and span.kind is SpanKind.INTERNAL
        attributes = span.attributes or {}
        assert attributes["stenograph.session.id"] == "otel-1"
        assert attributes["gen_ai.conversation.id"] == "otel-1"
        assert attributes["stenograph.preset"] == engine.preset.name
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == attributes["gen_ai.system"] == "anthropic"
        assert attributes["gen_ai.request.model"] == "claude-test"
    for span, response in zip(post, responses, strict=True):
        attributes = span.attributes or {}
        usage = response.usage
        assert attributes["gen_ai.response.id"] == response.id
        assert attributes["gen_ai.response.finish_reasons"] == (response.stop_reason,)
        assert attributes["gen_ai.usage.input_tokens"] == (
            usage.input_tokens
            + (usage.cache_read_input_tokens or 0)
            + (usage.cache_creation_input_tokens or 0)
        )
        assert attributes["gen_ai.usage.output_tokens"] == usage.output_tokens
        assert isinstance(attributes["stenograph.threshold.extract"], bool)
        assert "ThresholdDecision" in [e.name for e in span.events]
    assert any((s.attributes or {}).get("stenograph.threshold.extract") for s in post)

    memorizing = [s for s in pre if "stenograph.memorize.entries" in (s.attributes or {})]
    assert memorizing and all(s.attributes["stenograph.memorize.entries"] > 0 for s in memorizing)
    event = next(e for e in memorizing[0].events if e.name == "EntriesMemorized")
    assert event.attributes["handler"] == "inactivity-memorize"
    assert event.attributes["gap_seconds"] >= 300
    compaction = {k for s in pre for k in s.attributes or {} if k.startswith("stenograph.comp")}
    assert compaction & {"stenograph.compaction.tokens_before", "stenograph.compaction.skipped"}

    forks = named(spans, "stenograph.extraction")
    sdk_calls = [s for s in spans if s.kind is SpanKind.CLIENT]
    finished = [e for e in session.events if e.kind == "ExtractionFinished"]
    assert forks and len(forks) == len(finished)
    for fork, done in zip(forks, finished, strict=True):
        attributes = fork.attributes or {}
        assert parent_of(fork, spans).name == "stenograph.post_sampling"
        assert attributes["stenograph.extraction.backend"] == "anthropic"
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert attributes["gen_ai.agent.name"] == "forked-extraction"
        assert attributes["stenograph.extraction.turns"] == done.turns
        assert attributes["gen_ai.usage.output_tokens"] == done.output_tokens
        assert [e.name for e in fork.events][:1] == ["ExtractionStarted"]
        assert "ExtractionFinished" in [e.name for e in fork.events]
        calls = [s for s in sdk_calls if parent_of(s, spans) is fork]  # the SDK's own
        assert len(calls) == done.turns
        total = sum((c.attributes or {})["gen_ai.usage.input_tokens"] for c in calls)
        assert attributes["gen_ai.usage.input_tokens"] == total
    main_calls = [s for s in sdk_calls if parent_of(s, spans).name == "agent turn"]
    assert len(main_calls) == len(responses)


def test_a_failed_fork_is_an_error_span(tmp_path, messages_server, anthropic_client, traced):
    provider, exporter = traced
    engine = stenograph.Engine.from_preset(
        all_handlers_preset(tmp_path), services={"anthropic": anthropic_client}
    )
    StenographInstrumentor().instrument(tracer_provider=provider)  # every engine

    def respond(request: Any) -> Reply:
        if "update the session notes" in str(request.body["messages"][-1]):
            return Reply.error(500)
        return agent_model(request)

    messages_server.responder = respond
    clock = stenograph.ManualClock(1e9)
    session = engine.open_session("otel-2", state_dir=tmp_path, clock=clock)
    run_agent(wrap(anthropic_client, session), clock, questions=3)
    assert session.wait_for_background(10)
    session.close()
    forks = named(list(exporter.get_finished_spans()), "stenograph.extraction")
    assert forks and all(f.status.status_code is StatusCode.ERROR for f in forks)
    assert all((f.attributes or {})["error.type"] == "InternalServerError" for f in forks)


def test_an_async_hosts_phases_are_children_of_its_span(tmp_path, messages_server, traced):
    provider, exporter = traced
    engine = stenograph.Engine.from_preset("default")
    StenographInstrumentor().instrument(engine=engine, tracer_provider=provider)
    session = engine.open_session("otel-3", state_dir=tmp_path)  # phases run in a thread
    client = wrap(anthropic.AsyncAnthropic(api_key="k", base_url=messages_server.url), session)
    messages_server.script(Reply.text("Hello."))

    async def turn() -> None:
        with provider.get_tracer("host").start_as_current_span("async turn"):
            await client.messages.create(
                model="claude-test", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            )

    asyncio.run(turn())
    session.close()
    spans = list(exporter.get_finished_spans())
    phases = [s for s in spans if s.name.startswith("stenograph.")]
    assert [s.name for s in phases] == ["stenograph.pre_call", "stenograph.post_sampling"]
    assert all(parent_of(s, spans).name == "async turn" for s in phases)


def test_uninstrumented_engines_make_no_spans(tmp_path, traced):
    provider, exporter = traced
    instrumentor = StenographInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    quiet = stenograph.Engine.from_preset("default")
    instrumentor.uninstrument(engine=quiet)
    assert instrumentor.is_instrumented() and not instrumentor.is_instrumented(quiet)
    for engine in (quiet, stenograph.Engine.from_preset("default")):
        session = engine.open_session("s", state_dir=None)
        session.append({"role": "user", "content": "hi"})
        session.pre_call(model="m")
        session.post_sampling({"role": "assistant", "content": "hello"})
        session.close()
    assert [s.name for s in exporter.get_finished_spans()] == [
        "stenograph.pre_call",
        "stenograph.post_sampling",
    ]
    instrumentor.uninstrument()
    assert not instrumentor.is_instrumented()


NO_API = """
import sys
sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
import stenograph
from stenograph.integrations.otel import StenographInstrumentor
engine = stenograph.Engine.from_preset("default")
assert StenographInstrumentor().instrument(engine=engine) is False
session = engine.open_session("s", state_dir=None)
session.append({"role": "user", "content": "hi"})
session.pre_call(model="m")
session.post_sampling({"role": "assistant", "content": "hello"})
session.close()
print("ok")
"""

PLAIN = """
import sys
import stenograph
session = stenograph.Engine.from_preset("default").open_session("s", state_dir=None)
session.append({"role": "user", "content": "hi"})
session.pre_call(model="m")
session.post_sampling({"role": "assistant", "content": "hello"})
session.close()
print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
"""


def test_without_the_api_instrument_is_a_no_op_and_nothing_imports_it():
    done = subprocess.run([sys.executable, "-c", NO_API], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert "opentelemetry-api is not installed" in done.stderr
    done = subprocess.run([sys.executable, "-c", PLAIN], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
