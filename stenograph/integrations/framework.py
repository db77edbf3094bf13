"""What the framework adapters share: one session per conversation, the notes writer's
Anthropic client built from the framework's model settings, and feeding the framework's
message list (converted to Anthropic's format) into the session."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anthropic

from ..engine.clock import Clock
from ..engine.engine import Engine
from ..engine.errors import StenographError
from ..engine.events import HistoryNotFollowed, NotesClientUnavailable
from ..engine.session import Session
from ..engine.store import check_session_id
from ..engine.sync import ConversationMismatch

if TYPE_CHECKING:
    from ..stores.base import Store

log = logging.getLogger("stenograph.integrations")
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
Message = dict[str, Any]
T = TypeVar("T")


@dataclass(frozen=True)
class ModelSettings:
    """What the notes writer copies from the framework's model so that its fork reaches the
    same endpoint, with the same key, as the main thread (and so shares its prompt cache)."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    problem: str | None = None  # why no client can be built from these settings

    def client(self) -> anthropic.Anthropic:
        """A synchronous Anthropic client on these settings (the fork runs on a thread)."""
        return anthropic.Anthropic(
            api_key=self.api_key, base_url=self.base_url, default_headers=dict(self.headers)
        )


def custom_headers(client: Any) -> tuple[tuple[str, str], ...]:
    """The headers the host gave ``client``, an SDK client of any kind (``default_headers=``),
    through the SDK's public API: its ``default_headers`` less those of a copy without
    custom headers."""
    plain = client.with_options(set_default_headers={}).default_headers
    return tuple(
        sorted(
            (k, v)
            for k, v in client.default_headers.items()
            if isinstance(v, str) and plain.get(k) != v
        )
    )


def session_id_for(key: object) -> str:
    """A session id for a framework's conversation key: the key itself when it is a valid
    id, else its safe characters plus a short digest (so distinct keys stay distinct)."""
    text = str(key)
    try:
        return check_session_id(text)
    except ValueError:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return f"{UNSAFE.sub('_', text)[:150].strip('.') or 'key'}-{digest}"


class SessionPool:
    """The sessions of one adapter, one per conversation key, opened on first use with the
    notes writer's client taken from the framework's model; ``store`` (a store URL or
    ``Store``) and ``state_dir`` are those of :meth:`Engine.open_session`."""

    def __init__(
        self,
        preset: str | Path | Engine = "default",
        *,
        state_dir: str | Path | None = ".stenograph",
        store: str | Path | Store | None = None,
        clock: Clock | None = None,
        services: dict[str, Any] | None = None,
        **engine_options: Any,
    ) -> None:
        self.engine = (
            preset if isinstance(preset, Engine) else Engine.from_preset(preset, **engine_options)
        )
        self.state_dir, self.store, self.clock = state_dir, store, clock
        self._services = dict(services or {})
        self._sessions: dict[str, Session] = {}
        self._clients: dict[ModelSettings, anthropic.Anthropic] = {}
        self._lock = threading.Lock()

    def session(self, key: object, settings: Callable[[], ModelSettings] | None = None) -> Session:
        """The session of conversation ``key`` (opened now when new; ``settings`` gives the
        framework model's settings for the notes writer)."""
        sid = session_id_for(key)
        with self._lock:
            found = self._sessions.get(sid)
            if found is not None:
                return found
            services, problem = self._notes_services(settings)
            session = self.engine.open_session(
                sid, state_dir=self.state_dir, store=self.store, clock=self.clock, services=services
            )
            self._sessions[sid] = session
        if problem is not None:
            log.warning("session %s: notes writer without the model's client: %s", sid, problem[1])
            model, reason = problem
            session.record(NotesClientUnavailable(time=session.clock(), model=model, reason=reason))
        return session

    async def asession(
        self, key: object, settings: Callable[[], ModelSettings] | None = None
    ) -> Session:
        """:meth:`session` for async hosts: a stored session is opened in a thread."""
        if (self.store is None and self.state_dir is None) or session_id_for(key) in self._sessions:
            return self.session(key, settings)
        return await asyncio.to_thread(self.session, key, settings)

    @property
    def sessions(self) -> dict[str, Session]:
        """The open sessions by id."""
        return dict(self._sessions)

    def close(self) -> None:
        """Close every session (each waits, bounded, for its background work)."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()

    def _notes_services(
        self, settings: Callable[[], ModelSettings] | None
    ) -> tuple[dict[str, Any], tuple[str, str] | None]:
        writes = self.engine.implements("extraction_requested")
        if "anthropic" in self._services or not writes or settings is None:
            return self._services, None
        found = settings()
        if found.problem is not None:
            return self._services, (found.model, found.problem)
        client = self._clients.get(found)
        if client is None:
            client = self._clients[found] = found.client()
        return {**self._services, "anthropic": client}, None


def feed(session: Session, messages: Sequence[Mapping[str, Any]]) -> bool:
    """Make ``session`` hold the framework's whole list (Anthropic format), the list being
    the truth (:meth:`Session.sync`: unseen messages appended, edits adopted, a rewind
    followed). A list that shares nothing with the history (other code replaced it, e.g.
    with a summary) replaces it: the history is truncated and the list appended, so the
    handlers go on with what the model really sees. False, with a ``HistoryNotFollowed``
    event, only when the list cannot be taken at all (the call then goes out as the
    framework built it). Never raises for a changed history."""
    try:
        try:
            session.sync(messages)
        except ConversationMismatch as exc:
            log.info("session %s: the framework replaced the history (%s)", session.id, exc)
            session.truncate(after=None)
            session.sync(messages)
        return True
    except (StenographError, ValueError, TypeError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    log.warning("session %s: history not followed (%s)", session.id, reason)
    session.record(
        HistoryNotFollowed(
            time=session.clock(),
            messages=len(messages),
            entries=len(session.history),
            reason=reason,
        )
    )
    return False


class Conversions(Generic[T]):
    """What ``convert`` made of each message of a list a framework passes whole on every
    call, kept while the message is the same object and its ``parts`` (attributes that a
    change would replace) are the same objects or equal ones: each message is converted
    once, not once per call. Without ``parts``, kept while the message is the same object
    (a message nobody changes). Kept only for the messages of the latest list (once the
    cache holds many more)."""

    def __init__(
        self, convert: Callable[[Any], T], parts: Callable[[Any], tuple[Any, ...]] | None = None
    ) -> None:
        self._convert, self._parts = convert, parts
        self._kept: dict[int, tuple[Any, tuple[Any, ...], T]] = {}

    def __call__(self, messages: Sequence[Any]) -> list[T]:
        """The conversions of ``messages``, in order."""
        kept, parts, out = self._kept, self._parts, []
        for message in messages:
            now = () if parts is None else parts(message)
            hit = kept.get(id(message))
            if (
                hit is None
                or hit[0] is not message
                or (hit[1] is not now and not _same(hit[1], now))  # () is one object
            ):
                hit = kept[id(message)] = (message, now, self._convert(message))
            out.append(hit[2])
        self._kept = latest_only(kept, messages)
        return out


def latest_only(kept: dict[int, Any], messages: Sequence[Any]) -> dict[int, Any]:
    """``kept`` (by ``id`` of a message) without the messages ``messages`` no longer holds,
    once it holds many more than them (so that a call does not walk it)."""
    if len(kept) <= 2 * len(messages) + 16:
        return kept
    live = {id(m) for m in messages}
    return {k: v for k, v in kept.items() if k in live}


def _same(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    """Whether a message's parts are as they were: each the same object or an equal one
    (one comparison in C, which tries identity first); a part whose comparison fails (an
    array's, say) counts as changed."""
    try:
        return before == now
    except Exception:
        return False
