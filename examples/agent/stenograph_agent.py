#!/usr/bin/env python3
"""stenograph-agent: a small terminal coding agent, as a reference host for stenograph.

The model is called through the official SDK, put behind a stenograph session with one line
(``stenograph.integrations.anthropic.wrap``); the agent's own loop is the plain SDK loop. Its
tools only reach files under ``--workdir`` and run shell commands only after the user agrees.

    python examples/agent/stenograph_agent.py --workdir DIR [--preset NAME|FILE]
        [--session ID] [--state-dir DIR] [--model M] [--transcript FILE]

See examples/agent/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text
from workdir_tools import TOOLS, Interrupted, ToolError, WorkdirTools, cut

import stenograph
from stenograph import ExtractionFinished
from stenograph.engine.store import check_session_id
from stenograph.integrations.anthropic import wrap
from stenograph.stores.file_lock import FileLock

with contextlib.suppress(ImportError):  # line editing and history for input()
    import readline  # noqa: F401

DEFAULT_MODEL = "claude-sonnet-4-6"

SYSTEM_PROMPT = """\
You are stenograph-agent, a coding agent in a terminal. You work in the directory {root} \
and nowhere else: every path you give a tool is taken relative to it (absolute paths must \
lie inside it).

Tools: list_files, read_file and search to look around; str_replace_based_edit_tool to view, \
create and edit files; run_command to run a shell command in {root} (the user approves each \
command first and may refuse). Read a file before you edit it. Keep changes small and \
explain what you did in a few sentences when you are done."""

# ---------------------------------------------------------------------------------------
# Model calls that Ctrl-C can abandon without touching the session
# ---------------------------------------------------------------------------------------


class _Cancelled(Exception):
    pass


@dataclass
class _Call:
    """One model call on a worker thread. Every session change (appending the input, the
    pre-call phase; appending the response, post-sampling) happens on that thread, never
    interrupted; Ctrl-C only abandons a call while it is receiving, before its response
    is committed."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)
    phase: str = "preparing"  # preparing -> receiving -> committing
    cancelled: bool = False
    result: Any = None
    error: BaseException | None = None


def _stream_call(client: Any, request: dict[str, Any], call: _Call) -> None:
    try:
        manager = client.messages.stream(**request)  # appends new input, runs pre-call
        with call.lock:
            if call.cancelled:
                raise _Cancelled
            call.phase = "receiving"
        with manager as stream:
            for _event in stream:
                if call.cancelled:
                    raise _Cancelled  # leaves the block with an error: nothing is appended
            with call.lock:
                if call.cancelled:
                    raise _Cancelled
                call.phase = "committing"
        # the block ended cleanly: the response is appended and post-sampling has run
        call.result = stream.get_final_message()
    except BaseException as exc:
        call.error = exc
    finally:
        call.done.set()


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[list[int]]:
    """Hold Ctrl-C back for the block (main thread only); it is reported, not raised."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def atomic_write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, ensure_ascii=False, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def describe_api_error(exc: Exception) -> str:
    """One line for an SDK error."""
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else {}
        kind = error.get("type") or type(exc).__name__
        message = error.get("message") or str(exc)
        return f"API error {exc.status_code} {kind}: {message}"
    if isinstance(exc, anthropic.APITimeoutError):
        return "API error: the request timed out"
    if isinstance(exc, anthropic.APIConnectionError):
        return f"API error: cannot reach the API ({exc.__cause__ or exc})"
    return f"{type(exc).__name__}: {exc}"


def dangling_tool_uses(messages: list[dict[str, Any]]) -> list[str]:
    """Ids of the last message's tool_use blocks when it is an assistant message."""
    if not messages or messages[-1]["role"] != "assistant":
        return []
    content = messages[-1]["content"]
    blocks = content if isinstance(content, list) else []
    return [b["id"] for b in blocks if b.get("type") == "tool_use"]


def unanswered(ids: list[str], why: str) -> dict[str, Any]:
    results = [
        {"type": "tool_result", "tool_use_id": i, "content": why, "is_error": True} for i in ids
    ]
    return {"role": "user", "content": results}


class Agent:
    """The REPL and the agent loop."""

    def __init__(
        self,
        args: argparse.Namespace,
        console: Console,
        client: anthropic.Anthropic,
        engine: stenograph.Engine,
    ) -> None:
        self.args, self.console, self.engine = args, console, engine
        self.tools = WorkdirTools(args.workdir, self.approve)
        self.system = [
            {
                "type": "text",
                "text": SYSTEM_PROMPT.format(root=self.tools.root),
                "cache_control": {"type": "ephemeral"},
            }
        ]
        self.session = engine.open_session(args.session, state_dir=args.state_dir)
        self.client = wrap(client, self.session)  # the one line: calls go through the session
        folder = self.session.folder or Path(args.state_dir) / args.session
        default = folder / "transcript.json"
        self.transcript_path = Path(args.transcript) if args.transcript else default
        # The conversation as a plain SDK host keeps it; on resume, rebuilt from the session.
        self.messages: list[dict[str, Any]] = [e.message() for e in self.session.history]
        self.resumed = len(self.messages)
        self._inflight: _Call | None = None
        ids = dangling_tool_uses(self.messages)
        if ids:  # the last run ended between a tool call and its result
            self.messages.append(unanswered(ids, "not run: the agent stopped before this call"))

    # the REPL ------------------------------------------------------------------------

    def repl(self) -> None:
        self._banner()
        interrupts = 0
        while True:
            try:
                line = input("you> ")
            except EOFError:
                self.console.print()
                return
            except KeyboardInterrupt:
                interrupts += 1
                if interrupts >= 2:
                    self.console.print()
                    return
                self.console.print("\n(Ctrl-C again, /quit or Ctrl-D to leave)", style="dim")
                continue
            interrupts = 0
            text = line.strip()
            if text in ("/quit", "/exit"):
                return
            if text in ("", "/retry"):
                if self._owes_reply():
                    self.turn()
                continue
            if text == "/help":
                self.console.print("/quit to leave, Enter (or /retry) to retry a failed call")
                continue
            self.messages.append({"role": "user", "content": line})
            self.turn()

    def _banner(self) -> None:
        how = f"resumed, {self.resumed} messages" if self.resumed else "new"
        self.console.print(
            Text.assemble(
                ("stenograph-agent", "bold"),
                f" · workdir {self.tools.root} · session {self.session.id} ({how})"
                f" · preset {self.engine.preset.name} · model {self.args.model}",
            ),
            soft_wrap=True,
        )
        if self.resumed:
            last = next((m for m in reversed(self.messages) if m["role"] == "assistant"), None)
            if last is not None:
                self._show_text(last["content"])
            self.status()
        if self._owes_reply():
            self.console.print("The last request got no reply: press Enter to retry.", style="dim")

    def _owes_reply(self) -> bool:
        return bool(self.messages) and self.messages[-1]["role"] == "user"

    # one turn: model calls and tool calls until the model stops -------------------------

    def turn(self) -> None:
        try:
            self._loop()
        except KeyboardInterrupt:
            self.console.print("\ninterrupted", style="yellow")
        finally:
            with deferred_interrupt():
                self._reconcile()
                self.save_transcript()

    def _loop(self) -> None:
        for _ in range(self.args.max_steps):
            message, interrupted = self._call_model()
            if message is None:
                return
            blocks = [b.model_dump(mode="json", exclude_none=True) for b in message.content]
            self.messages.append({"role": "assistant", "content": blocks})
            self._show_text(blocks)
            self.status()
            self.save_transcript()
            calls = [b for b in blocks if b.get("type") == "tool_use"]
            if not calls:
                return
            if interrupted:
                self.console.print("interrupted: the tool calls were not run", style="yellow")
                ids = [c["id"] for c in calls]
                self.messages.append(unanswered(ids, "interrupted by the user"))
                return
            results, interrupted = self._run_tools(calls, message.stop_reason)
            self.messages.append({"role": "user", "content": results})
            if interrupted:
                self.console.print("interrupted", style="yellow")
                return
        self.console.print(
            f"stopped after {self.args.max_steps} model calls: press Enter to go on", style="dim"
        )

    def _call_model(self) -> tuple[Any, bool]:
        """(the response or None, whether the user interrupted)."""
        request = {
            "model": self.args.model,
            "max_tokens": self.args.max_tokens,
            "system": self.system,
            "tools": TOOLS,
            "messages": list(self.messages),
        }
        call = self._inflight = _Call()
        worker = threading.Thread(
            target=_stream_call, args=(self.client, request, call), daemon=True, name="model-call"
        )
        interrupted = False
        with self.console.status("thinking… (Ctrl-C to interrupt)", spinner="dots"):
            worker.start()
            try:
                while not call.done.wait(0.05):
                    pass
            except KeyboardInterrupt:
                interrupted = True
                self._cancel(call)
        self._inflight = None
        if interrupted and (call.result is None):
            self.console.print(
                "interrupted: no reply was recorded; press Enter to ask again", style="yellow"
            )
            return None, True
        if call.error is not None:
            if isinstance(call.error, anthropic.APIError | stenograph.StenographError):
                self.console.print(
                    Text(describe_api_error(call.error) + " · press Enter to retry", style="red"),
                    soft_wrap=True,
                )
                return None, False
            raise call.error
        return call.result, interrupted

    def _run_tools(self, calls: list[dict[str, Any]], stop_reason: str | None) -> tuple[list, bool]:
        results: list[dict[str, Any]] = []
        interrupted = False
        for call in calls:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call["id"]}
            self.console.print(Text(f"→ {call['name']} {_brief(call.get('input'))}", style="cyan"))
            if interrupted:
                result.update(content="interrupted by the user", is_error=True)
            elif stop_reason == "max_tokens":
                result.update(content="not run: the reply was cut off (max_tokens)", is_error=True)
            else:
                try:
                    result["content"] = cut(self.tools.run(call["name"], call.get("input")))
                except ToolError as exc:
                    result.update(content=cut(str(exc)), is_error=True)
                except (Interrupted, KeyboardInterrupt):
                    interrupted = True
                    result.update(content="interrupted by the user", is_error=True)
                except Exception as exc:  # a tool bug must not end the session
                    result.update(content=f"{type(exc).__name__}: {exc}", is_error=True)
            style, mark = ("red", "✗") if result.get("is_error") else ("dim", "✓")
            self.console.print(Text(f"  {mark} {_first_line(result['content'])}", style=style))
            results.append(result)
        return results, interrupted

    def approve(self, command: str) -> bool:
        """Ask the user on the terminal; anything but y/yes is a no."""
        try:
            answer = input(f"Run `{command}`? [y/N] ")
        except EOFError:
            return False
        except KeyboardInterrupt:
            raise Interrupted from None
        return answer.strip().lower() in ("y", "yes")

    @staticmethod
    def _cancel(call: _Call) -> None:
        """Stop waiting for ``call``: abandoned while it receives (it will then change
        nothing), else waited for, as it is changing the session (a moment's local work)."""
        with deferred_interrupt():
            with call.lock:
                call.cancelled = True
                phase = call.phase
            if phase != "receiving":
                call.done.wait()

    def _reconcile(self) -> None:
        """After an error or an interrupt: the session is the truth; answer dangling calls."""
        if self._inflight is not None:  # Ctrl-C came at an odd moment: settle the call first
            self._cancel(self._inflight)
            self._inflight = None
        if len(self.messages) < len(self.session.history):
            self.messages = [e.message() for e in self.session.history]
        ids = dangling_tool_uses(self.messages)
        if ids:
            self.messages.append(unanswered(ids, "interrupted by the user"))

    # output --------------------------------------------------------------------------

    def _show_text(self, content: Any) -> None:
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        text = "\n\n".join(b["text"] for b in blocks if b.get("type") == "text" and b["text"])
        if text.strip():
            self.console.print(Markdown(text))

    def counts(self) -> tuple[int, int, int]:
        """(context tokens, memorized entries, notes updates)."""
        context = self.session.history.context_size()
        memorized = sum(1 for e in self.session.history if e.memorized)
        notes = sum(1 for e in list(self.session.events) if isinstance(e, ExtractionFinished))
        return context, memorized, notes

    def status(self) -> None:
        context, memorized, notes = self.counts()
        line = f"[context {context:,} tok · memorized {memorized} · notes updated {notes}]"
        self.console.print(Text(line, style="dim"), soft_wrap=True)

    # persistence ---------------------------------------------------------------------

    def transcript(self) -> list[dict[str, Any]]:
        """The conversation as a JSON list of Anthropic messages, with ``timestamp`` and, on
        assistant messages, ``usage`` (what ``stenograph replay`` reads)."""
        entries = list(self.session.history)
        out = []
        for entry in entries:
            message: dict[str, Any] = {"role": entry.role, "content": entry.content}
            if entry.timestamp is not None:
                message["timestamp"] = iso(entry.timestamp)
            if entry.role == "assistant" and entry.usage:
                message["usage"] = dict(entry.usage)
            message["uuid"] = entry.uuid
            out.append(message)
        now = iso(time.time())
        out += [{**m, "timestamp": now} for m in self.messages[len(entries) :]]  # not yet sent
        return out

    def save_transcript(self) -> None:
        atomic_write_json(self.transcript_path, self.transcript())

    def close(self) -> None:
        with deferred_interrupt():
            self.save_transcript()
            if not self.session.wait_for_background(0):
                self.console.print("finishing the session notes…", style="dim")
            self.session.close()  # waits (at most 15 s) for the notes, saves the state
        context, memorized, notes = self.counts()
        self.console.print(
            f"session {self.session.id} saved · {len(self.messages)} messages · notes updated"
            f" {notes} · transcript {self.transcript_path}",
            style="dim",
            soft_wrap=True,
            markup=False,
        )
        self.console.print(
            f"resume with --session {self.session.id}", style="dim", soft_wrap=True, markup=False
        )


def _brief(value: Any) -> str:
    """A tool input in one short line (long texts left out)."""
    if not isinstance(value, dict):
        return _first_line(value)
    long = ("file_text", "old_str", "new_str", "insert_text")
    return _first_line(" ".join(f"{k}={v!r}" for k, v in value.items() if k not in long), 120)


def _first_line(text: Any, width: int = 100) -> str:
    lines = str(text).strip().splitlines() or [""]
    line = lines[0][:width]
    more = len(lines) - 1
    return f"{line} (+{more} lines)" if more > 0 else line


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------


def default_state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local/state")
    return os.path.join(base, "stenograph-agent")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="stenograph_agent.py", description="A small terminal coding agent on stenograph."
    )
    parser.add_argument("--workdir", required=True, help="the only folder the tools may touch")
    parser.add_argument("--preset", default="default", help="stenograph preset: name or .toml")
    parser.add_argument(
        "--session", help="session id; an existing one is resumed (default: a new one)"
    )
    parser.add_argument("--state-dir", default=default_state_dir(), help="stenograph state folder")
    parser.add_argument("--model", default=os.environ.get("STENOGRAPH_AGENT_MODEL", DEFAULT_MODEL))
    parser.add_argument("--transcript", help="default: <state-dir>/<session>/transcript.json")
    parser.add_argument("--max-tokens", type=int, default=8192, help="max_tokens of each call")
    parser.add_argument("--max-retries", type=int, default=2, help="SDK retries of each call")
    parser.add_argument("--max-steps", type=int, default=50, help="model calls per turn, at most")
    args = parser.parse_args(argv)
    args.session = args.session or time.strftime("agent-%Y%m%d-%H%M%S")
    return args


class SessionBusy(Exception):
    """Another agent holds the session."""


@contextlib.contextmanager
def session_lock(folder: Path) -> Iterator[None]:
    """One agent per session: two processes appending to one journal would interleave."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = FileLock(folder / "agent.lock", mode=0o600)
    if not lock.acquire(blocking=False):
        raise SessionBusy(f"session {folder.name} is open in another agent")
    try:
        yield
    finally:
        lock.release()
        lock.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(highlight=False)
    if not Path(args.workdir).is_dir():
        console.print(f"error: --workdir {args.workdir} is not a folder", markup=False)
        return 2
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        console.print("error: set ANTHROPIC_API_KEY (see examples/agent/README.md)", markup=False)
        return 2
    try:
        check_session_id(args.session)  # before the session folder is made for the lock
    except ValueError as exc:
        console.print(f"error: {exc}", markup=False)
        return 2
    client = anthropic.Anthropic(max_retries=args.max_retries)  # key and URL from the env
    try:
        # the raw client also serves forked-extraction's background calls
        engine = stenograph.Engine.from_preset(args.preset, services={"anthropic": client})
    except stenograph.StenographError as exc:
        console.print(f"error: {exc}", markup=False, soft_wrap=True)
        return 2
    try:
        with session_lock(Path(args.state_dir) / args.session):
            try:
                agent = Agent(args, console, client, engine)
            except (stenograph.StenographError, OSError) as exc:
                console.print(f"error: {exc}", markup=False, soft_wrap=True)
                return 2
            try:
                agent.repl()
            finally:
                agent.close()
    except SessionBusy as exc:
        console.print(f"error: {exc}", markup=False, soft_wrap=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
