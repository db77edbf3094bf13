"""The hooks a stenograph handler can implement.

Every hook is dispatched by the engine itself, slot by slot, in the order the preset lists
the handlers; ordering markers (``tryfirst``, ``trylast``, ``wrapper``, ``hookwrapper``) are
refused. Every hook takes only the arguments it names (pluggy's opt-in arguments).

The notes hooks are the contract between the handlers that decide the session notes need
refreshing, write them, and use them; a handler calls them with ``session.hook.<name>(...)``.
A ``firstresult`` hook stops at the first slot that returns something other than None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .context import PostSamplingCall, PreCallCall
    from .extraction import ExtractionRequest, NotesRecord
    from .session import Session
    from .state import HandlerState

PROJECT = "stenograph"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def session_opened(session: Session, state: HandlerState | dict[str, Any]) -> None:
    """A session was opened (new, or reloaded from its state folder).

    Runs once per session, for each slot in preset order.

    :param session: the session the phase runs for (its ``history``, ``events``, ``clock``).
    :param state: this slot's persisted state: its handler's ``State`` model (assign
        fields), else a dict of JSON values (change it in place).
    """


@hookspec
def pre_call(session: Session, call: PreCallCall, state: HandlerState | dict[str, Any]) -> None:
    """Before each model request: mark entries, shape what is sent.

    Runs for each slot in preset order, after the host's new input was appended and
    before the request is rendered. Never change ``session.history`` content: use
    ``call.memorize(...)`` or ``call.replace_sent_content(...)``.

    :param session: the session the phase runs for (its ``history``, ``events``, ``clock``).
    :param call: this request: the new and unseen entries, what will be sent, and
        ``memorize`` / ``replace_sent_content`` / ``emit`` to shape it.
    :param state: this slot's persisted state: its handler's ``State`` model (assign
        fields), else a dict of JSON values (change it in place).
    """


@hookspec
def post_sampling(
    session: Session, call: PostSamplingCall, state: HandlerState | dict[str, Any]
) -> None:
    """After each model response was appended to the history.

    Runs for each slot in preset order. Long work goes to ``session.run_in_background``.

    :param session: the session the phase runs for (its ``history``, ``events``, ``clock``).
    :param call: the ``response`` (the appended entry) and the ``request`` that produced it.
    :param state: this slot's persisted state: its handler's ``State`` model (assign
        fields), else a dict of JSON values (change it in place).
    """


@hookspec
def session_closing(session: Session, state: HandlerState | dict[str, Any]) -> None:
    """The session is closing: background work was awaited (bounded); state is saved next.

    Runs once, for each slot in preset order.

    :param session: the session the phase runs for (its ``history``, ``events``, ``clock``).
    :param state: this slot's persisted state: its handler's ``State`` model (assign
        fields), else a dict of JSON values (change it in place).
    """


@hookspec(firstresult=True)
def extraction_requested(
    session: Session, request: ExtractionRequest, state: HandlerState | dict[str, Any]
) -> bool | None:
    """A handler asks for the notes to be refreshed up to ``request.upto_uuid``.

    Called by the handler that decides (update-threshold), from its phase. The first
    extractor that takes the request returns True; it then reports the outcome, once, with
    ``request.settle(session, ok, error)`` (from any thread). A request that no slot takes
    counts as handled at once (``stenograph.request_extraction`` settles it).

    :param session: the session the notes are for.
    :param request: what to cover (``upto_uuid``, ``upto_index``) and why (``tokens``,
        ``tool_calls``, ``reason``); a newer request may replace one not started yet.
    :param state: this slot's persisted state, as in the phase hooks.
    """


@hookspec(firstresult=True)
def extraction_idle(
    session: Session, timeout: float, stale_after: float, state: HandlerState | dict[str, Any]
) -> bool | None:
    """Wait until no extraction is pending or running; answered by the extractor.

    Called by a handler about to use the notes (memory-compact). Returns True when idle,
    False when still busy after ``timeout`` seconds; None (no extractor) counts as idle.

    :param session: the session whose extractions are waited for.
    :param timeout: wait this many seconds at most.
    :param stale_after: a run older than this many seconds is not waited for (False).
    :param state: this slot's persisted state, as in the phase hooks.
    """


@hookspec
def notes_written(
    session: Session, notes: NotesRecord, state: HandlerState | dict[str, Any]
) -> None:
    """New session notes were written: every slot learns of them, in preset order.

    Announced by the extractor with ``session.announce_notes(record)``, which journals the
    record first; a reopened session, and every worker catching up, announces the newest
    record again (one covering an entry no longer in the history is not announced).

    :param session: the session the notes are for.
    :param notes: the ``NotesRecord``: ``label`` (the file path for file notes),
        ``upto_uuid`` (the last entry they cover) and ``version`` (opaque, or None).
    :param state: this slot's persisted state, as in the phase hooks.
    """


@hookspec(firstresult=True)
def notes_current(session: Session, state: HandlerState | dict[str, Any]) -> str | None:
    """The current text of the session notes, answered by the handler that writes them.

    Called by a handler that uses the notes (memory-compact); '' when they are missing or
    unusable (the writer logs why), None when no slot writes notes.

    :param session: the session the notes are for.
    :param state: this slot's persisted state, as in the phase hooks.
    """


PHASE_HOOKS = ("pre_call", "post_sampling")
NOTES_HOOKS = ("extraction_requested", "extraction_idle", "notes_written", "notes_current")
SLOT_HOOKS = ("session_opened", "pre_call", "post_sampling", "session_closing", *NOTES_HOOKS)
