"""The values of the notes protocol (see the notes hooks in :mod:`.hookspecs`): a request to
refresh the notes, and the record announcing notes written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Session


@dataclass
class ExtractionRequest:
    """Refresh the notes to cover the history up to ``upto_uuid``. ``status`` goes from
    ``pending`` to ``running``, then ``succeeded`` or ``failed`` (or ``coalesced`` /
    ``dropped`` when it never ran)."""

    upto_uuid: str
    upto_index: int
    tokens: int
    tool_calls: int
    reason: str
    filed_at: float
    on_success: Callable[[ExtractionRequest], None] | None = field(default=None, repr=False)
    status: str = "pending"
    error: str | None = None

    def settle(self, session: Session, ok: bool, error: str | None = None) -> None:
        """Report the outcome (safe from any thread); on success the filer's ``on_success``
        advances its state, holding the session's state lock."""
        self.status, self.error = ("succeeded", None) if ok else ("failed", error)
        on_success = self.on_success
        if ok and on_success is not None:
            session.update_state(lambda: on_success(self))


@dataclass(frozen=True)
class NotesRecord:
    """Notes were written: where (``label``, a path for file notes), covering the history
    up to ``upto_uuid``, at ``version`` (opaque; None when the writer keeps none)."""

    label: str
    upto_uuid: str
    version: Any = None


def request_extraction(session: Session, request: ExtractionRequest) -> bool:
    """File ``request`` through the ``extraction_requested`` hook; whether an extractor took
    it. A request nobody takes counts as handled at once (it succeeds)."""
    taken = bool(session.engine.call_hook("extraction_requested", session, request=request))
    if not taken:
        request.settle(session, ok=True)
    return taken
