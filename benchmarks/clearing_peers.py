"""Clearing old tool results, side by side with LangChain and pydantic-ai-harness.

Two comparisons, each interleaved round by round on the same synthetic history and then the
same turns (one call: the tool results in, the request out, the reply in; no model):

* **clearing**: ``memorized``, a session on the ``inactivity-only`` preset whose history was
  memorized by a 600 s pause (the reduced forms sent on every call), next to ``langchain``:
  ``ContextEditingMiddleware(edits=[ClearToolUsesEdit()])`` (defaults: trigger 100,000
  approximate tokens, keep 3) run the way ``create_agent``'s model node runs
  ``wrap_model_call``, clearing every tool result but the last 3 on every call; and
  ``stenograph middleware``, the same agent list and calls through our
  ``StenographMiddleware`` on the same preset, memorized the same way (needs the
  ``langchain`` extra; skipped with the reason without it);
* **check only**: ``inactivity-only``, the same preset with no pause (its check runs, nothing
  is memorized), next to ``harness``: ``ClearToolResults(max_tokens=..., keep_pairs=3)`` of
  ``pydantic-ai-harness`` with a trigger no history here reaches. The harness pins its own
  ``pydantic-ai-slim``, so it runs in its own interpreter (``--harness-python``; the current
  one when it has the harness) as a worker fed the same history: the two processes take
  turns call by call (``benchlib/harness_worker.py``). Without the harness it is skipped,
  with the reason printed.

Run ``python benchmarks/clearing_peers.py [--quick] [--json] [--harness-python PY]``; see
``benchmarks/README.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib.engines import make_engine
from benchlib.history import MODEL, SYSTEM_PROMPT, T0, TOOLS, HistoryCache, digest
from benchlib.lanes import Lane, SessionLane, interleave
from benchlib.report import Log, finish, machine, parser, warm_tokenizer
from benchlib.stats import fmt_us, ratio, verdict

CLEARING_SIZES, QUICK_CLEARING_SIZES = (300, 3_000), (300,)
CHECK_SIZES: tuple[int, ...] = (100, 1_000, 3_000, 10_000)
QUICK_CHECK_SIZES = (100, 1_000)
CLEARING_CALLS, QUICK_CLEARING_CALLS = 60, 4
CHECK_CALLS, QUICK_CHECK_CALLS = 300, 20
PAUSE_SECONDS = 600.0
LANGCHAIN_TARGET = 1_000.0  # langchain / memorized at 3,000 messages
HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------------------------
# LangChain
# ---------------------------------------------------------------------------------------------


def langchain_missing() -> str | None:
    """Why the LangChain lane cannot run (None: it can)."""
    try:
        import langchain.agents.middleware  # noqa: F401
        import langchain_core.messages  # noqa: F401
    except ImportError as exc:
        return f"langchain is not installed ({exc}); pip install -e '.[bench]'"
    return None


def to_langchain(message: dict[str, Any], names: dict[str, str]) -> list[Any]:
    """An Anthropic-format message as LangChain message objects (one per tool result).
    ``names`` maps tool_use ids to tool names (filled from assistant turns)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    blocks = message["content"]
    text = "\n".join(b["text"] for b in blocks if b["type"] == "text")
    if message["role"] == "assistant":
        calls = [
            {"name": b["name"], "args": b["input"], "id": b["id"], "type": "tool_call"}
            for b in blocks
            if b["type"] == "tool_use"
        ]
        names.update((c["id"], c["name"]) for c in calls)
        usage = message["usage"]
        total_in = sum(usage[k] for k in usage if k != "output_tokens")
        metadata = {
            "input_tokens": total_in,
            "output_tokens": usage["output_tokens"],
            "total_tokens": total_in + usage["output_tokens"],
        }
        meta = {"model_provider": "anthropic", "model_name": MODEL}
        return [
            AIMessage(
                content=text,
                tool_calls=calls,
                id=message["id"],
                usage_metadata=metadata,
                response_metadata={**meta, "stop_reason": message["stop_reason"]},
            )
        ]
    out: list[Any] = [
        ToolMessage(
            content=block["content"],
            tool_call_id=block["tool_use_id"],
            name=names.get(block["tool_use_id"]),
            status="error" if block.get("is_error") else "success",
        )
        for block in blocks
        if block["type"] == "tool_result"
    ]
    return [*out, HumanMessage(content=text)] if text else out


@dataclass
class LangChainLane(Lane):
    """A LangChain agent's message list and one ``ContextEditingMiddleware``, driven the way
    ``create_agent``'s model node drives ``wrap_model_call`` on every model call: append the
    tool messages, build the ``ModelRequest``, run the middleware with a handler that returns
    a prepared response at once, append the ``AIMessage``."""

    names: dict[str, str] = field(default_factory=dict)
    messages: list[Any] = field(default_factory=list)
    cleared: int = 0

    def open(self, messages: list[dict[str, Any]]) -> None:
        """The history as LangChain messages, and a fresh middleware."""
        from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
        from langchain_core.messages import SystemMessage

        self.middleware = ContextEditingMiddleware(edits=[ClearToolUsesEdit()])
        self.model = FakeListChatModel(responses=["unused"])
        self.system = SystemMessage(content=SYSTEM_PROMPT)
        self.tools: list[Any] = [
            {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
            for t in TOOLS
        ]
        self.names = {}
        self.messages = [out for m in messages for out in to_langchain(m, self.names)]

    def prepare(self, stream: int, index: int) -> tuple[list[Any], Any]:
        """The next turn as LangChain objects (the model and the tool node build them)."""
        user, assistant = super().prepare(stream, index)
        return to_langchain(user, self.names), to_langchain(assistant, self.names)[0]

    def run(self, turn: tuple[list[Any], Any]) -> int:
        """One timed call; nanoseconds."""
        from langchain.agents.middleware.types import ModelRequest, ModelResponse

        inputs, reply = turn
        seen: list[Any] = []

        def handler(request: ModelRequest) -> ModelResponse:
            seen.append(request)
            return ModelResponse(result=[reply])

        start = time.perf_counter_ns()
        self.messages.extend(inputs)
        request = ModelRequest(
            model=self.model,
            messages=self.messages,
            system_message=self.system,
            tools=self.tools,
            state={"messages": self.messages},
        )
        response: Any = self.middleware.wrap_model_call(request, handler)
        self.messages.extend(response.result)
        elapsed = time.perf_counter_ns() - start
        edited = (getattr(m, "response_metadata", {}) for m in seen[0].messages)
        self.cleared = sum(1 for metadata in edited if metadata.get("context_editing"))
        return elapsed


@dataclass
class MiddlewareLane(LangChainLane):
    """The same agent list and calls, through ``StenographMiddleware`` (``inactivity-only``,
    in memory) instead of LangChain's: the list fed whole on every call, the session's
    request converted back to LangChain messages; the history memorized by a pause after
    it was fed (untimed), so that every timed call sends the reduced forms."""

    clock: Any = None
    memorized_at_close: int = 0

    def open(self, messages: list[dict[str, Any]]) -> None:
        """LangChain's lane's list, our middleware, the history fed, then the pause."""
        import stenograph
        from stenograph.integrations.langchain import StenographMiddleware, to_anthropic

        super().open(messages)
        self.clock = stenograph.ManualClock(T0)
        self.middleware = StenographMiddleware(
            make_engine("inactivity-only"),
            session_key=lambda request: "bench",
            state_dir=None,
            clock=self.clock,
        )
        session = self.middleware.session("bench")
        session.sync(to_anthropic(self.messages))  # the history as a first call feeds it
        session.wait_for_background()
        self.clock.advance(PAUSE_SECONDS)

    def prepare(self, stream: int, index: int) -> tuple[list[Any], Any]:
        """The next turn; the clock moves as a tool run and a model call would."""
        turn = super().prepare(stream, index)
        if self.clock is not None:
            self.clock.advance(self.synth.rng.uniform(2.0, 45.0))
        return turn

    def close(self) -> None:
        """Count the memorized entries, close the middleware's session."""
        if self.clock is not None:
            session = self.middleware.session("bench")
            self.memorized_at_close = sum(1 for e in session.history if e.memorized)
            self.middleware.close()
            self.clock = None


def middleware_missing() -> str | None:
    """Why the middleware lane cannot run (None: it can)."""
    try:
        import stenograph.integrations.langchain  # noqa: F401
    except ImportError as exc:
        return f"the langchain extra is not installed ({exc}); pip install -e '.[langchain]'"
    return None


def clearing(sizes: tuple[int, ...], calls: int, log: Log) -> dict[str, Any]:
    """``memorized`` next to ``langchain`` at every size."""
    engine = make_engine("inactivity-only")
    out: dict[str, Any] = {}
    middleware = middleware_missing()
    if middleware is not None:
        log(f"the stenograph middleware lane is skipped: {middleware}")
    for size in sizes:
        histories = HistoryCache()
        ours = SessionLane("memorized", size, histories, engine=engine, pause=PAUSE_SECONDS)
        theirs = LangChainLane("langchain", size, histories)
        lanes: list[Lane] = [ours, theirs]
        if middleware is None:
            lanes.append(MiddlewareLane("stenograph middleware", size, histories))
        log(f"clearing at {size:,} messages: {len(lanes)} lanes x {calls} calls")
        interleave(lanes, calls)
        ours.samples.note += f"; {ours.memorized_at_close:,} entries memorized"
        theirs.samples.note += f"; {theirs.cleared:,} ToolMessages cleared per call"
        row: dict[str, Any] = {
            "samples": {"memorized": ours.samples, "langchain": theirs.samples},
            "langchain_over_memorized": ratio(theirs.samples, ours.samples),
        }
        if middleware is None:
            lane = lanes[2]
            assert isinstance(lane, MiddlewareLane)
            lane.samples.note += f"; {lane.memorized_at_close:,} entries memorized"
            row["samples"]["stenograph middleware"] = lane.samples
            row["langchain_over_middleware"] = ratio(theirs.samples, lane.samples)
        out[str(size)] = row
    return out


# ---------------------------------------------------------------------------------------------
# pydantic-ai-harness, in its own interpreter
# ---------------------------------------------------------------------------------------------


def harness_python(given: str | None) -> tuple[str | None, str]:
    """The interpreter that has pydantic-ai-harness, or None and why not."""
    python = os.path.abspath(given) if given else sys.executable  # the worker runs elsewhere
    probe = "import pydantic_ai_harness.compaction, pydantic_ai; print(pydantic_ai.__version__)"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    if done.returncode == 0:
        return python, f"pydantic-ai-slim {done.stdout.strip()} ({python})"
    return None, (
        f"pydantic-ai-harness is not importable by {python}; `make .venv-harness/bin/python`"
        " makes a venv that has it: pass --harness-python .venv-harness/bin/python"
    )


class Worker:
    """``benchlib.harness_worker`` in a child process, one JSON line each way."""

    def __init__(self, python: str) -> None:
        self.process = subprocess.Popen(
            [python, "-m", "benchlib.harness_worker"],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send one command, wait for its answer (the parent idles meanwhile)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the harness worker exited ({self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End the worker (stdin closed) and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


@dataclass
class HarnessLane(Lane):
    """The worker's lane: the same history (checked by digest) and the same turns, timed in
    the worker."""

    worker: Worker | None = None

    def open(self, messages: list[dict[str, Any]]) -> None:
        """The worker builds the same history."""
        assert self.worker is not None
        answer = self.worker.ask({"build": self.size, "seed": self.seed})
        if answer["digest"] != digest(messages):
            raise RuntimeError("the harness worker built another history")

    def prepare(self, stream: int, index: int) -> dict[str, int]:
        """The worker prepares the turn itself."""
        return {"stream": stream, "index": index}

    def run(self, turn: dict[str, int]) -> int:
        """One call in the worker; its nanoseconds."""
        assert self.worker is not None
        ns: int = self.worker.ask(turn)["ns"]
        return ns


def check_only(sizes: tuple[int, ...], calls: int, python: str, log: Log) -> dict[str, Any]:
    """``inactivity-only`` next to ``harness`` at every size."""
    engine = make_engine("inactivity-only")
    worker = Worker(python)
    out: dict[str, Any] = {}
    try:
        for size in sizes:
            histories = HistoryCache()
            ours = SessionLane("inactivity-only", size, histories, engine=engine)
            theirs = HarnessLane("harness", size, histories, worker=worker)
            log(f"check only at {size:,} messages: 2 lanes x {calls} calls")
            interleave([ours, theirs], calls)
            out[str(size)] = {
                "samples": {"inactivity-only": ours.samples, "harness": theirs.samples},
                "harness_over_ours": ratio(theirs.samples, ours.samples),
            }
    finally:
        worker.close()
    return out


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def run_all(quick: bool, given_python: str | None, log: Log) -> dict[str, Any]:
    """Both comparisons (each skipped, with its reason, when its peer is missing)."""
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "tiktoken_load_ms": warm_tokenizer(),
    }
    missing = langchain_missing()
    if missing:
        log(f"clearing lanes skipped: {missing}")
        results["clearing"] = {"skipped": missing}
    else:
        sizes: tuple[int, ...] = QUICK_CLEARING_SIZES if quick else CLEARING_SIZES
        calls = QUICK_CLEARING_CALLS if quick else CLEARING_CALLS
        results["clearing"] = clearing(sizes, calls, log)
    python, why = harness_python(given_python)
    results["harness"] = why
    if python is None:
        log(f"harness lanes skipped: {why}")
        results["check_only"] = {"skipped": why}
    else:
        sizes = QUICK_CHECK_SIZES if quick else CHECK_SIZES
        calls = QUICK_CHECK_CALLS if quick else CHECK_CALLS
        results["check_only"] = check_only(sizes, calls, python, log)
    results["targets"] = targets(results)
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def targets(results: dict[str, Any]) -> dict[str, bool]:
    """Whether each target holds (by median), for what this run measured."""
    out: dict[str, bool] = {}
    at = results["clearing"].get(str(CLEARING_SIZES[-1]))
    if at is not None:
        got = at["langchain_over_memorized"]["median"]
        out[f"langchain_over_memorized_{CLEARING_SIZES[-1]}"] = got >= LANGCHAIN_TARGET
    for size, row in results["check_only"].items():
        if size != "skipped":
            out[f"harness_over_ours_{size}"] = row["harness_over_ours"]["median"] > 1.0
    return out


def print_rows(title: str, rows: dict[str, Any], key: str) -> None:
    """One comparison's table."""
    print(f"\n{title}")
    if "skipped" in rows:
        print(f" skipped: {rows['skipped']}")
        return
    for size, row in rows.items():
        print(f" {int(size):,} messages")
        for name, s in row["samples"].items():
            print(f"   {name:<22} {fmt_us(s.median):>9} / {fmt_us(s.p90):>9}  ({s.note})")
        for name in [key, *sorted(k for k in row if k.endswith("_over_middleware"))]:
            print(f"   {name}: median {row[name]['median']:.1f}x, p90 {row[name]['p90']:.1f}x")


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables."""
    print(f"(tiktoken load before timing: {results['tiktoken_load_ms']:.0f} ms)")
    print_rows(
        "clearing: memorized (and our LangChain middleware) vs LangChain's, median / p90",
        results["clearing"],
        "langchain_over_memorized",
    )
    print(f"\nharness: {results['harness']}")
    print_rows(
        "check only: inactivity-only vs pydantic-ai-harness, median / p90",
        results["check_only"],
        "harness_over_ours",
    )
    for name, ok in results["targets"].items():
        print(f" {name}: {verdict(ok)}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    command = parser(__doc__)
    command.add_argument(
        "--harness-python", help="an interpreter that has pydantic-ai-harness (its own venv)"
    )
    args = command.parse_args(argv)
    return finish(run_all(args.quick, args.harness_python, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
