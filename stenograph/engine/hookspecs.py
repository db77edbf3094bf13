"""The hooks a stenograph handler can implement.

Phase hooks (``pre_call``, ``post_sampling``) are dispatched by the engine itself, slot by
slot, in the order the preset lists the handlers; ordering markers (``tryfirst``,
``trylast``, ``wrapper``, ``hookwrapper``) are refused on them. Every hook takes only the
arguments it names (pluggy's opt-in arguments).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .context import PostSamplingCall, PreCallCall
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


PHASE_HOOKS = ("pre_call", "post_sampling")
SLOT_HOOKS = ("session_opened", "pre_call", "post_sampling", "session_closing")
