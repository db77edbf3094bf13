"""The prompt-cache consequence of forked-extraction's ``editMode``, measured on recorded
requests.

A session on the ``default`` preset (forked-extraction on the ``anthropic`` backend, the mode
under test, notes in a temporary folder) replays a conversation through the real
``anthropic`` SDK against a local ``MessagesServer``: each main-thread call sends the
session's request and gets the recorded assistant message back. The fork's requests reach the
same server, whose responder plays a model that makes the notes equal to a target: the
offline writer's notes for the same history (``forked_extraction.offline``). ``host-tool``
(Anthropic's text editor in the host's tools) and ``own-tool`` (stenograph's
``session_notes_edit``) get minimal ``str_replace`` edits, section by section, in one reply,
then a short closing reply; ``rewrite`` (no edit tool in the host's tools) gets the whole file
in one ```markdown fence.

From the requests the server recorded, per fork: the prefix it shares unit by unit (each
tool, system block and message block, compared as canonical JSON with ``cache_control``
removed) with the main thread's last request, in the API's cache order (tools, system,
messages), in tokens (tiktoken cl100k estimate) and as a share of the fork's input; and the
output tokens its replies needed. The cache costs are DERIVED from those counts with
Anthropic's published multipliers (cache read 0.1x, cache write 1.25x the input price) for
three cache states (warm: the main thread's last request cached; cold: nothing cached;
replayed: every recorded request through a simulated 5-minute cache on the replay's clock):
computed, not measured against the real API.

Run ``python benchmarks/edit_modes.py [--quick] [--json]``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
from benchlib.history import MODEL, SEED, SYSTEM_PROMPT, TOOLS
from benchlib.report import Log, cli, finish, machine, quiet_model_deprecation, warm_tokenizer
from benchlib.transcripts import (
    Conversation,
    demo_conversation,
    largest_real_sessions,
    no_transcripts_note,
    synthetic_conversation,
)

import stenograph
from stenograph.engine.clock import parse_timestamp
from stenograph.engine.notes import sections
from stenograph.engine.tokens import content_tokens, count_tiktoken
from stenograph.handlers.forked_extraction.gate import OWN_TOOL_NAME, replace_once
from stenograph.handlers.forked_extraction.offline import Facts, offline_notes
from stenograph.testing import MessagesServer, Reply
from stenograph.testing.messages_server import RecordedRequest

MODES = ("host-tool", "rewrite", "own-tool")
EDITOR = {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}
HOST_TOOLS = [tool for tool in TOOLS if tool["name"] != "Edit"]  # no edit tool of their own
NOTES = re.compile(r'<notes path="([^"]+)">\n(.*)\n</notes>', re.DOTALL)
CLOSING = "The session notes are up to date."
MAX_TOKENS = 4096
# Anthropic's published multipliers of the base input price, and Claude Sonnet 4.5's list
# prices (USD per million tokens) for the dollar figures. Derived figures only.
CACHE_READ, CACHE_WRITE = 0.10, 1.25
CACHE_TTL_S = 300.0  # the default (5-minute) cache lifetime
INPUT_USD, OUTPUT_USD = 3.0, 15.0
QUICK_REAL_MESSAGES = 60  # --quick replays only the start of the real session


# ---------------------------------------------------------------------------------------------
# the fork's model: edits that make the notes equal to the offline writer's
# ---------------------------------------------------------------------------------------------


def minimal_edit(old_section: str, new_section: str, text: str) -> tuple[str, str]:
    """(old_str, new_str) turning ``old_section`` into ``new_section`` inside ``text``: the
    changed lines only, grown upwards (towards the unique heading) until old_str occurs
    exactly once in ``text``."""
    old, new = old_section.splitlines(keepends=True), new_section.splitlines(keepends=True)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    start = max(0, head - 1) if head == len(old) - tail else head  # pure insert: anchor a line
    while True:
        old_str = "".join(old[start : len(old) - tail])
        if text.count(old_str) == 1 or start == 0:
            return old_str, "".join(new[start : len(new) - tail])
        start -= 1


def section_edits(current: str, target: str, path: str) -> list[tuple[str, str]]:
    """str_replace edits, one per changed section, that turn ``current`` into ``target``."""
    before = {s.heading: s.heading + s.body for s in sections(current)}
    work, edits = current, []
    for section in sections(target):
        old_section, new_section = before.get(section.heading), section.heading + section.body
        if old_section is None or old_section == new_section:
            continue
        old_str, new_str = minimal_edit(old_section, new_section, work)
        work = replace_once(work, old_str, new_str, Path(path))
        edits.append((old_str, new_str))
    if work != target:
        raise AssertionError("the section edits do not reproduce the target notes")
    return edits


def edit_call(mode: str, path: str, old: str, new: str) -> dict[str, Any]:
    """One tool_use block of the fork's edit tool in ``mode``."""
    if mode == "own-tool":
        return {
            "type": "tool_use",
            "name": OWN_TOOL_NAME,
            "input": {"old_string": old, "new_string": new},
        }
    args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
    return {"type": "tool_use", "name": EDITOR["name"], "input": args}


def fork_prompt_index(messages: list[dict[str, Any]]) -> int | None:
    """Index of the fork's prompt message (None: a main-thread request)."""
    for index, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and NOTES.search(content):
            return index
    return None


@dataclass
class NotesModel:
    """The responder: the recorded reply for a main-thread request, a notes-writing model for
    the fork's requests."""

    mode: str
    template: str
    session: Any = None
    main_reply: Reply | None = None
    targets: list[str] = field(default_factory=list)
    replies: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # the replay clock at each request

    def __call__(self, request: RecordedRequest) -> Reply:
        self.times.append(self.session.clock())
        messages = request.body["messages"]
        prompt_at = fork_prompt_index(messages)
        if prompt_at is None:
            assert self.main_reply is not None
            return self.main_reply
        if any(m["role"] == "assistant" for m in messages[prompt_at:]):
            return self._reply([{"type": "text", "text": CLOSING}], "end_turn")
        path, current = NOTES.search(messages[prompt_at]["content"]).groups()
        target = self._target()
        self.targets.append(target)
        if self.mode == "rewrite":
            return self._reply([{"type": "text", "text": f"```markdown\n{target}```"}], "end_turn")
        calls = [edit_call(self.mode, path, o, n) for o, n in section_edits(current, target, path)]
        return self._reply(calls, "tool_use")

    def _target(self) -> str:
        """The offline writer's notes for the history so far (the main thread is waiting for
        this fork, so the history ends with the response that triggered it)."""
        history = self.session.history
        return offline_notes(self.template, Facts().feed(history.entries))

    def _reply(self, blocks: list[dict[str, Any]], stop: str) -> Reply:
        self.replies.append((len(self.targets) - 1, blocks))
        return Reply.blocks(blocks, stop_reason=stop)


# ---------------------------------------------------------------------------------------------
# driving a session
# ---------------------------------------------------------------------------------------------


def tools_for(mode: str) -> list[dict[str, Any]]:
    """The host's tools: Anthropic's text editor among them only in host-tool mode."""
    return [*HOST_TOOLS, EDITOR] if mode == "host-tool" else list(HOST_TOOLS)


@dataclass
class Drive:
    """What one replay recorded."""

    requests: list[RecordedRequest]
    model: NotesModel
    notes_ok: list[bool]
    failures: list[str]


def drive(conversation: Conversation, mode: str, scratch: Path) -> Drive:
    """Replay ``conversation`` on the default preset with the fork in ``mode``."""
    with MessagesServer() as server:
        client = anthropic.Anthropic(api_key="x", base_url=server.url, max_retries=0)
        notes = scratch / mode / "{session_id}" / "session-memory.md"
        overrides = {
            "forked-extraction": {
                "backend": "anthropic",
                "editMode": mode,
                "memoryPath": str(notes),
                "maxRetries": 0,
                "timeoutSeconds": 60,
            }
        }
        engine = stenograph.Engine.from_preset(
            "default", overrides=overrides, services={"anthropic": client}
        )
        template = engine.slot("forked-extraction").handler.template
        model = NotesModel(mode, template)
        server.responder = model
        clock = stenograph.ManualClock(_first_time(conversation))
        session = engine.open_session("edit-modes", state_dir=None, clock=clock)
        model.session = session
        notes_path = engine.slot("forked-extraction").handler.memory_file(session).path
        notes_ok = replay(conversation, mode, session, client, clock, model, notes_path)
        failures = [e.error for e in session.events if e.kind == "ExtractionFailed"]
        session.close()
        return Drive(server.requests, model, notes_ok, failures)


def replay(
    conversation: Conversation,
    mode: str,
    session: Any,
    client: anthropic.Anthropic,
    clock: stenograph.ManualClock,
    model: NotesModel,
    notes_path: Path,
) -> list[bool]:
    """Inputs are appended; each assistant message is the reply to a real SDK call. After
    each fork: whether the notes file equals the target."""
    notes_ok: list[bool] = []
    for message in conversation.messages:
        moment = parse_timestamp(message.get("timestamp"))
        if moment is not None and moment > clock.now:
            clock.set(moment)
        if message["role"] != "assistant":
            session.append(message)
            continue
        request = session.pre_call(model=MODEL, system=SYSTEM_PROMPT, tools=tools_for(mode))
        model.main_reply = recorded_reply(message)
        forks = len(model.targets)
        response = client.messages.create(**request, max_tokens=MAX_TOKENS)
        session.post_sampling(response)
        session.wait_for_background(60)
        if len(model.targets) > forks:
            text = notes_path.read_text(encoding="utf-8") if notes_path.exists() else ""
            notes_ok.append(text == model.targets[-1])
    return notes_ok


def recorded_reply(message: dict[str, Any]) -> Reply:
    """The recorded assistant message as the server's reply (content, stop reason, usage)."""
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    stop = (message.get("meta") or {}).get("stop_reason") or message.get("stop_reason")
    if stop is None:
        stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    return Reply.blocks(blocks, stop_reason=stop, usage=message.get("usage") or {})


def _first_time(conversation: Conversation) -> float:
    for message in conversation.messages:
        moment = parse_timestamp(message.get("timestamp"))
        if moment is not None:
            return moment
    return 1_750_000_000.0


# ---------------------------------------------------------------------------------------------
# measuring the recorded requests
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One cacheable unit of a request: a tool, a system block or a message block."""

    key: str
    tokens: int
    breakpoint: bool


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _clean(block: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The block without ``cache_control``, and whether it had one."""
    return {k: v for k, v in block.items() if k != "cache_control"}, "cache_control" in block


def _blocks(content: Any) -> list[dict[str, Any]]:
    """String content as one text block (what the API makes of it)."""
    if content is None:
        return []
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def units(body: dict[str, Any]) -> list[Unit]:
    """A request in the API's cache order: tools, then system, then messages."""
    out = []
    for tool in body.get("tools") or []:
        clean, mark = _clean(tool)
        text = _canonical(clean)
        out.append(Unit("tool:" + text, count_tiktoken(text), mark))
    for block in _blocks(body.get("system")):
        clean, mark = _clean(block)
        out.append(Unit("system:" + _canonical(clean), content_tokens([clean]), mark))
    for index, message in enumerate(body["messages"]):
        for block in _blocks(message["content"]):
            clean, mark = _clean(block)
            key = f"msg:{index}:{message['role']}:" + _canonical(clean)
            out.append(Unit(key, content_tokens([clean]), mark))
    return out


def shared_count(a: list[Unit], b: list[Unit]) -> int:
    """How many leading units ``a`` and ``b`` have in common."""
    count = 0
    for x, y in zip(a, b, strict=False):
        if x.key != y.key:
            break
        count += 1
    return count


def tokens_of(items: Iterable[Unit]) -> int:
    """Estimated tokens of some units."""
    return sum(u.tokens for u in items)


def _split(request: list[Unit], cached: list[list[Unit]]) -> tuple[int, int | None]:
    """(units readable from the longest cached prefix, units up to the request's last
    breakpoint; None without one)."""
    marks = [i for i, unit in enumerate(request) if unit.breakpoint]
    if not marks:
        return 0, None
    end = marks[-1] + 1
    hits = [len(e) for e in cached if len(e) <= end and shared_count(e, request) == len(e)]
    return max(hits, default=0), end


def _parts(request: list[Unit], read: int, end: int | None) -> dict[str, int]:
    """Tokens read from the cache, written to it, and sent plain."""
    if end is None:
        return {"read": 0, "write": 0, "plain": tokens_of(request)}
    return {
        "read": tokens_of(request[:read]),
        "write": tokens_of(request[read:end]),
        "plain": tokens_of(request[end:]),
    }


def request_cost(request: list[Unit], cached: list[list[Unit]]) -> dict[str, int]:
    """Tokens read from the cache, written to it and sent plain, for one request given the
    cache entries (prefixes) that exist; the request's own entry is added to ``cached``."""
    read, end = _split(request, cached)
    if end is not None:
        cached.append(request[:end])
    return _parts(request, read, end)


class ReplayedCache:
    """The prompt cache over a whole replay, on the replay's clock: an entry lives
    ``CACHE_TTL_S`` seconds after its last write or hit. Main-thread requests are assumed to
    mark their end (as Claude Code does); fork requests mark what stenograph marks."""

    def __init__(self) -> None:
        self.entries: list[list[Any]] = []  # [prefix units, last use]

    def send(self, request: list[Unit], now: float) -> dict[str, int]:
        """One request at ``now``: its read / write / plain tokens; updates the entries."""
        self.entries = [e for e in self.entries if now - e[1] <= CACHE_TTL_S]
        read, end = _split(request, [e[0] for e in self.entries])
        for entry in self.entries:
            if read and len(entry[0]) == read:
                entry[1] = now
                break
        if end is not None:
            self.entries.append([request[:end], now])
        return _parts(request, read, end)


def replayed_fork_costs(drive_result: Drive) -> list[dict[str, int]]:
    """Read / write / plain tokens of every fork request, in order, under ``ReplayedCache``."""
    bodies = [r.body for r in drive_result.requests if r.path == "/v1/messages"]
    times = drive_result.model.times
    if len(times) != len(bodies):
        raise AssertionError("the responder did not see every Messages request")
    cache, out = ReplayedCache(), []
    for body, now in zip(bodies, times, strict=True):
        if fork_prompt_index(body["messages"]) is None:
            cache.send(last_marked(units(body)), now)
        else:
            out.append(cache.send(units(body), now))
    return out


def last_marked(request: list[Unit]) -> list[Unit]:
    """What-if: the request with a cache breakpoint on its last unit too (as the main thread
    of Claude Code marks the end of every request)."""
    if not request:
        return request
    last = request[-1]
    return [*request[:-1], Unit(last.key, last.tokens, True)]


def input_cost(parts: dict[str, int]) -> float:
    """Input cost in base-input-token equivalents (0.1x read, 1.25x write, 1x plain)."""
    return CACHE_READ * parts["read"] + CACHE_WRITE * parts["write"] + parts["plain"]


def fork_runs(requests: list[RecordedRequest]) -> list[dict[str, Any]]:
    """The recorded Messages requests grouped: each fork run (its consecutive requests) with
    the main thread's last request before it and the first one after it."""
    runs: list[dict[str, Any]] = []
    last_main: dict[str, Any] | None = None
    current: dict[str, Any] | None = None
    for request in requests:
        if request.path != "/v1/messages":
            continue
        body = request.body
        if fork_prompt_index(body["messages"]) is None:
            if runs and runs[-1]["next_main"] is None:
                runs[-1]["next_main"] = body
            last_main, current = body, None
            continue
        if current is None:
            current = {"last_main": last_main, "forks": [], "next_main": None}
            runs.append(current)
        current["forks"].append(body)
    return runs


def measure_run(
    run: dict[str, Any], outputs: list[list[dict[str, Any]]], replayed: list[dict[str, int]]
) -> dict[str, Any]:
    """The figures of one fork run (``replayed``: its requests under ``ReplayedCache``)."""
    main = units(run["last_main"])
    forks = [units(body) for body in run["forks"]]
    first = forks[0]
    shared = shared_count(main, first)
    readable = tokens_of(main) if shared == len(main) else 0
    warm, cold = [main], []
    warm_parts = [request_cost(f, warm) for f in forks]
    cold_parts = [request_cost(f, cold) for f in forks]
    what_if: list[list[Unit]] = [main]
    what_if_parts = [request_cost(last_marked(f), what_if) for f in forks]
    output = sum(content_tokens(blocks) for blocks in outputs)
    after = units(run["next_main"]) if run["next_main"] else None
    return {
        "fork_requests": len(forks),
        "fork_input_tokens": tokens_of(first),
        "fork_input_tokens_all": sum(tokens_of(f) for f in forks),
        "main_last_tokens": tokens_of(main),
        "shared_units": shared,
        "shared_tokens": tokens_of(first[:shared]),
        "shared_share": tokens_of(first[:shared]) / max(1, tokens_of(first)),
        "readable_from_main_cache": readable,
        "shared_with_next_main_tokens": tokens_of(first[: shared_count(after, first)])
        if after
        else None,
        "output_tokens": output,
        "input_cost_warm": sum(input_cost(p) for p in warm_parts),
        "input_cost_cold": sum(input_cost(p) for p in cold_parts),
        "input_cost_uncached": sum(tokens_of(f) for f in forks),
        "input_cost_warm_last_marked": sum(input_cost(p) for p in what_if_parts),
        "input_cost_replayed": sum(input_cost(p) for p in replayed),
        "cache_parts_warm": _sum_parts(warm_parts),
        "cache_parts_cold": _sum_parts(cold_parts),
    }


def _sum_parts(parts: list[dict[str, int]]) -> dict[str, int]:
    return {key: sum(p[key] for p in parts) for key in ("read", "write", "plain")}


def measure(drive_result: Drive) -> dict[str, Any]:
    """Per-run figures and their totals for one replay."""
    runs = fork_runs(drive_result.requests)
    replies = drive_result.model.replies
    replayed = replayed_fork_costs(drive_result)
    measured = []
    for n, run in enumerate(runs):
        outputs = [blocks for index, blocks in replies if index == n]
        measured.append(measure_run(run, outputs, replayed[: len(run["forks"])]))
        replayed = replayed[len(run["forks"]) :]
    keys = (
        "fork_requests",
        "fork_input_tokens",
        "fork_input_tokens_all",
        "main_last_tokens",
        "shared_tokens",
        "readable_from_main_cache",
        "output_tokens",
        "input_cost_warm",
        "input_cost_cold",
        "input_cost_uncached",
        "input_cost_warm_last_marked",
        "input_cost_replayed",
    )
    totals: dict[str, Any] = {key: sum(m[key] for m in measured) for key in keys}
    totals["shared_share"] = totals["shared_tokens"] / max(1, totals["fork_input_tokens"])
    totals["readable_share"] = totals["readable_from_main_cache"] / max(
        1, totals["fork_input_tokens"]
    )
    totals["forks"] = len(measured)
    totals["notes_equal_target"] = sum(drive_result.notes_ok)
    totals["failures"] = drive_result.failures
    totals.update(dollars(totals))
    return {"runs": measured, "totals": totals}


def dollars(totals: dict[str, Any]) -> dict[str, float]:
    """Derived USD per fork at Sonnet 4.5 list prices (input, output)."""
    forks = max(1, totals["forks"])
    out_usd = totals["output_tokens"] * OUTPUT_USD / 1e6 / forks
    return {
        "usd_per_fork_warm": totals["input_cost_warm"] * INPUT_USD / 1e6 / forks + out_usd,
        "usd_per_fork_cold": totals["input_cost_cold"] * INPUT_USD / 1e6 / forks + out_usd,
        "usd_per_fork_replayed": totals["input_cost_replayed"] * INPUT_USD / 1e6 / forks + out_usd,
        "usd_per_fork_output": out_usd,
    }


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def conversations(quick: bool, log: Log) -> tuple[list[Conversation], str | None]:
    """The demo, plus the largest real session (or a synthetic one, with a note)."""
    found = [demo_conversation()]
    real = largest_real_sessions(1)
    if real:
        big = real[0]
        if quick:
            big = Conversation(big.name, big.messages[:QUICK_REAL_MESSAGES], big.source)
        return [*found, big], None
    note = no_transcripts_note()
    log(note)
    return [*found, synthetic_conversation(60 if quick else 200, SEED)], note


def run_all(quick: bool, log: Log) -> dict[str, Any]:
    """Every conversation in every mode."""
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "tiktoken_load_ms": warm_tokenizer(),
        "conversations": {},
    }
    found, results["note"] = conversations(quick, log)
    with tempfile.TemporaryDirectory(prefix="stenograph-bench-") as tmp:
        for conversation in found:
            per_mode = {}
            for mode in MODES:
                log(f"{conversation.name} ({conversation.calls} calls), {mode}")
                per_mode[mode] = measure(drive(conversation, mode, Path(tmp)))
            results["conversations"][conversation.name] = {
                "source": conversation.source,
                "messages": len(conversation.messages),
                "calls": conversation.calls,
                "modes": per_mode,
            }
    results["targets"] = {}  # no target: figures only
    results["wall_seconds"] = round(log.elapsed(), 1)
    return results


def per_fork(totals: dict[str, Any], key: str) -> float:
    """A total divided by the number of forks."""
    return totals[key] / max(1, totals["forks"])


def print_report(results: dict[str, Any]) -> None:
    """Human-readable tables (figures per fork, averaged over the forks of the replay)."""
    if results["note"]:
        print(results["note"])
    for name, conversation in results["conversations"].items():
        print(
            f"\n{name} ({conversation['source']}, {conversation['messages']} messages,"
            f" {conversation['calls']} calls); per fork, averaged:"
        )
        print(
            "  mode       notes=target  requests  input(1st)  shared w/ main last  readable"
            "  output | input cost warm / cold / replayed (x input price)  USD warm / replayed"
        )
        for mode, data in conversation["modes"].items():
            print_mode(mode, data["totals"])
    print(
        "\nCosts are DERIVED from the token estimates (cache read 0.1x, write 1.25x the input"
        " price; Sonnet 4.5: $3 / $15 per MTok in / out), not measured against the API."
        "\n'warm': the main thread's last request was cached up to its end (as Claude Code"
        " does); 'cold': nothing cached before the fork; 'replayed': every request of the"
        " replay through a 5-minute cache on the recorded clock (main requests marked at"
        " their end). JSON: also 'input_cost_warm_last_marked' (warm, every fork request"
        " also marking its last message)."
    )


def print_mode(mode: str, t: dict[str, Any]) -> None:
    """One row of the per-mode table."""
    forks = max(1, t["forks"])
    print(
        f"  {mode:<10} {t['notes_equal_target']:>5}/{t['forks']:<6}"
        f" {t['fork_requests'] / forks:>9.1f} {per_fork(t, 'fork_input_tokens'):>11,.0f}"
        f" {per_fork(t, 'shared_tokens'):>10,.0f} ({t['shared_share']:>4.0%})"
        f"   {t['readable_share']:>6.0%} {per_fork(t, 'output_tokens'):>7,.0f}"
        f" | {per_fork(t, 'input_cost_warm'):>7,.0f} / {per_fork(t, 'input_cost_cold'):>7,.0f}"
        f" / {per_fork(t, 'input_cost_replayed'):>7,.0f}"
        f"        {t['usd_per_fork_warm']:.4f} / {t['usd_per_fork_replayed']:.4f}"
    )
    if t["failures"]:
        print(f"    failures: {t['failures']}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    args = cli(__doc__, argv)
    quiet_model_deprecation()
    return finish(run_all(args.quick, Log()), args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
