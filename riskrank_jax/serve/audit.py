"""The gateway's audit log: one JSON line per call decision, on disk before the call is forwarded.

Each line: time (UTC, ISO 8601), tool, server, risk_level, risk_source, decision, reason, rule, dimensions,
session (the first 12 hex digits of the sha256 of the MCP session's key, null for calls of no session: lines of
one session share it, and an HTTP session id, which lets its holder join the session, is never written) and
arguments_sha256 (sha256 of the arguments as canonical JSON). Never the argument values: they may hold secrets.

Why fsync before forwarding: a gateway killed right after a call must still leave that call's line complete.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import threading
from pathlib import Path


def arguments_digest(arguments) -> str:
    """sha256 hex digest of ``arguments`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


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


__all__ = ["AuditLog", "arguments_digest", "session_digest"]
