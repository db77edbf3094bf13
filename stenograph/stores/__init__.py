"""Session stores chosen by URL: ``file:DIR`` (the default folder store),
``sqlite:///path.db``, ``postgresql://…`` (extra ``[postgres]``) and ``redis://…`` (extra
``[redis]``). See :mod:`stenograph.stores.base` for the protocol and its guarantees."""

from __future__ import annotations

import difflib
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .base import (
    CALL,
    EXTRACTION,
    Lease,
    LeaseLost,
    Notes,
    SessionBusy,
    SessionStorage,
    StaleHistory,
    Store,
    StoreError,
    VersionConflict,
    acquire_wait,
)
from .folder import FolderStore

SCHEMES = ("file", "sqlite", "postgresql", "postgres", "redis", "rediss")
__all__ = [
    "CALL",
    "EXTRACTION",
    "FolderStore",
    "Lease",
    "LeaseLost",
    "Notes",
    "SessionBusy",
    "SessionStorage",
    "StaleHistory",
    "Store",
    "StoreError",
    "VersionConflict",
    "acquire_wait",
    "open_store",
]


def open_store(store: str | Path | Store) -> Store:
    """A store from its URL (a ``Store`` is returned as it is; a plain path is a folder
    store)."""
    if isinstance(store, Store):
        return store
    if isinstance(store, Path):
        return FolderStore(store)
    scheme = store.split(":", 1)[0].lower() if "://" in store or store.startswith("file:") else ""
    if not scheme:
        return FolderStore(store)
    if scheme == "file":
        parts = urlsplit(store)
        return FolderStore(unquote(parts.path if store.startswith("file://") else store[5:]))
    if scheme == "sqlite":
        from .sqlite import SqliteStore

        return SqliteStore(_sqlite_path(store))
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresStore

        return PostgresStore(store)
    if scheme in ("redis", "rediss"):
        from .redis import RedisStore

        return RedisStore(store)
    close = difflib.get_close_matches(scheme, SCHEMES, n=1)
    hint = f" (did you mean {close[0]}:?)" if close else ""
    raise StoreError(
        f"store URL {store!r}: unknown scheme {scheme!r}{hint}; use file:DIR,"
        " sqlite:///path.db, postgresql://… or redis://…"
    )


def _sqlite_path(url: str) -> str:
    path = unquote(urlsplit(url).path)
    if not url.startswith("sqlite:///") or path in ("", "/"):
        raise StoreError(
            f"store URL {url!r}: write sqlite:///relative/path.db or sqlite:////abs/path.db"
        )
    return path[1:]
