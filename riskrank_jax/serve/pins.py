"""Pinned tool definitions: what each downstream tool looked like when it was first seen or last accepted,
kept in the gateway's state store (`serve.store`: SQLite in the state directory, or the PostgreSQL database the
replicas share), so a definition that changes later is caught.

    store = PinStore(state_dir)                                  # <state_dir>/gateway.sqlite
    store.observe("files", tools, quarantine=False)              # on every listing of a server
    store.status("files", "read_file", definition_hash(tool))    # "accepted" | "changed" | "quarantined" | ...
    store.accept(["files.read_file"])                            # `riskrank-jax pins accept files.read_file`

A tool's definition is its name, description, input and output schema and annotations (`definition_hash`:
sha256 of their canonical JSON). At first sight it is accepted (or, with ``quarantine``, held until a person
accepts it). Any later definition other than the accepted one marks the pin "changed" until a person accepts
the new one — going back to the accepted definition does not clear the mark — and every distinct definition
seen is kept in ``history``. The gateway reads the store on every decision, so an acceptance made with the CLI
while it runs takes effect at the next call; a store it cannot read gives "unavailable", and the call is
refused (fail closed).

Why a database: safe against concurrent readers and a writer (the CLI while the gateway runs, other replicas),
and transactions, so a crash never leaves half a pin.
"""

from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import json

from riskrank_jax.serve.identity import identity, split_identity
from riskrank_jax.serve.store import DB_NAME, Store, StoreUnavailable, open_store, resolve_state_dir

DEFINITION_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def definition(tool: dict) -> dict:
    """The parts of an MCP tool object that make its definition (DEFINITION_KEYS present in ``tool``)."""
    return {k: tool[k] for k in DEFINITION_KEYS if k in tool}


def definition_hash(tool: dict) -> str:
    """sha256 hex of the canonical JSON (sorted keys, no spaces) of ``definition(tool)``."""
    text = json.dumps(definition(tool), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class PinStore:
    """The pins of one state directory (module docstring). Every method opens its own connection, so the
    store may be used from the gateway's threads and from another process at once."""

    def __init__(self, state_dir=None, database: str | None = None, store: Store | None = None):
        """The pins of ``store``, else of `open_store` (state_dir, database): SQLite in the state directory, or
        the PostgreSQL database every replica shares."""
        self.store = store if store is not None else open_store(state_dir, database)
        self.dir = getattr(self.store, "dir", None) or resolve_state_dir(state_dir)
        self.path = getattr(self.store, "path", None) or self.store.where

    def _db(self):
        """One transaction of the store (committed on success, rolled back on an error)."""
        return self.store.transaction()

    def observe(self, server: str, tools: list[dict], quarantine: bool = False) -> list[dict]:
        """Record one listing of ``server``'s ``tools`` (MCP tool objects); returns the pins that changed
        status: ``{"tool", "status", "was"}`` per new, changed or changed-back tool."""
        now, out = _now(), []
        with self._db() as db:
            for t in tools:
                name, h = t["name"], definition_hash(t)
                db.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                           (server, name, h, json.dumps(definition(t), sort_keys=True), now))
                row = db.execute("SELECT accepted_hash, current_hash, changed FROM pins WHERE server=? AND tool=?",
                                 (server, name)).fetchone()
                if row is None:
                    accepted = None if quarantine else h
                    db.execute("INSERT INTO pins VALUES (?, ?, ?, ?, 0, ?, NULL, ?, ?)",
                               (server, name, accepted, h, now, None if quarantine else now,
                                None if quarantine else "first sight"))
                    out.append({"tool": name, "status": "quarantined" if quarantine else "accepted", "was": None})
                    continue
                accepted, current, changed = row
                if h == current:
                    continue
                was = _status(accepted, current, changed)
                now_changed = int(bool(changed) or (accepted is not None and h != accepted))
                db.execute("UPDATE pins SET current_hash=?, changed=?, changed_at=COALESCE(?, changed_at) "
                           "WHERE server=? AND tool=?",
                           (h, now_changed, now if now_changed and not changed else None, server, name))
                out.append({"tool": name, "status": _status(accepted, h, now_changed), "was": was})
        return out

    def status(self, server: str, tool: str, current_hash: str) -> str:
        """The pin status of the definition ``current_hash`` that the server lists now: "accepted",
        "changed" (it differs from the accepted one, or did since the last acceptance), "quarantined" (never
        accepted), "unknown" (not recorded yet) or "unavailable" (the store cannot be read)."""
        try:
            with self.store.read() as db:
                row = db.execute("SELECT accepted_hash, current_hash, changed FROM pins WHERE server=? AND tool=?",
                                 (server, tool)).fetchone()
        except StoreUnavailable:
            return "unavailable"
        if row is None:
            return "unknown"
        accepted, current, changed = row
        if current != current_hash:
            changed = 1 if accepted != current_hash else changed
        return _status(accepted, current_hash, changed)

    def accept(self, names=(), servers=(), everything: bool = False) -> list[str]:
        """Accept the current definition of each tool ``names`` ("server.tool"), of every tool of ``servers``,
        or of every pinned tool; returns the identities accepted. KeyError naming an unknown tool."""
        who, now, done = f"{getpass.getuser()} (riskrank-jax pins accept)", _now(), []
        with self._db() as db:
            rows = db.execute("SELECT server, tool FROM pins ORDER BY server, tool").fetchall()
            known = {identity(s, t): (s, t) for s, t in rows}
            chosen = set()
            for n in names:
                if n not in known:
                    raise KeyError(f"no pinned tool '{n}' in {self.path} (give server.tool as `riskrank-jax pins "
                                   "list` shows it)")
                chosen.add(known[n])
            for s in servers:
                hit = {st for st in known.values() if st[0] == s}
                if not hit:
                    raise KeyError(f"no pinned tools of server '{s}' in {self.path}")
                chosen |= hit
            if everything:
                chosen = set(known.values())
            for s, t in sorted(chosen):
                db.execute("UPDATE pins SET accepted_hash=current_hash, changed=0, changed_at=NULL, accepted_at=?, "
                           "accepted_by=? WHERE server=? AND tool=?", (now, who, s, t))
                done.append(identity(s, t))
        return done

    def rows(self) -> list[dict]:
        """Every pin: identity, server, tool, status, hashes (first 12 hex digits), times, definitions seen."""
        with self._db() as db:
            pins = db.execute("SELECT server, tool, accepted_hash, current_hash, changed, first_seen, changed_at, "
                              "accepted_at, accepted_by FROM pins ORDER BY server, tool").fetchall()
            seen = dict(((s, t), n) for s, t, n in
                        db.execute("SELECT server, tool, COUNT(*) FROM history GROUP BY server, tool"))
        return [{"tool": identity(s, t), "server": s, "status": _status(a, c, ch),
                 "accepted": a[:12] if a else None, "current": c[:12], "first_seen": fs, "changed_at": ca,
                 "accepted_at": aa, "accepted_by": ab, "definitions_seen": seen.get((s, t), 1)}
                for s, t, a, c, ch, fs, ca, aa, ab in pins]

    def definitions(self, name: str) -> list[dict]:
        """Every definition seen of the tool ``name`` ("server.tool"), oldest first: {"hash", "first_seen",
        "definition"}."""
        st = split_identity(name)
        if st is None:
            raise KeyError(f"'{name}' is not a gateway tool name (server.tool)")
        with self._db() as db:
            rows = db.execute("SELECT hash, first_seen, definition FROM history WHERE server=? AND tool=? "
                              "ORDER BY first_seen, rowid", st).fetchall()
        if not rows:
            raise KeyError(f"no pinned tool '{name}' in {self.path}")
        return [{"hash": h, "first_seen": f, "definition": json.loads(d)} for h, f, d in rows]


def _status(accepted, current, changed) -> str:
    if accepted is None:
        return "quarantined"
    return "changed" if changed or current != accepted else "accepted"


__all__ = ["PinStore", "definition", "definition_hash", "resolve_state_dir", "DB_NAME"]
