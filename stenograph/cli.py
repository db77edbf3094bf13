"""stenograph: replay transcripts through presets, explain decisions, list handlers and
presets, check preset files."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from . import __version__
from .engine.errors import StenographError

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` (see ``stenograph/__init__.py``)
if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console
    from rich.table import Table

    from .engine.events import Event
    from .replay import ReplayReport

# Heavy modules (rich, pydantic, the engine, the tokenizer) are imported by the commands
# that use them: `stenograph --help` loads none of them.


@cache
def _out() -> Console:
    from rich.console import Console

    return Console(highlight=False)


@cache
def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _table(*args: Any, **kwargs: Any) -> Table:
    from rich.table import Table

    return Table(*args, **kwargs)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


FORMATS = "{formats}"
TRANSCRIPT_HELP = f"a transcript file; the format is detected from its content: {FORMATS}"


class _HelpFormatter(argparse.HelpFormatter):
    """Fills in every registered transcript format (plugins included) only when a help
    naming them is formatted: the entry-point scan stays out of ``stenograph --help``. The
    width is argparse's, found without ``shutil`` (which loads the compression modules)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_columns() - 2)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text is None or FORMATS not in text:
            return text
        from .integrations.transcripts import format_descriptions

        formats = "; ".join(format_descriptions().values())
        return text.replace(FORMATS, formats.replace("%", "%%"))


def _columns() -> int:
    """``shutil.get_terminal_size().columns``: ``COLUMNS`` when a positive number, else the
    width of the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


class _Parser(argparse.ArgumentParser):
    """A parser (and subcommand parser) formatting its help with ``_HelpFormatter``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    argv, verbose = _verbosity(sys.argv[1:] if argv is None else list(argv))
    args = _parser(_named_command(argv)).parse_args(argv)  # --help exits here, before rich
    import logging

    from rich.logging import RichHandler

    from .integrations.transcripts import TranscriptError

    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(message)s", handlers=[RichHandler(console=_err())])
    try:
        return int(args.run(args))
    except (StenographError, TranscriptError, OSError) as exc:
        _err().print(f"[bold red]error:[/] {_escape(str(exc))}", markup=True, soft_wrap=True)
        return 2
    except Exception as exc:  # never a traceback for the user; -vv shows it
        logging.getLogger("stenograph.cli").debug("internal error", exc_info=True)
        _err().print(
            f"[bold red]error:[/] internal error: {_escape(repr(exc))} (run with -vv for the"
            " traceback, and please report it)",
            soft_wrap=True,
        )
        return 2


def _verbosity(argv: list[str]) -> tuple[list[str], int]:
    """``-v``/``-vv``/``--verbose`` anywhere on the command line (before ``--``)."""
    rest: list[str] = []
    verbose = 0
    for n, arg in enumerate(argv):
        if arg == "--":
            return rest + argv[n:], verbose
        if arg == "--verbose":
            verbose += 1
        elif len(arg) > 1 and arg.startswith("-") and set(arg[1:]) == {"v"}:
            verbose += len(arg) - 1
        else:
            rest.append(arg)
    return rest, verbose


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line. Every subcommand is listed, but only ``command``'s arguments are
    set up (None: every one's): argparse's set-up of ~60 arguments would be most of a
    ``stenograph --help``."""
    parser = _Parser(
        prog="stenograph",
        description=__doc__,
        epilog="-v / -vv (anywhere): info / debug logging on stderr",
    )
    parser.add_argument("--version", action="version", version=f"stenograph {__version__}")
    commands = Commands(parser.add_subparsers(required=True, metavar="COMMAND"), command)
    replay_help = "replay a recorded conversation through a preset"
    commands.add("replay", replay_help, _replay_arguments, description=replay_help)
    explain_help = "replay, then print update-threshold's decisions"
    commands.add("explain", explain_help, _explain_arguments, description=explain_help)
    commands.add("show", "print the request sent at one model call", _show_arguments)
    commands.add("handlers", "list available handlers and their settings", _json_only(_handlers))
    commands.add("presets", "list built-in presets", _json_only(_presets))
    commands.add("check", "validate a preset and show every resolved setting", _check_arguments)
    commands.add("schema", "print the JSON Schema of preset files", _schema_arguments)
    init_help = "write a preset listing every setting, or a plugin package (--plugin)"
    commands.add("init", init_help, _init_arguments)
    from .sessions import add_commands

    add_commands(commands)
    return parser


class Commands:
    """Subcommands added to a parser; only the one named (or every one, for None) gets its
    arguments, from the function given with it."""

    def __init__(self, subparsers: Any, named: str | None) -> None:
        self.subparsers, self.named = subparsers, named

    def add(
        self,
        name: str,
        help_text: str,
        arguments: Callable[[argparse.ArgumentParser], object],
        **options: Any,
    ) -> None:
        """The subcommand ``name`` (listed with ``help_text``), its arguments added by
        ``arguments`` when it is the one named."""
        cmd = self.subparsers.add_parser(name, help=help_text, **options)
        if self.named is None or self.named == name:
            arguments(cmd)


def _named_command(argv: Sequence[str]) -> str:
    """The subcommand the command line names ("" for none): its first word that is not an
    option (the top-level options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


def _replay_arguments(cmd: argparse.ArgumentParser) -> None:
    _replay_options(cmd, ".stenograph", "print the report as one JSON object", _replay)
    cmd.add_argument(
        "--requests", metavar="FILE", help="write every rendered request to FILE, one JSON per line"
    )
    cmd.add_argument(
        "--events",
        metavar="FILE",
        help="write every event to FILE as it happens, one JSON per line",
    )
    cmd.add_argument("--html", metavar="FILE", help="write a self-contained visual report to FILE")


def _explain_arguments(cmd: argparse.ArgumentParser) -> None:
    _replay_options(cmd, None, "print the decisions as JSON", _explain)


def _show_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("transcript", help=TRANSCRIPT_HELP)
    cmd.add_argument("--call", type=int, required=True, metavar="N", help="call index, from 0")
    cmd.add_argument("--preset", default="default", help="built-in preset name or .toml file")
    cmd.add_argument(
        "--diff", action="store_true", help="what the preset changed against the full history"
    )
    cmd.set_defaults(run=_show)


def _json_only(
    run: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.ArgumentParser], None]:
    """The arguments of a listing command: ``--json``."""
    what = run.__name__.strip("_")

    def arguments(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--json", action="store_true", help=f"print the {what} as JSON")
        cmd.set_defaults(run=run)

    return arguments


def _check_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--json", action="store_true", help="print the resolved preset as JSON")
    cmd.add_argument("preset", help="built-in preset name or .toml file")
    cmd.set_defaults(run=_check)


def _schema_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("-o", "--output", help="write it to this file instead")
    cmd.set_defaults(run=_schema)


def _init_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("name", nargs="?", help="preset name (my-preset), or the plugin's handler")
    cmd.add_argument(
        "--handlers",
        help="comma-separated handlers of the preset, in order (default: the default preset's)",
    )
    cmd.add_argument("--plugin", action="store_true", help="write a plugin package skeleton")
    cmd.add_argument("-o", "--output", help="file (preset) or folder (plugin) to write")
    cmd.add_argument("--force", action="store_true", help="overwrite what is there")
    cmd.set_defaults(run=_init)


def _replay_options(
    cmd: argparse.ArgumentParser, state_dir: str | None, json_help: str, run: Any
) -> None:
    cmd.add_argument("transcript", help=TRANSCRIPT_HELP)
    cmd.add_argument(
        "--preset", default="default", help="built-in preset name or .toml file (default: default)"
    )
    kept = state_dir or "in memory"
    where = f"where session state is kept (default: {kept})"
    cmd.add_argument("--state-dir", default=state_dir, help=where)
    cmd.add_argument("--store", metavar="URL", help="session store URL (beats --state-dir)")
    cmd.add_argument(
        "--record",
        type=int,
        default=None,
        help="in a file holding several conversations, replay only this one (from 1);"
        " default: every one",
    )
    cmd.add_argument("--json", action="store_true", help=json_help)
    cmd.add_argument("--prices", help="price table file (TOML) updating the built-in prices")
    cmd.set_defaults(run=run)


def _run_replay(args: argparse.Namespace) -> ReplayReport:
    path = getattr(args, "events", None)
    if path is None:
        return _replay_with(args, None)
    import threading

    lock = threading.Lock()
    with open(path, "w", encoding="utf-8") as file:

        def write(event: Event) -> None:
            with lock:
                file.write(json.dumps(event.to_json(), ensure_ascii=False) + "\n")

        return _replay_with(args, write)


def _replay_with(args: argparse.Namespace, on_event: Any) -> ReplayReport:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .replay import replay

    options = {
        "prices": args.prices,
        "record": args.record,
        "on_event": on_event,
        "store": args.store,
    }
    if args.json or not _err().is_terminal:
        return replay(args.transcript, args.preset, args.state_dir, **options)
    columns = (TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_err(), transient=True) as bar:
        task = bar.add_task("replay", total=None)
        return replay(
            args.transcript,
            args.preset,
            args.state_dir,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            **options,
        )


def _explain(args: argparse.Namespace) -> int:
    report = _run_replay(args)
    if args.json:
        print(json.dumps(report.decisions, indent=2))
        return _warn(report)
    if not report.decisions:
        _out().print(f"preset {report.preset} has no update-threshold slot: nothing to explain")
        return _warn(report)
    table = _table(title=f"update-threshold decisions ({report.preset})", title_justify="left")
    for column in ("call", "tokens", "growth", "tools", "quiet", "extract", "why"):
        table.add_column(column, overflow="fold")
    for d in report.decisions:
        table.add_row(
            str(d["after_assistant_index"]),
            f"{d['tokens']:,}",
            f"{d['growth']:,}",
            str(d["tool_calls"]),
            "yes" if d["quiet"] else "no",
            "[bold green]yes[/]" if d["extract"] else "no",
            _escape(d["reason"]),
        )
    _out().print(table)
    _out().print(f"{len(report.extractions)} extraction(s) in {report.calls} calls")
    return _warn(report)


def _replay(args: argparse.Namespace) -> int:
    from .replay import request_line

    report = _run_replay(args)
    if args.requests:
        with open(args.requests, "w", encoding="utf-8") as file:
            file.writelines(request_line(call.sent) + "\n" for call in report.ledger.calls)
    if args.html:
        _write_html(args.html, report)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        _print_report(report)
    return _warn(report)


def _write_html(path: str, report: ReplayReport) -> None:
    from . import html_report

    per_call = [
        {"tokens_full": c.tokens_full, "tokens_sent": c.tokens_sent} for c in report.ledger.calls
    ]
    notes = None
    if report.memory_file:
        try:
            notes = Path(report.memory_file).read_text("utf-8")
        except OSError:
            notes = None
    html_report.write(path, report.to_json(), per_call, notes)


def _show(args: argparse.Namespace) -> int:
    from .replay import replay, request_line

    report = replay(args.transcript, args.preset, state_dir=None)
    calls = report.ledger.calls
    if not 0 <= args.call < len(calls):
        last = f"0 to {len(calls) - 1}" if calls else "none"
        raise StenographError(
            f"{args.transcript}: no call {args.call}; it has {len(calls)} model calls ({last})"
        )
    call = calls[args.call]
    if not args.diff:
        print(request_line(call.sent))
        return 0
    full, sent = (
        json.dumps(r, indent=1, ensure_ascii=False, sort_keys=True).splitlines()
        for r in (call.full, call.sent)
    )
    label = f"call {args.call}"
    import difflib

    diff = difflib.unified_diff(
        full, sent, f"{label}, full history", f"{label}, as sent", lineterm=""
    )
    print("\n".join(diff) or f"{label}: sent as the full history (no change)")
    return 0


def _warn(report: ReplayReport) -> int:
    """Every warning on stderr, then what was lost and the requests the API would reject;
    returns the exit status (1: something was lost or is wrong; the report stands)."""
    for warning in report.warnings:
        _err().print(f"warning: {warning}", markup=False, soft_wrap=True)
    for violation in report.request_violations:
        problems = "; ".join(violation["problems"])
        _err().print(
            f"warning: request of call {violation['before_assistant_index']}: the API would"
            f" reject it: {problems}",
            markup=False,
            soft_wrap=True,
        )
    for omission in report.not_replayed:
        if omission["lost"]:
            _err().print(
                f"warning: {omission['count']:,} not replayed: {omission['reason']}",
                markup=False,
                soft_wrap=True,
            )
    if report.skipped_lines:
        _err().print(f"warning: {report.skipped_lines} transcript line(s) skipped", markup=False)
    return report.exit_status


def _print_report(report: ReplayReport) -> None:
    saved = report.tokens_full - report.tokens_sent
    share = f" ({saved / report.tokens_full:.1%} less)" if report.tokens_full else ""
    _out().print(
        f"[bold]{_escape(report.transcript)}[/] ({report.format}) with preset"
        f" [bold]{_escape(report.preset)}[/]"
    )
    table = _table(show_header=False, box=None)
    table.add_row("model calls replayed", f"{report.calls:,}")
    table.add_row("tokens, full history", f"{report.tokens_full:,}")
    table.add_row("tokens, as sent", f"{report.tokens_sent:,}{share}")
    table.add_row("entries memorized", f"{report.memorized_entries:,}")
    table.add_row("extractions", f"{len(report.extractions):,}")
    notes = _escape(f"{report.memory_file} ({report.notes_backend})") if report.memory_file else "-"
    table.add_row("memory file", notes)
    table.add_row("handler errors", f"{len(report.handler_errors):,}")
    table.add_row("requests the API would reject", f"{len(report.request_violations):,}")
    table.add_row("session state", _escape(report.session_folder or "(in memory)"))
    if report.skipped_lines:
        table.add_row("transcript lines skipped", f"{report.skipped_lines:,}")
    table.add_row("records lost (not replayed)", f"{report.lost:,}")
    if report.cache_ttl:
        ttl = report.cache_ttl
        where = f"from the {ttl['source']}, call {ttl['before_assistant_index']}"
        table.add_row("prompt-cache TTL detected", f"{ttl['ttl']} ({where})")
    if report.economics:
        _cost_rows(table, report.economics)
    _out().print(table)
    _print_rows(
        "memorize",
        ("before call", "gap", "entries", "tokens saved"),
        [
            (
                e["before_assistant_index"],
                f"{e['gap_seconds']:,.0f} s",
                e["entries"],
                f"{e['tokens_saved']:,}",
            )
            for e in report.memorize_events
        ],
    )
    _print_rows(
        "compactions",
        ("before call", "tokens before", "tokens after", "messages kept"),
        [
            (
                c["before_assistant_index"],
                f"{c['tokens_before']:,}",
                f"{c['tokens_after']:,}",
                c["kept_messages"],
            )
            for c in report.compactions
        ],
    )
    _print_rows(
        "extractions",
        ("after call", "tokens", "tool calls", "why", "notes"),
        [
            (
                e["after_assistant_index"],
                f"{e['tokens']:,}",
                e["tool_calls"],
                e["reason"],
                e["status"],
            )
            for e in report.extractions
        ],
    )
    _print_rows(
        "not replayed",
        ("records", "why", "lost", "first at"),
        [
            (f"{o['count']:,}", o["reason"], "lost" if o["lost"] else "left out", _first(o))
            for o in report.not_replayed
        ],
    )
    _print_rows(
        "conversations in the file",
        ("record", "calls", "session"),
        [(c["record"], c["calls"], c["session"]) for c in report.conversations],
    )
    if report.economics:
        _print_cost_calls(report.economics)
    for problem in report.handler_errors:
        where = f"handler {problem['handler']} failed in {problem['phase']}"
        _err().print(f"{where}: {problem['error']}")


def _first(omission: dict[str, Any]) -> str:
    return omission["where"][0].rsplit("/", 1)[-1] if omission["where"] else "-"


def _cost_rows(table: Table, economics: dict[str, Any]) -> None:
    """Session cost lines: as recorded vs with the preset (simulated), the notes forks, the
    file's own."""
    from .economics.prices import usd

    recorded = economics["as_recorded"]["totals"]["cost"]
    preset = economics["with_preset"]["totals"]["cost"]
    share = f" ({(recorded - preset) / recorded:.1%})" if recorded else ""
    table.add_row(f"cost as recorded ({economics['cache_ttl']} cache)", usd(recorded))
    table.add_row("cost with the preset", usd(preset))
    table.add_row("saving", usd(recorded - preset) + share)
    forks = economics["with_preset"]["forks"]
    if forks["calls"]:
        fork_cost = forks["totals"]["cost"]
        table.add_row(f"notes forks ({len(forks['calls'])} calls)", usd(fork_cost))
        table.add_row("saving, forks included", usd(recorded - preset - fork_cost))
    if economics["recorded_usage"]["calls"]:
        file_cost = economics["recorded_usage"]["totals"]["cost"]
        table.add_row("cost of the recorded usage", usd(file_cost))


def _print_cost_calls(economics: dict[str, Any]) -> None:
    """The calls whose simulated cost the preset changed."""
    from .economics.prices import usd

    rows = []
    for before, after in zip(
        economics["as_recorded"]["calls"], economics["with_preset"]["calls"], strict=True
    ):
        if before != after:
            rows.append(
                (
                    before["index"],
                    f"{before['cache_read']:,} / {after['cache_read']:,}",
                    f"{before['cache_write']:,} / {after['cache_write']:,}",
                    usd(before["cost"]),
                    usd(after["cost"]),
                    usd(before["cost"] - after["cost"]),
                )
            )
    _print_rows(
        "cost per call (where the preset changed it)",
        ("call", "cache read", "cache write", "as recorded", "with preset", "saved"),
        rows,
    )


def _print_rows(title: str, header: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    table = _table(title=title, title_justify="left")
    for name in header:
        table.add_column(name)
    for row in rows:
        table.add_row(*(_escape(str(cell)) for cell in row))
    _out().print(table)


def _handlers(args: argparse.Namespace) -> int:
    from pydantic.alias_generators import to_camel

    from .engine.discovery import HandlerCatalog

    catalog = HandlerCatalog()
    status = 0
    listed: list[dict[str, Any]] = []
    for name in catalog.names():
        try:
            handler = catalog.get(name)
        except StenographError as exc:
            listed.append({"name": name, "origin": catalog.origin(name), "error": str(exc)})
            if not args.json:
                _err().print(
                    f"[red]{_escape(name)}[/] ({_escape(catalog.origin(name))}):"
                    f" {_escape(str(exc))}"
                )
            status = 1
            continue
        settings = [
            {
                "name": to_camel(field_name),
                "type": _type_name(info.annotation),
                "default": info.get_default(call_default_factory=True),
                "description": info.description or "",
            }
            for field_name, info in handler.Settings.model_fields.items()
        ]
        listed.append(
            {
                "name": name,
                "phase": handler.phase,
                "origin": catalog.origin(name),
                "summary": handler.summary,
                "settings": settings,
            }
        )
        if not args.json:
            _print_handler(listed[-1])
    if args.json:
        print(json.dumps(listed, indent=2, default=str))
    return status


def _print_handler(handler: dict[str, Any]) -> None:
    where = f"{handler['phase'] or 'any phase'}, {handler['origin']}"
    _out().print(
        f"[bold]{_escape(handler['name'])}[/] ({_escape(where)}): {_escape(handler['summary'])}"
    )
    table = _table(box=None, padding=(0, 2, 0, 2))
    for column in ("setting", "type", "default", "description"):
        table.add_column(column)
    for setting in handler["settings"]:
        table.add_row(
            setting["name"],
            _escape(setting["type"]),
            _escape(repr(setting["default"])),
            _escape(setting["description"]),
        )
    _out().print(table)


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _presets(args: argparse.Namespace) -> int:
    from .engine.presets import builtin_names, load_preset

    presets: list[dict[str, Any]] = []
    for name in builtin_names():
        preset = load_preset(name)
        handlers = [s.handler for s in preset.slots]
        presets.append({"name": name, "description": preset.description, "handlers": handlers})
    if args.json:
        print(json.dumps(presets, indent=2))
        return 0
    table = _table("preset", "handlers", "description")
    for p in presets:
        table.add_row(
            _escape(p["name"]), _escape(", ".join(p["handlers"])), _escape(p["description"])
        )
    _out().print(table)
    return 0


def _check(args: argparse.Namespace) -> int:
    from pydantic.alias_generators import to_camel

    from .engine.engine import Engine

    try:
        engine = Engine.from_preset(args.preset)
    except StenographError as exc:
        if not args.json:
            raise
        print(json.dumps({"ok": False, "preset": args.preset, "error": str(exc)}, indent=2))
        return 2
    preset = engine.preset
    if args.json:
        slots = [
            {
                "index": slot.index,
                "handler": slot.name,
                "settings": {
                    to_camel(name): {
                        "value": getattr(slot.settings.values, name),
                        "set_by": slot.settings.origins[name],
                    }
                    for name in type(slot.settings.values).model_fields
                },
            }
            for slot in engine.slots
        ]
        data = {"ok": True, "preset": preset.name, "files": list(preset.files)}
        print(json.dumps({**data, "strict": preset.strict, "slots": slots}, indent=2, default=str))
        return 0
    files = _escape(" -> ".join(preset.files))
    _out().print(f"[green]ok[/] preset [bold]{_escape(preset.name)}[/] ({files})")
    if preset.strict:
        _out().print("strict = true: handler failures raise")
    for slot in engine.slots:
        title = _escape(f"handlers[{slot.index}]: {slot.name}")
        table = _table(title=title, title_justify="left")
        table.add_column("setting", no_wrap=True)
        table.add_column("value", overflow="fold")
        table.add_column("set by", overflow="fold")
        values = slot.settings.values
        for field_name in type(values).model_fields:
            value = _escape(repr(getattr(values, field_name)))
            table.add_row(to_camel(field_name), value, _escape(slot.settings.origins[field_name]))
        _out().print(table)
    if engine.warnings:  # each logged above as the engine was built
        _err().print(f"error: {len(engine.warnings)} STENOGRAPH_* variable(s) set nothing")
        return 1
    return 0


def _schema(args: argparse.Namespace) -> int:
    from .engine.discovery import HandlerCatalog
    from .schema import schema_text

    text = schema_text(HandlerCatalog())
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        _err_line(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _init(args: argparse.Namespace) -> int:
    from .engine.discovery import HandlerCatalog
    from .engine.presets import load_preset
    from .scaffold import preset_text, write_plugin, write_preset

    if args.plugin:
        name = args.name or "my-handler"
        folder = Path(args.output or f"stenograph-{name}")
        files = write_plugin(folder, name, args.force)
        _err_line(f"wrote {len(files)} files in {folder}: pip install -e '{folder}[test]'")
        return 0
    name = args.name or "my-preset"
    if args.handlers:
        handlers = [h.strip() for h in args.handlers.split(",") if h.strip()]
    else:
        handlers = [slot.handler for slot in load_preset("default").slots]
    path = Path(args.output or f"{name}.toml")
    write_preset(path, preset_text(name, handlers, HandlerCatalog()), args.force)
    _err_line(f"wrote {path}: stenograph check {path}")
    return 0


def _err_line(text: str) -> None:
    _err().print(text, markup=False, highlight=False, soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
