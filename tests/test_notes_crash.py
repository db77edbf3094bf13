"""Crash safety with real processes killed at random moments (SIGKILL): the notes file is
always one whole version, compare-and-swap holds across processes, and a session journal
always reopens to a prefix of what was appended.

The random kill delays come from ``random.Random(SEED)``; a failure message names the seed
and the run. Reproduce with ``STENOGRAPH_CRASH_SEED=<seed> pytest tests/test_notes_crash.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import select
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crash_writer
import pytest
from crash_writer import TEMPLATE, journal_message, version_of, versions, with_line

import stenograph
from stenograph.stores.notes_file import NotesFile

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork and flock")

SEED = int(os.environ.get("STENOGRAPH_CRASH_SEED", "20240611"))
WRITER = Path(crash_writer.__file__)
NOTES_RUNS = 300
NOTES_KILL_WINDOW = 0.060  # seconds after the worker reports its first write
JOURNAL_RUNS = 100
JOURNAL_KILL_WINDOW = 0.020
CAS_ROUNDS = 20
CAS_APPENDS = 40
LINE_TIMEOUT = 10.0


class Child:
    """A ``crash_writer.py`` process spoken to by lines on stdin and stdout."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._buffer = b""

    def send(self, command: str) -> None:
        """Write one command line."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = LINE_TIMEOUT) -> str:
        """The next stdout line; fails after ``timeout`` seconds or at end of output."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no line from {self.proc.args[2:]} in {timeout} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError(f"{self.proc.args[2:]} ended (exit {self.proc.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def expect(self, prefix: str) -> str:
        """The next line, which must start with ``prefix``; returns the rest of it."""
        line = self.line()
        assert line.startswith(prefix), f"expected {prefix!r}, got {line!r}"
        return line[len(prefix) :].strip()

    def close(self) -> None:
        """End of stdin, then wait for the exit (kill it if it hangs)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=LINE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Killed:
    """What a forked worker reported before it was killed."""

    pid: int
    delay: float
    lines: list[str] = field(default_factory=list)

    def last(self, verb: str) -> int | None:
        """The number on the last ``verb N`` line, if any."""
        numbers = [int(line.split()[1]) for line in self.lines if line.startswith(verb + " ")]
        return numbers[-1] if numbers else None

    def completed(self, before: int) -> int:
        """The version on file after the last replace that returned (``before`` if none)."""
        written = self.last("wrote")
        return before if written is None else written

    def count(self, verb: str) -> int:
        """How many ``verb N`` lines the worker wrote."""
        return sum(line.startswith(verb + " ") for line in self.lines)


def crash_once(server: Child, command: str, start: str, delay: float) -> Killed:
    """Fork a worker with ``command``, wait for its first ``start`` line, let it work for
    ``delay`` seconds, SIGKILL it and collect its lines up to the server's ``exited``."""
    server.send(command)
    killed = Killed(pid=int(server.expect("pid")), delay=delay)
    killed.lines.append(server.line())
    assert killed.lines[0].startswith(start), killed.lines
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):  # it died early: its lines say why
        os.kill(killed.pid, signal.SIGKILL)
    while not (line := server.line()).startswith("exited "):
        killed.lines.append(line)
    pid, status = map(int, line.split()[1:])
    assert not any(x.startswith(("error", "timeout")) for x in killed.lines), killed.lines
    assert pid == killed.pid and os.WIFSIGNALED(status), line
    assert os.WTERMSIG(status) == signal.SIGKILL, line
    return killed


@pytest.fixture
def rng() -> random.Random:
    """The seeded random source of the kill delays (the seed is printed on failure)."""
    print(f"crash test seed: {SEED}")
    return random.Random(SEED)


@pytest.fixture
def children() -> Iterator[list[Child]]:
    """Started children, closed (or killed) when the test ends."""
    started: list[Child] = []
    yield started
    for child in started:
        child.close()


# 1. notes file under SIGKILL -----------------------------------------------------------


def temp_files(folder: Path, name: str) -> set[Path]:
    """The temp files ``atomic_write`` leaves for ``name`` when killed before the rename."""
    return set(folder.glob(f".{name}.*.tmp"))


def kill_position(killed: Killed, before: int, after: int, new_temps: int) -> str:
    """Where in the write cycle the kill landed, from the worker's lines and the files."""
    if killed.lines[-1].startswith("wrote "):
        return "between replaces"
    if new_temps:
        return "in atomic_write, before the rename (temp file left)"
    if after != killed.completed(before):
        return "in replace, after the rename"
    return "in replace, before the temp file (lock / compare)"


def check_whole_version(memory: NotesFile, killed: Killed, before: int, where: str) -> int:
    """The file is exactly the version it held before the cut write or the one being
    written (never empty, truncated or mixed); returns that version."""
    text = memory.read()
    found = version_of(text)
    tags = sorted({word for word in text.split() if word.startswith("[v")})
    assert found is not None, f"{where}: not one whole version: {len(text)} chars, tags {tags}"
    allowed = {killed.completed(before), killed.last("writing")}
    assert found in allowed, f"{where}: file is v{found}, expected one of {allowed}"
    assert stat.S_IMODE(memory.path.stat().st_mode) == 0o600, where
    return found


def check_fresh_replace(memory: NotesFile, current: int, rng: random.Random, where: str) -> int:
    """From this (another) process: the lock is free, ``read`` works and a new ``replace``
    succeeds; returns the version written."""
    with open(memory.path.with_name(memory.path.name + ".lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.fail(f"{where}: the lock file is still locked after the writer died")
        fcntl.flock(lock, fcntl.LOCK_UN)
    nxt = rng.choice([k for k in range(len(versions())) if k != current])
    expected = memory.read()
    memory.replace(expected, versions()[nxt])
    assert memory.read() == versions()[nxt], where
    return nxt


def check_leftover(temp: Path, killed: Killed, where: str) -> int:
    """A temp file left by a killed write is a prefix of the version being written."""
    data = temp.read_bytes()
    target = versions()[killed.last("writing")].encode()
    assert target.startswith(data), f"{where}: {temp.name} is not a prefix of the version"
    return len(data)


def print_notes_report(positions: Counter, stats: Counter, temps: list[int], t: float) -> None:
    """Summarize where the kills landed and what they left behind."""
    window = f"U(0, {NOTES_KILL_WINDOW * 1000:.0f} ms)"
    print(f"\nnotes: {NOTES_RUNS} kills in {t:.1f} s, delay {window} after the first write")
    for position, n in positions.most_common():
        print(f"  {n:4d}  {position}")
    for key in ("completed replaces per worker", "version being written at the kill"):
        print(f"  {key}:", dict(sorted((k[1], n) for k, n in stats.items() if k[0] == key)))
    full = set(map(len, (v.encode() for v in versions())))
    kinds = Counter("empty" if n == 0 else "complete" if n in full else "partial" for n in temps)
    print(f"  leftover temp files: {len(temps)} {dict(kinds)}")


def test_notes_file_survives_sigkill_during_replace(
    tmp_path: Path, rng: random.Random, children: list[Child]
) -> None:
    """A SIGKILL at a random moment of a stream of replaces leaves one whole version, and
    the file stays usable (read, replace) from another process."""
    memory = NotesFile(tmp_path / "notes" / "session-memory.md", TEMPLATE, max_chars=1_000_000)
    assert memory.ensure()
    assert stat.S_IMODE(memory.path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(memory.path.stat().st_mode) == 0o600
    server = Child("notes-server", str(memory.path))
    children.append(server)
    assert server.line() == "ready"
    positions: Counter[str] = Counter()
    stats: Counter[tuple[str, int]] = Counter()
    temps: list[int] = []
    before, start = -1, time.monotonic()
    for run in range(NOTES_RUNS):
        where = f"seed {SEED}, run {run}"
        old_temps = temp_files(memory.path.parent, memory.path.name)
        killed = crash_once(server, "run", "writing ", rng.uniform(0, NOTES_KILL_WINDOW))
        new_temps = temp_files(memory.path.parent, memory.path.name) - old_temps
        assert len(new_temps) <= 1, f"{where}: {new_temps}"
        temps += [check_leftover(temp, killed, where) for temp in new_temps]
        after = check_whole_version(memory, killed, before, where)
        positions[kill_position(killed, before, after, len(new_temps))] += 1
        stats["completed replaces per worker", killed.count("wrote")] += 1
        stats["version being written at the kill", killed.last("writing")] += 1
        before = check_fresh_replace(memory, after, rng, where)
    print_notes_report(positions, stats, temps, time.monotonic() - start)
    extra = {p.name for p in memory.path.parent.iterdir()} - {
        memory.path.name,
        memory.path.name + ".lock",
        *(p.name for p in temp_files(memory.path.parent, memory.path.name)),
    }
    assert not extra, extra


# 2. compare-and-swap across processes --------------------------------------------------


def cas_round(a: Child, b: Child, memory: NotesFile, r: int) -> str:
    """Both clients read the same file, then both replace it at once: exactly one wins and
    the file is its edit. Returns the winner's name."""
    a.send("read")
    b.send("read")
    assert a.expect("read") == b.expect("read"), f"round {r}: they read different files"
    seen = memory.read()
    a.send(f"replace A round {r}")
    b.send(f"replace B round {r}")
    answers = {"A": a.line(), "B": b.line()}
    assert sorted(answers.values()) == ["conflict", "won"], f"round {r}: {answers}"
    winner = "A" if answers["A"] == "won" else "B"
    assert memory.read() == with_line(seen, f"{winner} round {r}"), f"round {r}"
    return winner


def test_compare_and_swap_across_processes(tmp_path: Path, children: list[Child]) -> None:
    """Two processes racing on the notes file: one winner per round, no update lost."""
    memory = NotesFile(tmp_path / "notes" / "session-memory.md", TEMPLATE, max_chars=1_000_000)
    memory.ensure()
    a = Child("cas", str(memory.path), "A")
    b = Child("cas", str(memory.path), "B")
    children.extend([a, b])
    assert (a.line(), b.line()) == ("ready", "ready")
    winners = Counter(cas_round(a, b, memory, r) for r in range(CAS_ROUNDS))
    a.send(f"append {CAS_APPENDS}")
    b.send(f"append {CAS_APPENDS}")
    conflicts = int(a.expect("done")) + int(b.expect("done"))
    lines = memory.read().splitlines()
    for name in "AB":
        mine = [line for line in lines if line.startswith(f"- {name} ") and "round" not in line]
        assert mine == [f"- {name} {i}" for i in range(CAS_APPENDS)], f"{name}: {mine}"
    assert sum("round" in line for line in lines) == CAS_ROUNDS
    print(
        f"\ncas: {CAS_ROUNDS} rounds won {dict(winners)}; {2 * CAS_APPENDS} appends, "
        f"{conflicts} conflicts retried, none lost"
    )


# 3. session journal under SIGKILL ------------------------------------------------------


def check_reopened(session: stenograph.Session, killed: Killed, where: str) -> int:
    """The reopened history is messages 0..m-1 in order: every append that returned, plus
    perhaps the one in flight, and nothing else. Returns m."""
    done = killed.count("appended")
    in_flight = killed.lines[-1].startswith("appending ")
    entries = session.history.entries
    assert done <= len(entries) <= done + in_flight, f"{where}: {len(entries)} / {done}"
    for i, entry in enumerate(entries):
        expected = journal_message(i)
        got = (entry.role, entry.content, entry.uuid)
        assert got == (expected["role"], expected["content"], expected["uuid"]), f"{where}: #{i}"
    return len(entries)


def check_append_after_reopen(
    engine: stenograph.Engine, state_dir: Path, session_id: str, m: int, where: str
) -> None:
    """Appending to the reopened session works and survives another reopen."""
    with engine.open_session(session_id, state_dir=state_dir) as session:
        assert len(session.history.entries) == m, where
        session.append({"role": "user", "content": "after the crash", "uuid": "after"})
    with engine.open_session(session_id, state_dir=state_dir) as session:
        uuids = [e.uuid for e in session.history.entries]
        assert uuids == [f"m{i:05d}" for i in range(m)] + ["after"], f"{where}: {uuids[-3:]}"


def test_journal_survives_sigkill_during_append(
    tmp_path: Path, rng: random.Random, children: list[Child]
) -> None:
    """A SIGKILL at a random moment of a stream of appends: the session reopens to a prefix
    of the messages, and appending after the crash works."""
    state_dir = tmp_path / "state"
    engine = stenograph.Engine.from_preset("inactivity-only")
    server = Child("journal-server", str(state_dir))
    children.append(server)
    assert server.line() == "ready"
    torn = in_flight_kept = 0
    appended: list[int] = []
    start = time.monotonic()
    for run in range(JOURNAL_RUNS):
        where, session_id = f"seed {SEED}, run {run}", f"crash-{run:03d}"
        delay = rng.uniform(0, JOURNAL_KILL_WINDOW)
        killed = crash_once(server, f"run {session_id}", "appending ", delay)
        path = state_dir / session_id / "journal.jsonl"  # absent if killed before the first
        journal = path.read_bytes() if path.exists() else b""
        torn += bool(journal) and not journal.endswith(b"\n")
        with engine.open_session(session_id, state_dir=state_dir) as session:
            m = check_reopened(session, killed, where)
        in_flight_kept += m > killed.count("appended")
        appended.append(m)
        check_append_after_reopen(engine, state_dir, session_id, m, where)
    print(
        f"\njournal: {JOURNAL_RUNS} kills in {time.monotonic() - start:.1f} s, "
        f"delay U(0, {JOURNAL_KILL_WINDOW * 1000:.0f} ms); records kept per run "
        f"{min(appended)}-{max(appended)}; torn last line {torn}x; "
        f"in-flight record kept {in_flight_kept}x"
    )
