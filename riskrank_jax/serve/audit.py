"""The gateway's audit log: one JSON line per call decision, on disk before the call is forwarded.

Each line: time (UTC, ISO 8601), tool, server, risk_level, risk_source, decision, reason, rule, dimensions,
session (the first 12 hex digits of the sha256 of the MCP session's key, null for calls of no session: lines of
one session share it, and an HTTP session id, which lets its holder join the session, is never written) and
arguments_hmac (`arguments_digest`: HMAC-SHA256 of the arguments as canonical JSON under the installation's
key). Never the argument values: they may hold secrets.

The key (`installation_key`) is 32 random bytes in ``<state_dir>/audit.key``, created once with mode 0600 and
refused when group or others have any permission on it. Why keyed: a plain sha256 of short arguments (a 6-digit
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
import stat
import threading
from pathlib import Path

from riskrank_jax.errors import ConfigError

KEY_FILE = "audit.key"
KEY_BYTES = 32


def _read_key(path: Path) -> bytes:
    """The key in ``path``, refused (ConfigError naming the file) when it is a link or not a regular file, when
    group or others have any permission on it, or when it is not KEY_BYTES long."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))  # a link in its place is refused
    except OSError as e:
        raise ConfigError(f"the audit key cannot be read ({e.strerror})", path) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError("the audit key is not a regular file", path)
        if mode & 0o077:
            raise ConfigError(f"the audit key is open to group or others (mode {stat.S_IMODE(mode):04o}); allow "
                              f"only its owner (chmod 600), or remove it to create a new key", path)
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise ConfigError(f"the audit key holds {len(key)} bytes{'+' if len(key) > KEY_BYTES else ''}, not "
                          f"{KEY_BYTES}; remove it to create a new key", path)
    return key


def _write_new(path: Path, flags: int, data: bytes) -> None:
    """Create ``path`` (``flags`` hold O_EXCL: FileExistsError when it exists), mode 0600, with ``data``,
    fsynced."""
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_key(folder: Path, path: Path) -> None:
    """Write a new key to ``path`` unless it exists: written and fsynced under a temporary name (O_CREAT|O_EXCL,
    mode 0600), then linked into place, so no reader sees a partial key and the first process to link wins.
    On a file system without hard links, the key file itself is created with O_CREAT|O_EXCL."""
    key = os.urandom(KEY_BYTES)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    tmp = folder / f".{KEY_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    _write_new(tmp, flags, key)
    try:
        os.link(tmp, path)
    except FileExistsError:  # another process created the key first: that key is read
        pass
    except OSError:  # no hard links here
        try:
            _write_new(path, flags, key)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    if hasattr(os, "O_DIRECTORY"):  # the new name survives a crash too
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def installation_key(state_dir) -> bytes:
    """The installation's audit key: KEY_BYTES random bytes in ``<state_dir>/audit.key``.

    Args:
        state_dir: the gateway's state folder (created, mode 0700, when missing).
    Returns:
        The key, created when the file is missing (`_create_key`: atomic, mode 0600; when another process
        creates it first, its key is read). Raises ConfigError naming the file when its permissions let group
        or others read it, or when it does not hold exactly KEY_BYTES bytes.
    """
    folder = Path(state_dir).expanduser()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / KEY_FILE
    if not os.path.lexists(path):
        _create_key(folder, path)
    return _read_key(path)


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


__all__ = ["AuditLog", "KEY_FILE", "arguments_digest", "installation_key", "session_digest"]
