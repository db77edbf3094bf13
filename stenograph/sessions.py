"""``stenograph sessions list|show|export|delete --store URL`` and ``stenograph migrate``:
managing stored sessions (export writes a transcript ``replay`` reads; delete removes every
trace of a session)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .engine.errors import StenographError

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` (see ``stenograph/__init__.py``)
if TYPE_CHECKING:
    from typing import Any

    from .cli import Commands
    from .stores import Store

# The stores and the engine are imported by the commands: `stenograph --help` loads neither.


def open_store(url: str) -> Store:
    """The store at ``url``."""
    from .stores import open_store as opened

    return opened(url)


def add_commands(commands: Commands) -> None:
    """The ``sessions`` and ``migrate`` subcommands."""
    commands.add("sessions", "list, show, export or delete stored sessions", _sessions_arguments)
    migrate_help = "copy every session (or one) from a store to another"
    commands.add("migrate", migrate_help, _migrate_arguments)


def _sessions_arguments(cmd: argparse.ArgumentParser) -> None:
    actions = cmd.add_subparsers(required=True, metavar="ACTION")
    for name, help_text, run in (
        ("list", "the stored sessions, with their sizes", _list),
        ("show", "one session: entries, notes record, state version", _show),
        ("export", "one session's history as a Messages-API JSON transcript", _export),
        ("delete", "remove every trace of one session", _delete),
    ):
        action = actions.add_parser(name, help=help_text, description=help_text)
        if name != "list":
            action.add_argument("session", help="session id")
        action.add_argument("--store", metavar="URL", required=True, help="session store URL")
        if name == "export":
            action.add_argument("-o", "--output", help="write it to this file (default: stdout)")
        action.set_defaults(run=run)


def _migrate_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--from", dest="source", metavar="URL", required=True, help="source store")
    cmd.add_argument("--to", dest="target", metavar="URL", required=True, help="target store")
    cmd.add_argument("--session", help="only this session")
    cmd.set_defaults(run=_migrate)


def bare_session_history(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The history of a stored session as host messages (with their times)."""
    from .engine.engine import Engine
    from .engine.presets import Preset

    engine = Engine(Preset(name="export", description="", strict=False, slots=(), label="export"))
    session = engine.open_session(session_id, state_dir=None, store=store)
    return [_message(e) for e in session.history]


def _message(entry: Any) -> dict[str, Any]:
    message = {"role": entry.role, "content": entry.content, "uuid": entry.uuid}
    if entry.timestamp is not None:
        from datetime import UTC, datetime

        moment = datetime.fromtimestamp(entry.timestamp, UTC).isoformat()
        message["timestamp"] = moment.replace("+00:00", "Z")
    if entry.usage:
        message["usage"] = entry.usage
    return message


def _known(store: Store, session_id: str) -> None:
    if session_id not in store.sessions():
        raise StenographError(
            f"{store.url}: no session {session_id!r} (see: stenograph sessions list)"
        )


def _list(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    for sid in store.sessions():
        print(f"{sid}\t{len(store.session(sid).read(0)[0])} records")
    return 0


def _show(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    _known(store, args.session)
    storage = store.session(args.session)
    state, problem, version = storage.load_state()
    history = bare_session_history(store, args.session)
    roles = [m["role"] for m in history]
    print(
        json.dumps(
            {
                "session": args.session,
                "store": store.url,
                "entries": len(history),
                "user": roles.count("user"),
                "assistant": roles.count("assistant"),
                "state_version": version,
                "state_problem": problem,
                "notes": _newest_notes(storage.read(0)[0]) or state.get("notes"),
                "handlers": sorted(state.get("handlers", {})),
            },
            indent=2,
        )
    )
    return 0


def _newest_notes(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest notes record of a journal (``path``, ``upto_uuid``), or None."""
    notes = [r for r in records if r.get("op") == "notes"]
    return {k: v for k, v in notes[-1].items() if k != "op"} if notes else None


def _export(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    _known(store, args.session)
    text = json.dumps({"messages": bare_session_history(store, args.session)}, indent=1)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")
    return 0


def _delete(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    if not store.delete(args.session):
        raise StenographError(f"{store.url}: no session {args.session!r} to delete")
    print(f"deleted {args.session} from {store.url}")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    source, target = open_store(args.source), open_store(args.target)
    ids = [args.session] if args.session else source.sessions()
    for sid in ids:
        copied = migrate_session(source, target, sid)
        print(f"{sid}: {copied} records -> {target.url}")
    return 0


def migrate_session(source: Store, target: Store, session_id: str) -> int:
    """Copy one session (journal, state, notes) into ``target``, where it must not exist."""
    if session_id in target.sessions():
        raise StenographError(
            f"{target.url}: session {session_id!r} exists already; delete it first"
        )
    from .stores import CALL, acquire_wait
    from .stores.base import new_owner
    from .stores.folder import FolderStorage

    origin, copy = source.session(session_id), target.session(session_id)
    folder = copy.folder if isinstance(copy, FolderStorage) else None
    records, _ = origin.read(0)
    state, _, _ = origin.load_state()
    lease = acquire_wait(copy, CALL, new_owner(), 60.0, 30.0)
    try:
        copy.append([_relabel(r, folder) for r in records], lease)
        for label in {r["path"] for r in records if r.get("op") == "notes"}:
            text, _ = origin.notes(label, "").read()
            notes = copy.notes(_label(label, folder), "")
            notes.compare_and_swap(notes.read()[1], text)
        if state.get("notes"):
            state["notes"] = _relabel(state["notes"], folder)
        copy.save_state(state, copy.load_state()[2], lease)
    finally:
        copy.release(lease)
    return len(records)


def _label(label: str, folder: Path | None) -> str:
    """A notes label as the target keeps it: its file name (in the session folder of a
    folder store)."""
    name = Path(label).name
    return str(folder / name) if folder is not None else name


def _relabel(record: dict[str, Any], folder: Path | None) -> dict[str, Any]:
    if "path" in record and record.get("op", "notes") == "notes":
        return {**record, "path": _label(record["path"], folder)}
    return record
