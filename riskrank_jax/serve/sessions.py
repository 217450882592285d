"""What the gateway remembers of each MCP session, in the state store so every replica sees it: the session's
flow (the tool that returned untrusted content in it, which makes later public-sink, destructive and
secret-source calls ask: `serve.policy`) and the user's answer to each confirmation the gateway asked.

    sessions = Sessions(store)
    sessions.note_flow("http:ab12…", "fetch.fetch")      # a tool of untrusted content answered
    sessions.flow("http:ab12…")                          # "fetch.fetch" on any replica
    sessions.confirmation("http:ab12…", "files.write_file", digest, "granted")

A flow is also kept in this process, so a flow noted while the store was down still holds here; a flow that
cannot be read raises StoreUnavailable, and the gate refuses (fail closed).

Why in the store: a session's requests may reach several replicas (stateless requests of the newest protocol
revision go to any replica; a session whose replica died continues on another), and the rule must hold across
them.
"""

from __future__ import annotations

import hashlib
import threading
import uuid

from riskrank_jax.serve.audit import session_digest
from riskrank_jax.serve.store import Store, StoreUnavailable, now

CONFIRMATION_EVENTS = ("granted", "declined")  # the user's answer; a confirmation's resolver may run twice a call


class Sessions:
    """Session flows and confirmations of one store, written by replica ``replica`` (module docstring)."""

    def __init__(self, store: Store, replica: str):
        self.store, self.replica = store, replica
        self._flows: dict = {}  # session key -> tool, this process's copy
        self._lock = threading.Lock()

    def flow(self, session) -> str | None:
        """The tool that returned untrusted content in ``session`` (None: none did). Raises StoreUnavailable."""
        key = _key(session)
        with self._lock:
            local = self._flows.get(key)
        if local is not None:
            return local
        with self.store.read() as db:
            row = db.execute("SELECT tool FROM flows WHERE session = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def note_flow(self, session, tool: str) -> None:
        """``tool`` returned untrusted content in ``session``: kept here at once, written to the store (a store
        that is down is reported by StoreUnavailable; this replica keeps the flow)."""
        key = _key(session)
        with self._lock:
            self._flows[key] = tool
        with self.store.transaction() as db:
            db.execute("INSERT INTO flows VALUES (?, ?, ?) ON CONFLICT (session) DO UPDATE SET tool = excluded.tool, "
                       "time = excluded.time", (key, tool, now()))

    def confirmation(self, session, tool: str, arguments_hmac: str | None, event: str) -> None:
        """Record a confirmation ``event`` (CONFIRMATION_EVENTS) of a call of ``tool``. Raises StoreUnavailable."""
        if event not in CONFIRMATION_EVENTS:
            raise ValueError(f"event must be one of {CONFIRMATION_EVENTS}, got {event!r}")
        with self.store.transaction() as db:
            db.execute("INSERT INTO confirmations VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (uuid.uuid4().hex, now(), self.replica, session_digest(session), tool, arguments_hmac, event))

    def confirmations(self, limit: int = 100) -> list[dict]:
        """The latest confirmation events, newest first."""
        with self.store.read() as db:
            rows = db.execute("SELECT time, replica, session, tool, arguments_hmac, event FROM confirmations "
                              f"ORDER BY time DESC LIMIT {int(limit)}").fetchall()
        return [dict(zip(("time", "replica", "session", "tool", "arguments_hmac", "event"), r)) for r in rows]


def _key(session) -> str:
    """The flows table's key of a session key: its sha256 (an HTTP session id lets its holder join the session,
    so it is never stored); None, the gateway's one flow, is "gateway"."""
    return "gateway" if session is None else hashlib.sha256(str(session).encode()).hexdigest()


__all__ = ["CONFIRMATION_EVENTS", "Sessions", "StoreUnavailable"]
