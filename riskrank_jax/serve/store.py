"""The gateway's state store: one schema, in SQLite or PostgreSQL, for everything the gateway must not lose or
must share between replicas.

    store = open_store(state_dir)                               # <state_dir>/gateway.sqlite (the default)
    store = open_store(state_dir, "postgresql://gw@db/gateway")  # shared by every replica
    with store.transaction() as db:                             # one transaction; "?" placeholders
        db.execute("SELECT ...", (a, b)).fetchall()

Tables (`MIGRATIONS`, applied in order, each recorded in ``schema_migrations``):

* ``pins``, ``history``  — each tool's pinned definition and every definition seen (`serve.pins`);
* ``audit``              — one record per call decision, written before the call is forwarded and completed
                           after it (`serve.audit.AuditStore`);
* ``flows``              — per MCP session, the tool that returned untrusted content (the session-flow rule);
* ``confirmations``      — the user's answer to each confirmation asked (granted or declined);
* ``replicas``           — each gateway process that used the store and when it last said it was alive: a call
                           left open by a replica that stopped saying so is recorded as interrupted;
* ``keys``               — secrets every replica must share (the request-state seal, on PostgreSQL the audit key).

Every method raises `StoreUnavailable` (naming the store, never its password) when the database cannot be
reached or answers with an error; the gateway then refuses calls (fail closed) and a PostgreSQL connection is
opened again on the next use, so a restarted database is picked up without restarting the gateway.

Why two databases behind one schema: SQLite is embedded, nothing to start, right for one machine; several
replicas behind a load balancer need one server they all reach, PostgreSQL. The SQL is the subset both speak
(``INSERT ... ON CONFLICT DO NOTHING``, TEXT times in UTC ISO 8601, which sort as times).
"""

from __future__ import annotations

import datetime as dt
import os
import queue
import re
import sqlite3
import stat
import threading
import time
from contextlib import closing, contextmanager
from pathlib import Path

from riskrank_jax.errors import ConfigError, RiskRankError

DB_NAME = "gateway.sqlite"
CONNECT_TIMEOUT_S = 3  # a database that does not answer by then is unavailable (the call is refused)
POOL_SIZE = 4
IDLE_CHECK_S = 1.0  # a pooled PostgreSQL connection idle this long is checked before use
LOCK_ID = 0x72726A78  # PostgreSQL advisory lock held while migrating ("rrjx")

_PINS = """
CREATE TABLE IF NOT EXISTS pins (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    accepted_hash TEXT,            -- NULL: quarantined, never accepted
    current_hash TEXT NOT NULL,
    changed INTEGER NOT NULL,      -- 1 once a definition other than the accepted one was seen, until accepted
    first_seen TEXT NOT NULL,
    changed_at TEXT,
    accepted_at TEXT,
    accepted_by TEXT,
    PRIMARY KEY (server, tool)
);
CREATE TABLE IF NOT EXISTS history (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    hash TEXT NOT NULL,
    definition TEXT NOT NULL,      -- canonical JSON of the definition's keys
    first_seen TEXT NOT NULL,
    PRIMARY KEY (server, tool, hash)
);
"""

_SHARED = """
CREATE TABLE audit (
    id TEXT PRIMARY KEY,           -- one per call decision: completing a record updates it, never adds one
    time TEXT NOT NULL,            -- when the decision was made (UTC, ISO 8601)
    replica TEXT NOT NULL,
    session TEXT,                  -- sha256(session key)[:12], NULL: the gateway's flow
    tool TEXT NOT NULL,
    server TEXT,
    risk_level INTEGER,
    risk_source TEXT,
    decision TEXT NOT NULL,        -- allowed | confirmed | refused
    reason TEXT NOT NULL,
    rule TEXT,
    dimensions TEXT,               -- JSON
    pin TEXT,
    secrets TEXT,                  -- JSON: the kinds and paths of secrets found in the arguments
    arguments_hmac TEXT,
    outcome TEXT,                  -- NULL while forwarded, then ok, error or interrupted, or: not forwarded
    outcome_detail TEXT,
    completed_at TEXT,
    duration_ms {real}
);
CREATE INDEX audit_time ON audit (time);
CREATE INDEX audit_tool ON audit (server, tool);
CREATE INDEX audit_session ON audit (session);
CREATE INDEX audit_open ON audit (outcome, replica);
CREATE TABLE flows (
    session TEXT PRIMARY KEY,      -- the MCP session's key
    tool TEXT NOT NULL,            -- the tool that returned untrusted content in it
    time TEXT NOT NULL
);
CREATE TABLE confirmations (
    id TEXT PRIMARY KEY,
    time TEXT NOT NULL,
    replica TEXT NOT NULL,
    session TEXT,
    tool TEXT NOT NULL,
    arguments_hmac TEXT,
    event TEXT NOT NULL            -- the user's answer: granted | declined
);
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started TEXT NOT NULL,
    last_seen TEXT NOT NULL
);
CREATE TABLE keys (
    name TEXT PRIMARY KEY,
    value {blob} NOT NULL,
    created TEXT NOT NULL
);
"""

# (version, name, SQL): applied in order, each once, in one transaction with its schema_migrations row
MIGRATIONS = (
    (1, "pinned tool definitions", _PINS),
    (2, "audit records, session flows, confirmations, replicas, shared keys", _SHARED),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
_TYPES = {"sqlite": {"real": "REAL", "blob": "BLOB"}, "postgresql": {"real": "DOUBLE PRECISION", "blob": "BYTEA"}}


def resolve_state_dir(path=None) -> Path:
    """The gateway's state directory: ``path``, else $RISKRANK_STATE, else $XDG_STATE_HOME/riskrank-jax, else
    ~/.local/state/riskrank-jax."""
    if path is None:
        path = os.environ.get("RISKRANK_STATE")
    if path is None:
        base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
        path = Path(base) / "riskrank-jax"
    return Path(path).expanduser()


KEY_FILE = "audit.key"
KEY_BYTES = 32


def _read_key(path: Path, nbytes: int = KEY_BYTES) -> bytes:
    """The key in ``path``, refused (ConfigError naming the file) when it is a link or not a regular file, when
    group or others have any permission on it, or when it is not KEY_BYTES long."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))  # a link in its place is refused
    except OSError as e:
        raise ConfigError(f"the key cannot be read ({e.strerror})", path) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError("the key is not a regular file", path)
        if mode & 0o077:
            raise ConfigError(f"the key is open to group or others (mode {stat.S_IMODE(mode):04o}); allow "
                              f"only its owner (chmod 600), or remove it to create a new key", path)
        key = os.read(fd, nbytes + 1)
    finally:
        os.close(fd)
    if len(key) != nbytes:
        raise ConfigError(f"the key holds {len(key)} bytes{'+' if len(key) > nbytes else ''}, not "
                          f"{nbytes}; remove it to create a new key", path)
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


def _create_key(folder: Path, path: Path, nbytes: int = KEY_BYTES) -> None:
    """Write a new key to ``path`` unless it exists: written and fsynced under a temporary name (O_CREAT|O_EXCL,
    mode 0600), then linked into place, so no reader sees a partial key and the first process to link wins.
    On a file system without hard links, the key file itself is created with O_CREAT|O_EXCL."""
    key = os.urandom(nbytes)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    tmp = folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
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


def installation_key(state_dir, file: str = KEY_FILE, nbytes: int = KEY_BYTES) -> bytes:
    """The installation's audit key: KEY_BYTES random bytes in ``<state_dir>/audit.key`` (or ``nbytes`` in
    ``file``: another key of the state directory, `serve.store.SqliteStore.secret`).

    Args:
        state_dir: the gateway's state folder (created, mode 0700, when missing).
    Returns:
        The key, created when the file is missing (`_create_key`: atomic, mode 0600; when another process
        creates it first, its key is read). Raises ConfigError naming the file when its permissions let group
        or others read it, or when it does not hold exactly KEY_BYTES bytes.
    """
    folder = Path(state_dir).expanduser()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / file
    if not os.path.lexists(path):
        _create_key(folder, path, nbytes)
    return _read_key(path, nbytes)


class StoreUnavailable(RiskRankError):
    """The state store cannot be reached or answered with an error (the message names the store)."""


def now() -> str:
    """The current time as the store keeps it: UTC, ISO 8601, milliseconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def hide_password(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***``."""
    return re.sub(r"^(\w[\w+.-]*://[^:/@]+):[^@]*@", r"\1:***@", url)


def _statements(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]


class _Db:
    """One connection inside a transaction: ``execute(sql, params)`` with "?" placeholders on either database."""

    def __init__(self, conn, dialect: str):
        self.conn, self.dialect = conn, dialect

    def execute(self, sql: str, params=()):
        if self.dialect == "postgresql":
            sql = sql.replace("?", "%s")
        return self.conn.execute(sql, params)


class Store:
    """The state store (module docstring): ``transaction()`` for reads and writes, ``read()`` for reads that
    must not create anything, ``secret(name)`` for shared keys, ``where`` to name it in messages."""

    dialect: str = ""
    where: str = ""

    def transaction(self):
        raise NotImplementedError

    def read(self):
        return self.transaction()

    def migrate(self) -> None:
        """Apply the migrations this database has not had, in order (`MIGRATIONS`)."""
        with self.transaction(lock=True) as db:
            db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                       "name TEXT NOT NULL, applied_at TEXT NOT NULL)")
            done = {v for (v,) in db.execute("SELECT version FROM schema_migrations").fetchall()}
            newest = max(done, default=0)
            if newest > SCHEMA_VERSION:
                raise ConfigError(f"the gateway's state store has schema version {newest}; this riskrank-jax "
                                  f"knows up to {SCHEMA_VERSION} (a newer riskrank-jax wrote it)", self.where)
            for version, name, sql in MIGRATIONS:
                if version in done:
                    continue
                for statement in _statements(sql.format(**_TYPES[self.dialect])):
                    db.execute(statement)
                db.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, now()))
            self._after_migrate(db)

    def _after_migrate(self, db) -> None:
        pass

    def version(self) -> int:
        with self.read() as db:
            return db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0

    def secret(self, name: str, nbytes: int = 32) -> bytes:
        """The key ``name`` from the ``keys`` table, created (random ``nbytes``) by the first replica to ask:
        every replica reads the same key."""
        with self.transaction() as db:
            db.execute("INSERT INTO keys VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
                       (name, os.urandom(nbytes), now()))
            (value,) = db.execute("SELECT value FROM keys WHERE name = ?", (name,)).fetchone()
        return bytes(value)


class SqliteStore(Store):
    """The store in ``<state_dir>/gateway.sqlite`` (mode 0600, WAL): a connection per transaction, so the
    gateway's threads and another process (the CLI) use it at once."""

    dialect = "sqlite"

    def __init__(self, state_dir: Path):
        self.dir = Path(state_dir)
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as e:
            raise ConfigError(f"cannot create the gateway's state directory ({e.strerror})", self.dir) from None
        self.path = self.dir / DB_NAME
        self.where = str(self.path)
        try:
            self.migrate()
        except sqlite3.Error as e:
            raise ConfigError(f"cannot open the gateway's state store ({e})", self.path) from None
        except StoreUnavailable as e:
            raise ConfigError(str(e).removeprefix(f"{self.path}: "), self.path) from None
        os.chmod(self.path, 0o600)

    def _after_migrate(self, db) -> None:
        # the pin store of riskrank-jax before the shared schema kept its version here; keep it in step
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def transaction(self, lock: bool = False):
        """One connection in one transaction (BEGIN IMMEDIATE: writers queue; committed on success, rolled back
        on an error). lock: accepted for the interface (a SQLite write transaction is already exclusive)."""
        try:
            conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreUnavailable(f"{self.path}: cannot open the gateway's state store ({e})") from None
        with closing(conn):
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                if lock:
                    self._check_version(conn)
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise StoreUnavailable(f"{self.path}: cannot open the gateway's state store ({e})") from None
            try:
                yield _Db(conn, self.dialect)
            except sqlite3.Error as e:
                conn.execute("ROLLBACK")
                raise StoreUnavailable(f"{self.path}: the gateway's state store answered with an error ({e})") \
                    from None
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _check_version(self, conn) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise ConfigError(f"the gateway's state store has schema version {version}; this riskrank-jax knows "
                              f"up to {SCHEMA_VERSION} (a newer riskrank-jax wrote it)", self.path)
        if version >= 1 and not conn.execute("SELECT name FROM sqlite_master WHERE name='schema_migrations'"
                                             ).fetchone():
            # a pin store of riskrank-jax before the shared schema: its tables are migration 1
            conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                         "applied_at TEXT NOT NULL)")
            conn.execute("INSERT INTO schema_migrations VALUES (1, ?, ?)", (MIGRATIONS[0][1], now()))

    @contextmanager
    def read(self):
        """A read-only connection: a store that is missing is reported unavailable, never created."""
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5.0)
        except sqlite3.Error as e:
            raise StoreUnavailable(f"{self.path}: cannot read the gateway's state store ({e})") from None
        with closing(conn):
            try:
                yield _Db(conn, self.dialect)
            except sqlite3.Error as e:
                raise StoreUnavailable(f"{self.path}: cannot read the gateway's state store ({e})") from None

    def secret(self, name: str, nbytes: int = 32) -> bytes:
        """On SQLite a key is a file of its own beside the database (``<name>.key``, mode 0600,
        `serve.audit.installation_key`), so the audit key of earlier versions stays the audit key."""
        return installation_key(self.dir, f"{name}.key", nbytes)


class PostgresStore(Store):
    """The store in a PostgreSQL database (``postgresql://`` URL, psycopg 3): a small pool of connections, each
    dropped when it fails, so the next transaction reconnects."""

    dialect = "postgresql"

    def __init__(self, url: str):
        try:
            # deferred: only a postgresql:// store needs the PostgreSQL client (the postgres extra)
            import psycopg
        except ImportError:
            raise ConfigError("a postgresql:// state store needs psycopg 3: pip install 'riskrank-jax[postgres]'",
                              hide_password(url)) from None
        self._psycopg = psycopg
        self.url, self.where = url, hide_password(url)
        self._pool: queue.LifoQueue = queue.LifoQueue()
        self.migrate()

    def _connect(self):
        try:
            return self._psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=False)
        except self._psycopg.Error as e:
            raise StoreUnavailable(f"{self.where}: cannot connect to the gateway's state store "
                                   f"({_first_line(e)})") from None

    @contextmanager
    def transaction(self, lock: bool = False):
        """One pooled connection in one transaction; lock: hold the migration lock (several replicas starting at
        once migrate one after another)."""
        conn = self._pooled() or self._connect()
        ok = False
        try:
            try:
                if lock:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))
                yield _Db(conn, self.dialect)
                conn.commit()
                ok = True
            except self._psycopg.Error as e:
                raise StoreUnavailable(f"{self.where}: the gateway's state store failed ({_first_line(e)})") \
                    from None
        finally:
            if not ok:
                try:
                    conn.rollback()
                except self._psycopg.Error:
                    conn.close()
            if conn.closed or conn.broken:
                conn.close()
            elif self._pool.qsize() < POOL_SIZE:
                self._pool.put((conn, time.monotonic()))
            else:
                conn.close()

    def _pooled(self):
        """A pooled connection that still works (one idle for IDLE_CHECK_S is asked first: a database restarted
        meanwhile closed it, and the transaction gets a new one instead of an error), or None."""
        while True:
            try:
                conn, since = self._pool.get_nowait()
            except queue.Empty:
                return None
            if time.monotonic() - since < IDLE_CHECK_S:
                return conn
            try:
                conn.execute("SELECT 1")
                conn.rollback()
                return conn
            except self._psycopg.Error:
                conn.close()



def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def open_store(state_dir=None, database: str | None = None) -> Store:
    """The state store: PostgreSQL when ``database`` (or $RISKRANK_DATABASE) is a ``postgresql://`` URL, else
    SQLite in the state directory (`resolve_state_dir`). Migrated to `SCHEMA_VERSION` on opening.
    Raises ConfigError naming the store for a URL it cannot use or a newer schema, StoreUnavailable when the
    database cannot be reached."""
    database = database if database is not None else os.environ.get("RISKRANK_DATABASE") or None
    if database:
        if not re.match(r"^postgres(ql)?://", database):
            raise ConfigError("the state database must be a postgresql:// URL (leave it out for SQLite in the state "
                              "directory)", hide_password(database))
        return PostgresStore(database)
    return SqliteStore(resolve_state_dir(state_dir))


__all__ = ["DB_NAME", "KEY_FILE", "MIGRATIONS", "installation_key", "resolve_state_dir", "SCHEMA_VERSION", "PostgresStore", "SqliteStore", "Store", "StoreUnavailable",
           "hide_password", "now", "open_store"]
