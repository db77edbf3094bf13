"""The decoded tokenizer table, kept in a cache file: decoding the bundled cl100k file
(base64, hash check) takes ~0.1 s per process; reading the decoded table back takes ~15 ms.

The file lives in ``$STENOGRAPH_CACHE_DIR``, else ``$XDG_CACHE_HOME/stenograph``, else
``~/.cache/stenograph`` (folder 0700, file 0600), named for the bundled file's path, size
and modification time, so a reinstall makes a new one. Any problem (no home, a read-only
disk, a file of another user or that does not load) falls back to decoding the bundled file.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("stenograph.engine.bpe_cache")
KEYS = ("name", "pat_str", "mergeable_ranks", "special_tokens")


def cache_dir() -> Path:
    """Where the cache file goes."""
    chosen = os.environ.get("STENOGRAPH_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stenograph"


def cached_config(source: Path, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The encoding config ``build()`` makes from ``source``, read from the cache file when
    one for this very ``source`` exists, else built and written there."""
    try:
        info = source.stat()
        key = f"{source.resolve()}:{info.st_size}:{info.st_mtime_ns}"
        path = cache_dir() / f"{source.stem}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.bin"
    except OSError:
        return build()
    config = _read(path)
    if config is not None:
        return config
    config = build()
    _write(path, config)
    return config


def _read(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_uid != os.getuid():
                return None
            config = marshal.loads(file.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(config, dict) or set(config) != set(KEYS):
        log.info("tokenizer cache %s ignored: not a cached table", path)
        return None
    return config


def _write(path: Path, config: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(marshal.dumps({k: config[k] for k in KEYS}))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError, KeyError) as exc:
        log.info("tokenizer cache not written (%s): decoding again next time", exc)
