"""``redis://host:port/db[?prefix=name:]`` (extra ``[redis]``, redis-py): every atomic step
is one Lua script; a session's keys share the hash tag ``{session}`` so Redis Cluster keeps
them on one node. Lease times are the server's clock. What Redis acknowledged survives a
server crash only with ``appendonly yes`` and ``appendfsync always``."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..engine.notes import MAX_NOTES_CHARS, NotesConflict
from ..engine.store import JOURNAL_BYTES, check_session_id, encode_record
from .base import (
    CallEnd,
    Lease,
    StoredNotes,
    StoreError,
    VersionConflict,
    lease_lost,
    new_write_id,
    parse_state,
    yields_to,
)

NOW = "local t = redis.call('TIME') local now = tonumber(t[1]) + tonumber(t[2]) / 1e6\n"
FENCE = (
    NOW
    + """
local function fence(key, owner, epoch)
  if owner == '' then return nil end
  local h = redis.call('HMGET', key, 'owner', 'epoch', 'expires')
  if h[1] ~= owner or tonumber(h[2]) ~= tonumber(epoch) then
    return redis.error_reply('LEASE stolen ' .. tostring(h[2]))
  end
  if tonumber(h[3]) <= now then return redis.error_reply('LEASE expired') end
  return nil
end
"""
)
ACQUIRE = (
    NOW
    + """
local h = redis.call('HMGET', KEYS[1], 'owner', 'epoch', 'expires')
local owner, epoch, expires = h[1] or '', tonumber(h[2]) or 0, tonumber(h[3]) or 0
local live = expires > now
if live and owner ~= ARGV[1] and tonumber(ARGV[3]) ~= epoch then return {0, owner, epoch} end
if not (live and owner == ARGV[1]) then epoch = epoch + 1 end
local until_ = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'epoch', epoch, 'expires', tostring(until_))
return {1, tostring(until_), epoch}
"""
)
RELEASE = """
local h = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if h[1] == ARGV[1] and tonumber(h[2]) == tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'owner', '', 'expires', '0')
end
return 0
"""
APPEND_RECORDS = """
local function append(first)  -- ARGV from ``first`` on: (uuid, line, truncated-after) triples
  local before = redis.call('LLEN', KEYS[2])
  for i = first, #ARGV, 3 do
    local uuid = ARGV[i]
    if ARGV[i + 2] ~= '' then  -- a truncate frees the uuids of the entries it removes
      local start = 0
      if ARGV[i + 2] ~= '*' then
        start = tonumber(redis.call('HGET', KEYS[3], ARGV[i + 2]) or '-1')
      end
      if start >= 0 then
        local all = redis.call('HGETALL', KEYS[3])
        for j = 1, #all, 2 do
          if tonumber(all[j + 1]) > start then redis.call('HDEL', KEYS[3], all[j]) end
        end
      end
    end
    if uuid == '' or redis.call('HEXISTS', KEYS[3], uuid) == 0 then
      local n = redis.call('RPUSH', KEYS[2], ARGV[i + 1])
      if uuid ~= '' then redis.call('HSET', KEYS[3], uuid, n) end
    end
  end
  return {before, redis.call('LLEN', KEYS[2])}
end
"""
APPEND = (
    FENCE
    + APPEND_RECORDS
    + """
local refused = fence(KEYS[1], ARGV[1], ARGV[2]) if refused then return refused end
return append(3)
"""
)
SWAP = (  # a compare-and-swap: ARGV[3] is its own write id, kept with its reply
    FENCE
    + """
local function landed(key, target)  -- a retry whose first try ran (its reply was lost)
  local last = redis.call('HMGET', key, target .. ':write', target .. ':reply')
  if last[1] == ARGV[3] then return cjson.decode(last[2]) end
  return nil
end
local function written(key, target, reply)
  redis.call('HSET', key, target .. ':write', ARGV[3], target .. ':reply', cjson.encode(reply))
  return reply
end
"""
)
COMMIT = (  # KEYS: lease, log, uuids, state; ARGV: owner, epoch, write, expected, state|'', records
    SWAP
    + APPEND_RECORDS
    + """
local done = landed(KEYS[4], 'call') if done then return done end
local refused = fence(KEYS[1], ARGV[1], ARGV[2]) if refused then return refused end
local version = tonumber(ARGV[4])
if ARGV[5] ~= '' then  -- checked before anything is written: a script is not rolled back
  local current = tonumber(redis.call('HGET', KEYS[4], 'version') or '0')
  if current ~= version then return redis.error_reply('VERSION ' .. current) end
end
local span = append(6)
if ARGV[5] ~= '' then
  version = version + 1
  redis.call('HSET', KEYS[4], 'state', ARGV[5], 'version', version,
             'journal', redis.call('LLEN', KEYS[2]))
end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'owner', '', 'expires', '0') end
return written(KEYS[4], 'call', {span[1], span[2], version})
"""
)
SAVE_STATE = (
    SWAP
    + """
local done = landed(KEYS[2], 'state') if done then return done end
local refused = fence(KEYS[1], ARGV[1], ARGV[2]) if refused then return refused end
local current = tonumber(redis.call('HGET', KEYS[2], 'version') or '0')
if current ~= tonumber(ARGV[4]) then return redis.error_reply('VERSION ' .. current) end
redis.call('HSET', KEYS[2], 'state', ARGV[5], 'version', current + 1,
           'journal', redis.call('LLEN', KEYS[3]))
return written(KEYS[2], 'state', current + 1)
"""
)
NOTES_CAS = (
    SWAP
    + """
local done = landed(KEYS[2], ARGV[4]) if done then return done end
local refused = fence(KEYS[1], ARGV[1], ARGV[2]) if refused then return refused end
local current = tonumber(redis.call('HGET', KEYS[2], ARGV[4] .. ':version') or '0')
if current ~= tonumber(ARGV[5]) then return redis.error_reply('VERSION ' .. current) end
redis.call('HSET', KEYS[2], ARGV[4], ARGV[6], ARGV[4] .. ':version', current + 1)
return written(KEYS[2], ARGV[4], current + 1)
"""
)
SET_PENDING = """
local held = tonumber(redis.call('HGET', KEYS[1], 'pending:position') or '-1')
if tonumber(ARGV[1]) >= held then
  redis.call('HSET', KEYS[1], 'pending', ARGV[2], 'pending:position', ARGV[1])
end
return 0
"""
TAKE_PENDING = (
    FENCE
    + """
local refused = fence(KEYS[1], ARGV[1], ARGV[2]) if refused then return refused end
local job = redis.call('HGET', KEYS[2], 'pending')
redis.call('HDEL', KEYS[2], 'pending')  -- its position stays: an older job filed late is dropped
return job
"""
)

CLAIM = (
    FENCE
    + """
local refused = fence(KEYS[1], ARGV[1], ARGV[2]) if refused then return refused end
local held = tonumber(redis.call('HGET', KEYS[2], 'pending:position') or '-1')
if tonumber(ARGV[3]) < held then return 0 end
redis.call('HDEL', KEYS[2], 'pending')
redis.call('HSET', KEYS[2], 'pending:position', ARGV[3])
return 1
"""
)


class RedisStore:
    """Sessions in Redis keys ``<prefix>{<session>}:…``."""

    def __init__(self, url: str) -> None:
        try:
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ImportError:
            raise StoreError(
                f"store URL {url!r} needs redis-py: pip install 'stenograph[redis]'"
            ) from None
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.prefix = query.pop("prefix", "stenograph:")
        self.url = url
        self.errors = redis.exceptions
        self.client: Any = redis.Redis.from_url(  # decoded replies: str, not bytes
            urlunsplit(parts._replace(query=urlencode(query))),
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 60),
            retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
            socket_timeout=30,
            decode_responses=True,
        )
        self.scripts = {
            name: self.client.register_script(text)
            for name, text in {
                "acquire": ACQUIRE,
                "release": RELEASE,
                "append": APPEND,
                "commit": COMMIT,
                "save_state": SAVE_STATE,
                "notes_cas": NOTES_CAS,
                "set_pending": SET_PENDING,
                "take_pending": TAKE_PENDING,
                "claim": CLAIM,
            }.items()
        }

    def key(self, session_id: str, part: str) -> str:
        """The key of one part of a session (hash-tagged by the session id)."""
        return f"{self.prefix}{{{session_id}}}:{part}"

    def session(self, session_id: str) -> RedisStorage:
        """See :class:`~stenograph.stores.base.Store`."""
        self.client.sadd(f"{self.prefix}sessions", check_session_id(session_id))
        return RedisStorage(self, session_id)

    def sessions(self) -> list[str]:
        """See :class:`~stenograph.stores.base.Store`."""
        ids = self.client.smembers(f"{self.prefix}sessions")
        kept = [i for i in ids if self.client.exists(self.key(i, "log"), self.key(i, "state"))]
        return sorted(kept)

    def delete(self, session_id: str) -> bool:
        """See :class:`~stenograph.stores.base.Store`."""
        parts = ("log", "uuids", "state", "notes", "lease:call", "lease:extraction")
        removed = self.client.delete(*(self.key(session_id, p) for p in parts))
        self.client.srem(f"{self.prefix}sessions", session_id)
        return bool(removed)

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()


class RedisStorage:
    """One session in Redis."""

    blocks = True  # a network round trip

    def __init__(self, store: RedisStore, session_id: str) -> None:
        self.store, self.session_id = store, session_id
        self.location = f"{store.url} session {session_id}"
        self.client: Any = store.client

    def _key(self, part: str) -> str:
        return self.store.key(self.session_id, part)

    def _script(self, name: str, keys: list[str], args: list[Any], lease: Lease | None) -> Any:
        fence: list[Any] = [lease.owner, lease.epoch] if lease else ["", 0]
        try:
            return self.store.scripts[name](keys=keys, args=[*fence, *args])
        except self.store.errors.ResponseError as exc:
            text = str(exc)
            if text.startswith("LEASE"):
                raise lease_lost(lease, self.location, f"the lease is {text[6:]}") from None
            if text.startswith("VERSION"):
                raise VersionConflict(f"{self.location}: at version {text[8:]}") from None
            raise

    def acquire(self, kind: str, owner: str, seconds: float) -> Lease | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        script = self.store.scripts["acquire"]
        key = self._key(f"lease:{kind}")
        got = script(keys=[key], args=[owner, seconds, -1])
        if got[0] == 0 and yields_to(str(got[1]), owner):
            got = script(keys=[key], args=[owner, seconds, got[2]])
        if got[0] == 0:
            return None
        return Lease(self.session_id, kind, owner, int(got[2]), float(got[1]))

    def release(self, lease: Lease) -> None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        key = self._key(f"lease:{lease.kind}")
        self.store.scripts["release"](keys=[key], args=[lease.owner, lease.epoch])

    def append(
        self,
        records: list[dict[str, Any]],
        lease: Lease | None,
        lines: list[bytes] | None = None,
    ) -> tuple[int, int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        keys = [self._lease_key(lease), self._key("log"), self._key("uuids")]
        before, after = self._script("append", keys, _triples(records, lines), lease)
        return int(before), int(after)

    def commit(self, end: CallEnd) -> tuple[int, int, int]:
        """See :class:`~stenograph.stores.base.SessionStorage` (one script)."""
        body = "" if end.state is None else json.dumps(end.state, ensure_ascii=False)
        keys = [
            self._lease_key(end.lease),
            self._key("log"),
            self._key("uuids"),
            self._key("state"),
        ]
        args = [new_write_id(), end.expected, body, *_triples(end.records, end.lines)]
        before, after, version = self._script("commit", keys, args, end.lease)
        return int(before), int(after), int(version)

    def _lease_key(self, lease: Lease | None) -> str:
        return self._key(f"lease:{lease.kind if lease else 'call'}")

    def read(self, after: int) -> tuple[list[dict[str, Any]], int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        bodies = self.client.lrange(self._key("log"), after, -1)
        return [json.loads(b) for b in bodies], after + len(bodies)

    def position(self) -> int:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        return int(self.client.llen(self._key("log")))

    def load_state(self) -> tuple[dict[str, Any], str | None, int]:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        fields = self.client.hmget(self._key("state"), "state", "version", "journal")
        state, problem, version = parse_state(fields[0], int(fields[1] or 0))
        if fields[0] is not None and not problem:
            state[JOURNAL_BYTES] = int(fields[2] or 0)
        return state, problem, version

    def save_state(self, state: dict[str, Any], expected: int, lease: Lease | None) -> int:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        body = json.dumps(state, ensure_ascii=False)
        keys = [self._lease_key(lease), self._key("state"), self._key("log")]
        return int(self._script("save_state", keys, [new_write_id(), expected, body], lease))

    def keep_aside(self, reason: str) -> str | None:
        """See :class:`~stenograph.stores.base.SessionStorage` (the key stays as it is)."""
        return None

    def notes(self, label: str, template: str, max_chars: int = MAX_NOTES_CHARS) -> RedisNotes:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        return RedisNotes(self, label, template, max_chars)

    def set_pending(self, job: dict[str, Any]) -> None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        args: list[Any] = [int(job.get("position", 0)), json.dumps(job)]
        self.store.scripts["set_pending"](keys=[self._key("state")], args=args)

    def pending(self) -> dict[str, Any] | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        job = self.client.hget(self._key("state"), "pending")
        return json.loads(job) if job else None

    def take_pending(self, lease: Lease) -> dict[str, Any] | None:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        keys = [self._lease_key(lease), self._key("state")]
        job = self._script("take_pending", keys, [], lease)
        return json.loads(job) if job else None

    def claim(self, position: int, lease: Lease) -> bool:
        """See :class:`~stenograph.stores.base.SessionStorage`."""
        keys = [self._lease_key(lease), self._key("state")]
        return bool(self._script("claim", keys, [position], lease))

    def close(self) -> None:
        """The connections belong to the store."""


class RedisNotes(StoredNotes["RedisStorage"]):
    """Notes in the session's ``notes`` hash, versioned by a counter."""

    def read(self) -> tuple[str, Any]:
        """The text (the template before any write) and its version."""
        text, version = self.storage.client.hmget(
            self.storage._key("notes"), self.label, f"{self.label}:version"
        )
        return self.found(text, version)

    def compare_and_swap(self, version: Any, text: str, lease: Lease | None = None) -> Any:
        """Replace the notes if they are still at ``version``."""
        self.check(text)
        keys = [self.storage._lease_key(lease), self.storage._key("notes")]
        try:
            args = [new_write_id(), self.label, version, text]
            return int(self.storage._script("notes_cas", keys, args, lease))
        except VersionConflict as exc:
            raise NotesConflict(f"{self.label}: {exc}") from None


def _triples(records: list[dict[str, Any]], lines: list[bytes] | None) -> list[Any]:
    """The records as the append script takes them: (uuid, line, truncated-after) each."""
    args: list[Any] = []
    for record, line in zip(records, lines or [encode_record(r) for r in records], strict=True):
        entry = record.get("entry") if record.get("op") == "append" else None
        uuid = entry.get("uuid") if isinstance(entry, dict) else None
        cut = record.get("after") or "*" if record.get("op") == "truncate" else ""
        args += [uuid if isinstance(uuid, str) else "", line.decode(), cut]
    return args
