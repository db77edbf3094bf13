"""Crash-test helper for tests/test_notes_crash.py: processes that write stenograph files
until the test SIGKILLs them.

Modes (``python crash_writer.py MODE ARGS``):

``notes-server PATH``
    A fork server for the notes file at ``PATH``. It imports stenograph and builds the
    versions once, prints ``ready``, then for every ``run`` line on stdin forks a worker
    that replaces the file with version after version (``pid N``, then ``writing K`` /
    ``wrote K`` around each ``NotesFile.replace``) until it is killed; the server reaps
    it and prints ``exited PID STATUS`` (the raw ``waitpid`` status).
``journal-server STATE_DIR``
    The same for the session journal: ``run SESSION_ID`` forks a worker that opens the
    session through ``stenograph.Engine`` and appends ``journal_message(0)``,
    ``journal_message(1)``, … (``appending I`` / ``appended I`` around each append).
``cas PATH NAME``
    One compare-and-swap client, driven by commands on stdin: ``read`` (remember the file,
    answer ``read <digest>``), ``replace LINE`` (replace what was read by it plus ``LINE``,
    answer ``won`` or ``conflict``), ``append COUNT`` (add ``NAME I`` for I < COUNT, each by
    read -> edit -> replace with retry on conflict, answer ``done <conflicts>``).

Forking a pre-imported server keeps each crash run to a few milliseconds instead of the
~0.2 s an interpreter needs to import stenograph, while every run still kills a real,
separate process in the middle of its writes. Every stdout line is a single ``os.write``
(atomic on a pipe), so the lines of the server and of its workers never interleave.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from stenograph.engine.notes import NotesConflict
from stenograph.handlers import forked_extraction
from stenograph.stores.notes_file import NotesFile

TEMPLATE = Path(forked_extraction.__file__).with_name("template.md").read_text(encoding="utf-8")
VERSION_SIZES = (50_000, 120_000, 210_000, 300_000)
JOURNAL_SIZES = (120, 2_000, 9_000, 40_000, 150_000)
WORKER_SECONDS = 5.0


def say(line: str) -> None:
    """Write one line to stdout in a single system call (no buffering)."""
    os.write(1, (line + "\n").encode("utf-8"))


# notes ---------------------------------------------------------------------------------


@functools.cache
def versions() -> tuple[str, ...]:
    """Full notes files of 50-300 KB that keep the template headings; every line of
    version K carries the tag ``v<K>``, so any mix of two versions is visible."""
    return tuple(_version(k, size) for k, size in enumerate(VERSION_SIZES))


def _version(k: int, size: int) -> str:
    """Version ``k``: each template section filled with ~``size / sections`` characters."""
    parts = []
    blocks = TEMPLATE.strip("\n").split("\n\n")
    for j, block in enumerate(blocks):
        parts.append(block)
        lines = []
        n = 0
        while sum(map(len, lines)) < size // len(blocks):
            lines.append(
                f"- [v{k}] step {n}: edited `src/pkg_{j}/module_{n}.py` — réglé the parser "
                f"edge case #{j * 1000 + n}; tests green again (v{k})."
            )
            n += 1
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def version_of(text: str) -> int | None:
    """The index of the version ``text`` is, -1 for the bare template, else None."""
    if text == TEMPLATE:
        return -1
    return versions().index(text) if text in versions() else None


def notes_worker(path: Path) -> None:
    """Replace the file with the next version, over and over, until killed."""
    memory = NotesFile(path, TEMPLATE, max_chars=1_000_000)  # versions up to 300 KB
    say(f"pid {os.getpid()}")
    text = memory.read()
    current = version_of(text)
    if current is None:
        raise RuntimeError(f"the worker found an unknown file ({len(text)} chars)")
    deadline = time.monotonic() + WORKER_SECONDS
    while time.monotonic() < deadline:
        nxt = (current + 1) % len(versions())
        say(f"writing {nxt}")
        memory.replace(text, versions()[nxt])
        say(f"wrote {nxt}")
        text, current = versions()[nxt], nxt
    say("timeout")


# journal -------------------------------------------------------------------------------


def journal_message(i: int) -> dict[str, Any]:
    """The ``i``-th user message a journal worker appends (120 B to 150 KB, non-ASCII)."""
    size = JOURNAL_SIZES[(i * 7 + i // 3) % len(JOURNAL_SIZES)]
    unit = f"[message {i}] café 日本語 — line of the {i}th journal record.\n"
    return {"role": "user", "content": (unit * (size // len(unit) + 1))[:size], "uuid": f"m{i:05d}"}


def journal_worker(engine: Any, state_dir: Path, session_id: str) -> None:
    """Open the session and append messages until killed."""
    session = engine.open_session(session_id, state_dir=state_dir)
    say(f"pid {os.getpid()}")
    deadline = time.monotonic() + WORKER_SECONDS
    i = 0
    while time.monotonic() < deadline:
        say(f"appending {i}")
        session.append(journal_message(i))
        say(f"appended {i}")
        i += 1
    say("timeout")


# fork server ---------------------------------------------------------------------------


def serve(work: Any) -> None:
    """Print ``ready``; for each stdin line fork a worker ``work(*args)`` and report its end."""
    say("ready")
    for command in sys.stdin:
        verb, *args = command.split()
        if verb != "run":
            raise ValueError(f"unknown command {command!r}")
        pid = os.fork()
        if pid == 0:
            _run_worker(work, args)
        _, status = os.waitpid(pid, 0)
        say(f"exited {pid} {status}")


def _run_worker(work: Any, args: list[str]) -> None:
    """The forked child: run the work, report any error, never return to the server loop."""
    code = 0
    try:
        work(*args)
    except BaseException as exc:  # reported to the test, which fails on it
        say(f"error {exc!r}")
        code = 2
    finally:
        os._exit(code)


# compare-and-swap client ---------------------------------------------------------------


def with_line(text: str, line: str) -> str:
    """``text`` with ``- line`` added at the end (under the last heading, Worklog)."""
    return text.rstrip("\n") + f"\n- {line}\n"


def cas_client(path: Path, name: str) -> None:
    """Serve ``read`` / ``replace LINE`` / ``append COUNT`` commands from stdin."""
    memory = NotesFile(path, TEMPLATE, max_chars=1_000_000)  # versions up to 300 KB
    seen = ""
    say("ready")
    for command in sys.stdin:
        verb, _, arg = command.rstrip("\n").partition(" ")
        if verb == "read":
            seen = memory.read()
            say(f"read {hashlib.sha256(seen.encode()).hexdigest()[:16]}")
        elif verb == "replace":
            try:
                memory.replace(seen, with_line(seen, arg))
                say("won")
            except NotesConflict:
                say("conflict")
        elif verb == "append":
            say(f"done {append_lines(memory, name, int(arg))}")
        else:
            raise ValueError(f"unknown command {command!r}")


def append_lines(memory: NotesFile, name: str, count: int) -> int:
    """Add ``name i`` for each i < count by read -> edit -> replace, retrying on conflict;
    returns how many conflicts were met."""
    conflicts = 0
    for i in range(count):
        while True:
            current = memory.read()
            try:
                memory.replace(current, with_line(current, f"{name} {i}"))
                break
            except NotesConflict:
                conflicts += 1
    return conflicts


def main(argv: list[str]) -> None:
    """Dispatch on the mode (see the module docstring)."""
    mode, *args = argv
    if mode == "notes-server":
        versions()
        serve(lambda: notes_worker(Path(args[0])))
    elif mode == "journal-server":
        import stenograph

        engine = stenograph.Engine.from_preset("inactivity-only")
        serve(lambda session_id: journal_worker(engine, Path(args[0]), session_id))
    elif mode == "cas":
        cas_client(Path(args[0]), args[1])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
