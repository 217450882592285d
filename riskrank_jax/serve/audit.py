"""The gateway's audit: one record per call decision in the state store, written before the call is forwarded
and completed after it (`AuditStore`), and, when ``runtime.audit_log`` names a file, the same decision as one
JSON line there (`AuditLog`, the export of earlier versions, flushed to disk before the call is forwarded).

A record in the store (table ``audit``, `serve.store`) holds the line's fields plus its id, the replica that
decided it and the call's outcome: NULL while the call is forwarded, then "ok" (the server answered), "error"
(it answered with an error, or could not be reached), "interrupted" (cancelled, cut by a drain, or its replica
stopped before the answer: another replica marks the open records of a replica that stopped saying it is
alive), or "not forwarded" for a refusal. The outcome is an UPDATE of the one record, so no call is recorded
twice.

Each line: time (UTC, ISO 8601), tool, server, risk_level, risk_source, decision, reason, rule, dimensions,
session (the first 12 hex digits of the sha256 of the MCP session's key, null for calls of no session: lines of
one session share it, and an HTTP session id, which lets its holder join the session, is never written) and
arguments_hmac (`arguments_digest`: HMAC-SHA256 of the arguments as canonical JSON under the installation's
key). Never the argument values: they may hold secrets.

The key (`Store.secret("audit")`) is 32 random bytes: with SQLite in ``<state_dir>/audit.key`` (`installation_key`),
created once with mode 0600 and refused when group or others have any permission on it; with PostgreSQL in the
store's ``keys`` table, so every replica's digests agree. Why keyed: a plain sha256 of short arguments (a 6-digit
code, a password from a leaked list) is reversed by trying candidates; without the key, the log's digests can
only be compared with each other (the same arguments, the same digest), and by whoever holds the key, with a
guess.

Why fsync before forwarding: a gateway killed right after a call must still leave that call's line complete.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

from riskrank_jax.serve.store import KEY_FILE, Store, StoreUnavailable, installation_key, now

def arguments_digest(arguments, key: bytes) -> str:
    """HMAC-SHA256 (hex) of ``arguments`` as canonical JSON (sorted keys, no spaces) under ``key``
    (`installation_key`)."""
    if not isinstance(key, (bytes, bytearray)) or not key:
        raise TypeError("arguments_digest needs the installation's key (bytes)")
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hmac.new(bytes(key), text.encode(), hashlib.sha256).hexdigest()


def session_digest(key: str | None) -> str | None:
    """The audit line's session field: sha256(key)[:12], None for the gateway's flow (key None)."""
    return None if key is None else hashlib.sha256(key.encode()).hexdigest()[:12]


class AuditLog:
    """Appends records to a JSON Lines file, each written, flushed and fsynced before ``write`` returns."""

    def __init__(self, path):
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, **record) -> dict:
        line = {"time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"), **record}
        data = (json.dumps(line, ensure_ascii=False, sort_keys=False) + "\n").encode()
        with self._lock:
            os.write(self._fd, data)  # one write of the whole line, O_APPEND: never interleaved
            os.fsync(self._fd)
        return line

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


HEARTBEAT_S = 2.0  # how often a replica says it is alive (AuditStore.heartbeat)
STALE_S = 10.0  # a replica silent this long stopped: its open records are marked interrupted
RECORD_FIELDS = ("id", "time", "replica", "session", "tool", "server", "risk_level", "risk_source", "decision",
                 "reason", "rule", "dimensions", "pin", "secrets", "arguments_hmac", "outcome", "outcome_detail",
                 "completed_at", "duration_ms")
JSON_FIELDS = ("dimensions", "secrets")
FILTERS = ("since", "until", "server", "tool", "decision", "rule", "session", "outcome", "replica")


def replica_name() -> str:
    """This process's name in the store: host, pid and a random suffix (a pid is reused after a restart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _iso(seconds_ago: float) -> str:
    return (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds_ago)).isoformat(timespec="milliseconds")


class AuditStore:
    """This replica's audit records in the state store (module docstring).

        records = AuditStore(store)
        rid = records.begin(line, forwarded=True)     # before forwarding; StoreUnavailable: do not forward
        records.complete(rid, "ok")                    # after the answer (kept and retried if the store is down)
    """

    def __init__(self, store: Store, replica: str | None = None):
        self.store, self.replica = store, replica or replica_name()
        self._started: dict[str, float] = {}  # record id -> monotonic time of its decision (for duration_ms)
        self._unsent: dict[str, tuple] = {}  # completions the store could not take yet, retried by heartbeat
        self._lock = threading.Lock()
        stamp = now()
        with store.transaction() as db:
            db.execute("INSERT INTO replicas VALUES (?, ?, ?, ?, ?)",
                       (self.replica, socket.gethostname(), os.getpid(), stamp, stamp))
        self.sweep()

    def begin(self, line: dict, forwarded: bool) -> str:
        """Write the decision ``line`` (the JSONL line's fields) as a new record; ``forwarded``: the call goes on
        to its server (outcome open until `complete`), else it is closed at once as "not forwarded". Returns the
        record's id; raises StoreUnavailable when the store cannot take it (the call must then be refused)."""
        rid = uuid.uuid4().hex
        values = {f: line.get(f) for f in RECORD_FIELDS}
        values.update(id=rid, replica=self.replica, time=line.get("time") or now())
        for f in JSON_FIELDS:
            values[f] = None if values[f] is None else json.dumps(values[f], ensure_ascii=False)
        if not forwarded:
            values.update(outcome="not forwarded", completed_at=values["time"], duration_ms=0.0)
        with self.store.transaction() as db:
            db.execute(f"INSERT INTO audit ({', '.join(RECORD_FIELDS)}) VALUES ({', '.join('?' * len(RECORD_FIELDS))})",
                       tuple(values[f] for f in RECORD_FIELDS))
        if forwarded:
            with self._lock:
                self._started[rid] = time.monotonic()
        return rid

    def complete(self, rid: str, outcome: str, detail: str | None = None) -> bool:
        """Close record ``rid`` with ``outcome`` ("ok", "error", "interrupted") once; False when the store
        could not take it now (kept, and written by the next `heartbeat`)."""
        with self._lock:
            started = self._started.pop(rid, None)
        duration = None if started is None else round((time.monotonic() - started) * 1000, 1)
        return self._close(rid, (outcome, detail, now(), duration))

    def _close(self, rid: str, values: tuple) -> bool:
        try:
            with self.store.transaction() as db:
                db.execute("UPDATE audit SET outcome=?, outcome_detail=?, completed_at=?, duration_ms=? "
                           "WHERE id=? AND outcome IS NULL", (*values, rid))
        except StoreUnavailable:
            with self._lock:
                self._unsent[rid] = values
            return False
        with self._lock:
            self._unsent.pop(rid, None)
        return True

    def heartbeat(self) -> None:
        """Say this replica is alive, write the completions the store could not take before, and mark the open
        records of replicas silent for STALE_S as interrupted. Raises StoreUnavailable."""
        with self.store.transaction() as db:
            db.execute("UPDATE replicas SET last_seen=? WHERE id=?", (now(), self.replica))
        with self._lock:
            unsent = dict(self._unsent)
        for rid, values in unsent.items():
            self._close(rid, values)
        self.sweep()

    def sweep(self, stale_s: float = STALE_S) -> int:
        """Mark the open records of replicas silent for ``stale_s`` seconds as interrupted; returns how many."""
        with self.store.transaction() as db:
            cur = db.execute(
                "UPDATE audit SET outcome='interrupted', outcome_detail='the gateway replica ' || replica || "
                "' stopped before the call was answered', completed_at=? WHERE outcome IS NULL AND replica IN "
                "(SELECT id FROM replicas WHERE last_seen < ? AND id <> ?)", (now(), _iso(stale_s), self.replica))
            return max(cur.rowcount, 0)

    def close(self, why: str = "the gateway stopped before the call was answered") -> None:
        """On shutdown: this replica's records still open are interrupted (a drain that timed out)."""
        with self.store.transaction() as db:
            db.execute("UPDATE audit SET outcome='interrupted', outcome_detail=?, completed_at=? "
                       "WHERE outcome IS NULL AND replica=?", (why, now(), self.replica))


def query_records(store: Store, limit: int | None = 100, **filters) -> list[dict]:
    """Audit records of ``store``, newest first, each a dict of RECORD_FIELDS (dimensions and secrets parsed).
    filters (FILTERS): since / until (ISO 8601 times, inclusive / exclusive), server, tool (the gateway's name,
    server.tool), decision, rule, session, outcome ("open" for records still open), replica; None: any."""
    unknown = set(filters) - set(FILTERS)
    if unknown:
        raise TypeError(f"unknown audit filters: {', '.join(sorted(unknown))}")
    where, params = [], []
    for key, value in filters.items():
        if value is None:
            continue
        if key == "since":
            where.append("time >= ?")
        elif key == "until":
            where.append("time < ?")
        elif key == "outcome" and value == "open":
            where.append("outcome IS NULL")
            continue
        else:
            where.append(f"{key} = ?")
        params.append(value)
    sql = f"SELECT {', '.join(RECORD_FIELDS)} FROM audit"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY time DESC, id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    with store.read() as db:
        rows = db.execute(sql, tuple(params)).fetchall()
    out = []
    for row in rows:
        r = dict(zip(RECORD_FIELDS, row))
        for f in JSON_FIELDS:
            r[f] = None if r[f] is None else json.loads(r[f])
        out.append(r)
    return out


__all__ = ["AuditLog", "AuditStore", "FILTERS", "HEARTBEAT_S", "KEY_FILE", "RECORD_FIELDS", "STALE_S",
           "arguments_digest", "installation_key", "query_records", "replica_name", "session_digest"]
