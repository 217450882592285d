"""The MCP server an agent connects to: one risk-aware catalog over every downstream server's tools.

    gw = Gateway(read_config("servers.json"))       # a serve.config.GatewaySettings
    anyio.run(gw.serve_stdio)                        # or gw.serve_http(token): settings.http's address

Tools it exposes (``runtime.expose = "search"``, the default; schemas in docs/serve.md):

* ``search_tools(query, k=5)`` — the `Ranker`'s risk-aware top-k: per tool its name, description, input schema,
  risk level and source, server, and what ``call_tool`` would do with it; plus the risky tools that the risk
  penalty held back (in the top-k at λ = 0, not now), with the reason (`serve.catalog.search`);
* ``call_tool(name, arguments)`` — forwards to the owning server, gated by the `Policy` (``serve.policy``);
  every decision is written to the audit log before anything is forwarded;
* ``list_servers()`` — each server's state, tool count and risk histogram.

With ``expose = "filtered"`` the gateway lists the downstream tools themselves, minus those the policy would
not let through, and forwards calls to them under the same gate.

The catalog (`serve.catalog.Catalog`) is rebuilt in a worker thread when a server's tools change (first
listing, ``list_changed``, a restart) and swapped in whole, so requests in flight keep the catalog they started
with. A call walks `Gateway.gate` (what the gate knows of the tool now, `policy.decide_call`), `Gateway.record`
(the audit line) and `Gateway.forward`.

Why one object: the downstream servers, the catalog over their tools and the gate over both change together.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp_types as types

from riskrank_jax.encode.embedding_cache import EmbeddingCache
from riskrank_jax.encode.families import load_encoder
from riskrank_jax.errors import RiskRankError
from riskrank_jax.paths import resolve_cache_dir
from riskrank_jax.rank.ranker import check_queries
from riskrank_jax.registry.dimensions import describe
from riskrank_jax.runtime import compile_cache
from riskrank_jax.runtime.heap import release_freed_heap
from riskrank_jax.serve.audit import HEARTBEAT_S, AuditLog, AuditStore, arguments_digest, session_digest
from riskrank_jax.serve.catalog import (Catalog, Entry, agent_description, agent_schema, build_catalog,
                                        catalog_state, dimension_row, readable_servers, search)
from riskrank_jax.serve.config import EXPOSE_MODES, GatewaySettings, host_port
from riskrank_jax.serve.downstream import Downstream, DownstreamError, log
from riskrank_jax.serve.http_guard import HttpGuard, sdk_transport_security
from riskrank_jax.serve.identity import identity, shown
from riskrank_jax.serve.mcp_app import build_server
from riskrank_jax.serve.operate import GatewayMetrics, Operate, set_log_format
from riskrank_jax.serve.pins import PinStore, definition_hash
from riskrank_jax.serve.sessions import Sessions
from riskrank_jax.serve.store import StoreUnavailable, now, open_store
from riskrank_jax.serve.policy import Decision, ToolState, decide_call
from riskrank_jax.serve.results import cap_result
from riskrank_jax.serve.sdk_hooks import publish_tools_changed

MAX_K = 50
READY_TIMEOUT_S = 60.0
FIRST_CATALOG_WAIT_S = 10.0  # how long servers still starting may hold back the first catalog once one is up
WARM_UP_WORDS = (4, 12, 20, 28, 56, 120)  # one request of each compact encoder row length (8, 16, 24, 32, 64, 128)


# ---------------------------------------------------------------------------------------------- the gateway


@dataclass(frozen=True)
class Gated:
    """One call's decision and what it was made on: the catalog, the tool's index in it and its `ToolState`
    (None for a tool the gateway did not list)."""

    catalog: Catalog | None
    index: int | None
    tool: ToolState | None
    decision: Decision


class Gateway:
    """Downstream servers, the current Catalog, the policy and the audit log (see the module docstring)."""

    def __init__(self, settings: GatewaySettings, encoder=None):
        """encoder: an already loaded encoder (default: load ``settings.rank.encoder`` when the first catalog is
        built)."""
        if settings.runtime.expose not in EXPOSE_MODES:
            raise RiskRankError(f"expose must be one of {', '.join(EXPOSE_MODES)}, got {settings.runtime.expose!r}")
        set_log_format(settings.runtime.log_format)  # serve.operate: text, or one JSON object a line
        self.settings = settings
        self.policy = settings.policy  # the tree's policy, read on every decision
        self.downstreams = {s.name: Downstream(s, settings.limits, on_tools=self._tools_changed)
                            for s in settings.servers}
        self.metrics = GatewayMetrics(self)  # /metrics (serve.operate); it times the downstreams' calls
        self.catalog: Catalog | None = None
        self.rebuilds = 0
        self.store = open_store(settings.runtime.state_dir, settings.runtime.database)  # StoreUnavailable: no start
        self.pins = PinStore(store=self.store)
        self.audit_key = self.store.secret("audit")
        self.records = AuditStore(self.store)  # the audit in the store: each call's decision, then its outcome
        self.sessions = Sessions(self.store, self.records.replica)  # session flows and confirmations
        self.audit = AuditLog(settings.runtime.audit_log) if settings.runtime.audit_log else None
        self.left_out: dict[str, str] = {}  # server -> why its tool list could not be read (left out alone)
        self._encoder = encoder
        self._cache = None
        self._rebuild_lock = anyio.Lock()
        self._rank_limiter = anyio.CapacityLimiter(1)  # searches: one at a time, in arrival order
        self._build_limiter = anyio.CapacityLimiter(1)  # a rebuild runs beside them, on its own thread
        self._dirty = False
        self._ready = anyio.Event()
        self._first_catalog = anyio.Event()
        self._server = None

    # ------------------------------------------------------------------------------------ catalog
    def _load_encoder(self):
        if self._cache is None:
            compile_cache.enable(resolve_cache_dir(self.settings.runtime.cache_dir))
            self._encoder = self._encoder or load_encoder(self.settings.rank.encoder)
            self._cache = EmbeddingCache(self.settings.runtime.cache_dir)

    def _build(self) -> Catalog:
        self._load_encoder()
        server_tools = [(name, list(ds.tools)) for name, ds in self.downstreams.items()]  # a down server's too
        server_tools, left_out = readable_servers(server_tools)
        for name, why in left_out.items():
            if self.left_out.get(name) != why:
                log(f"server '{name}': its tools are left out of the catalog: {why}")
        self.left_out = left_out
        catalog = build_catalog(server_tools, self.settings.registries, self.settings.rank, self._encoder, self._cache,
                                self.policy.trusted_servers)
        for words in WARM_UP_WORDS:  # compile (or read from the XLA cache) each request shape before it comes
            catalog.ranker.encode_queries([" ".join(["tool"] * words)])
        search(catalog, "warm up", min(5, catalog.ranker.size), self.policy)
        release_freed_heap()  # the encoder weights' host copies and the build's temporaries, freed: back to the OS
        return catalog

    async def rebuild(self) -> None:
        """Build a new catalog from the servers' current tools in a worker thread and swap it in."""
        self._dirty = True
        async with self._rebuild_lock:
            if not self._dirty:
                return  # a rebuild that started after this change already picked it up
            self._dirty = False
            try:
                catalog = await anyio.to_thread.run_sync(self._build, limiter=self._build_limiter)
            except RiskRankError as e:
                log(f"cannot rebuild the catalog: {e}; still serving the previous one")
                return
            self.catalog = catalog
            self.rebuilds += 1
            log(f"catalog: {catalog.ranker.size} tools ({catalog.seconds:.1f} s)")
            if self._server is not None and self.settings.runtime.expose == "filtered":
                await publish_tools_changed(self._server)

    async def _tools_changed(self, ds: Downstream) -> None:
        """A server listed other tools: pin them (before any call can be decided on them), then rebuild."""
        try:
            changes = await anyio.to_thread.run_sync(self.pins.observe, ds.name, list(ds.tools),
                                                     self.policy.quarantine_new_servers)
        except (RiskRankError, OSError, sqlite3.Error) as e:  # decisions then read "unavailable" and refuse
            log(f"cannot record the pins of server '{ds.name}': {e}")
            changes = []
        for c in changes:
            if c["was"] is not None:
                log(f"server '{ds.name}': the definition of '{c['tool']}' changed ({c['was']} -> {c['status']}); "
                    f"its calls ask until accepted (riskrank-jax pins accept {identity(ds.name, c['tool'])})")
        if self._ready.is_set():
            await self.rebuild()

    async def start(self) -> None:
        """Start every downstream server, wait for each first attempt (up or failed), build the first catalog.
        Runs beside the MCP server, so a client can connect at once; searches wait for the first catalog.
        A server still starting FIRST_CATALOG_WAIT_S after another came up does not hold the others back: the
        first catalog is built without it, and rebuilt when it comes up. When it stops, this replica's audit
        records still open are closed as interrupted."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.keep_alive)
                for ds in self.downstreams.values():
                    tg.start_soon(ds.run)
                await self._first_attempts()
                self._ready.set()
                if any(ds.tools for ds in self.downstreams.values()) or self.settings.registries:
                    await self.rebuild()
                else:
                    down = "; ".join(f"{ds.name}: {ds.error}" for ds in self.downstreams.values())
                    log(f"no downstream server came up ({down}); the catalog stays empty until one does")
                self._first_catalog.set()
        finally:
            try:
                self.records.close()
            except StoreUnavailable as err:
                log(f"cannot close this replica's open audit records ({err}); another replica marks them "
                    "interrupted")

    async def _first_attempts(self) -> None:
        first_up = None
        with anyio.move_on_after(READY_TIMEOUT_S):
            while pending := [ds.name for ds in self.downstreams.values() if not ds.ready.is_set()]:
                if first_up is None and any(ds.state == "up" for ds in self.downstreams.values()):
                    first_up = anyio.current_time()
                if first_up is not None and anyio.current_time() - first_up >= FIRST_CATALOG_WAIT_S:
                    log(f"building the first catalog without {', '.join(map(repr, pending))} (still starting); "
                        "their tools join it when they come up")
                    return
                await anyio.sleep(0.05)

    async def wait_catalog(self) -> "Catalog":
        """The current catalog, waiting for the first one to be built (at most READY_TIMEOUT_S)."""
        with anyio.move_on_after(READY_TIMEOUT_S):
            await self._first_catalog.wait()
        if self.catalog is None:
            raise RiskRankError("no tools yet: " + self._servers_line())
        return self.catalog

    # ------------------------------------------------------------------------------------ requests
    async def search_tools(self, query: str, k: int) -> dict:
        with self.metrics.search():  # counted and timed in /metrics
            check_queries([query])
            if not 1 <= k <= MAX_K:
                raise RiskRankError(f"k must be in 1..{MAX_K}, got {k}")
            catalog = await self.wait_catalog()
            return await anyio.to_thread.run_sync(search, catalog, query, k, self.policy,
                                                  self.settings.runtime.tool_references,
                                                  lambda i: self.tool_state(catalog, i), limiter=self._rank_limiter)

    def filtered_tools(self, catalog: Catalog) -> list[dict]:
        """``--expose filtered``: the MCP tool objects of every downstream tool the policy lets through now,
        named by identity, descriptions as the agent may see them (`agent_description`)."""
        return [dict(e.listed, name=e.name, description=agent_description(e), inputSchema=agent_schema(e))
                for i, e in enumerate(catalog.entries)
                if e.server is not None and decide_call(self.policy, self.tool_state(catalog, i)).action == "allow"]

    def blocked(self, e: "Entry") -> str | None:
        """Why the tool of ``e`` cannot be called now: its server is not running (its tools stay listed,
        marked unavailable, until it is back), or its input schema cannot be read; None when it can."""
        ds = self.downstreams.get(e.server) if e.server is not None else None
        if ds is None:
            return None
        if e.raw_name in ds.not_callable:
            return f"'{e.name}' is not callable: {ds.not_callable[e.raw_name]}"
        return ds.unavailable()

    def tool_state(self, catalog: Catalog, i: int) -> ToolState:
        """What the gate knows of tool i now: the catalog's assessment, the definition its server lists now
        (read from the server's latest listing, not the catalog's), its pin status read from the pin store."""
        e = catalog.entries[i]
        if e.server is None:
            return catalog_state(catalog, i)
        ds = self.downstreams.get(e.server)
        if ds is None:
            return catalog_state(catalog, i, unavailable=f"server '{e.server}' is not in this gateway's config")
        current = ds.listed(e.raw_name)
        if current is None:
            return dataclasses.replace(catalog_state(catalog, i), definition=None)
        return catalog_state(catalog, i, current, self.pins.status(e.server, e.raw_name, definition_hash(current)),
                             self.blocked(e))

    def _servers_line(self) -> str:
        return "; ".join(f"{d['name']} {d['state']}" + (f" ({d['error']})" if d.get("error") else "")
                         for d in (ds.status() for ds in self.downstreams.values())) or "no servers configured"

    def gate(self, name: str, arguments, session=None) -> "Gated":
        """The decision for calling ``name`` with ``arguments`` in ``session``'s flow (`policy.decide_call` on
        what the gate knows of the tool now), with the catalog, index and state it was made on."""
        catalog = self.catalog
        i = None if catalog is None or not isinstance(name, str) else catalog.by_name.get(name)
        tool = None if i is None else self.tool_state(catalog, i)
        try:
            flow = self.sessions.flow(session)
        except StoreUnavailable:  # what the session did cannot be read: the gate refuses (fail closed)
            flow = None
            if tool is not None and tool.server is not None:
                tool = dataclasses.replace(tool, pin="unavailable")
        return Gated(catalog, i, tool, decide_call(self.policy, tool, arguments, flow))

    def record(self, gated: "Gated", name, arguments, verdict: str, reason: str, session=None,
               forwarded: bool = False) -> str:
        """The call's audit record (before anything is forwarded): the decision, its rule, the tool's level, the
        call's dimensions, the kinds of secret found, the pin, and a keyed digest of the arguments; written to the
        state store (open until `forward` completes it when ``forwarded``), then to the JSONL export. Returns the
        record's id. Raises StoreUnavailable when the store cannot take it: the call must not be forwarded."""
        t, d = gated.tool, gated.decision
        dims = None if d.dimensions is None else describe(d.dimensions)  # as decide_call computed them
        line = dict(time=now(), tool=name if t is not None else shown(name),
                    server=None if t is None else t.server, risk_level=None if t is None else t.level,
                    risk_source=None if t is None else t.source, decision=verdict, reason=reason, rule=d.rule,
                    dimensions=dims, pin=None if t is None or t.server is None else t.pin,
                    **({"secrets": list(d.secrets)} if d.secrets else {}),
                    session=session_digest(session), arguments_hmac=arguments_digest(arguments, self.audit_key))
        rid = self.records.begin(line, forwarded)
        if self.audit is not None:
            self.audit.write(**line)
        return rid

    async def forward(self, catalog: Catalog, i: int, arguments: dict, progress=None, session=None,
                      record: str | None = None):
        """The owning server's result; an error result naming the server when it cannot be reached.
        progress: async (progress, total, message) callback for the server's progress notifications; session:
        the key of the MCP session the call came from (its flow records the answer); record: the call's audit
        record (`record`), completed with the outcome: "ok", "error", or "interrupted" when the call is
        cancelled."""
        e = catalog.entries[i]
        ds = self.downstreams[e.server]
        try:
            result = await ds.call(e.raw_name, arguments, progress=progress)
        except DownstreamError as err:
            await anyio.to_thread.run_sync(self._complete, record, "error", str(err))
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"error: {err}")],
                                        is_error=True)
        except BaseException:  # cancelled (the client, a drain) or a failure of the gateway itself
            self._complete(record, "interrupted", "the call was cancelled before its server answered")
            raise
        await anyio.to_thread.run_sync(self._complete, record, "error" if result.is_error else "ok")
        await anyio.to_thread.run_sync(self.note_answer, catalog, i, session)  # both write to the state store
        result, note = cap_result(result, ds.limits.max_result_bytes)
        if note is not None:
            log(f"the result of '{e.name}' was cut: {note}")
        return result

    def _complete(self, record: str | None, outcome: str, detail: str | None = None) -> None:
        if record is not None and not self.records.complete(record, outcome, detail):
            log(f"the state store cannot take the outcome of audit record {record} now; it is written when the "
                "store is back")

    def note_answer(self, catalog: Catalog, i: int, session=None) -> None:
        """Tool i answered in ``session``: when it returns untrusted content, later public-sink, destructive
        and secret-source calls of the session ask (policy: session flow), on every replica."""
        row = dimension_row(catalog, i)
        if row is not None and row["untrusted_content"]["value"]:
            try:
                self.sessions.note_flow(session, catalog.entries[i].name)
            except StoreUnavailable as err:  # this replica keeps it; others would not see it
                log(f"cannot record the session's flow in the state store ({err}); this replica keeps it")

    async def keep_alive(self) -> None:
        """Every HEARTBEAT_S: tell the store this replica is alive, write the outcomes it could not take before,
        and mark the calls of replicas that stopped as interrupted (`AuditStore.heartbeat`)."""
        down = False
        while True:
            try:
                await anyio.to_thread.run_sync(self.records.heartbeat)
                if down:
                    log(f"the state store is back ({self.store.where})")
                down = False
            except StoreUnavailable as err:
                if not down:
                    log(f"the state store is unavailable: {err}; calls are refused until it is back")
                down = True
            await anyio.sleep(HEARTBEAT_S)

    def servers_status(self) -> dict:
        catalog = self.catalog
        out = []
        pins = self._pin_rows()
        for ds in self.downstreams.values():
            d = ds.status()
            if catalog is not None:
                d["risk_histogram"] = catalog.histogram(ds.name)
                d["flagged_tools"] = {e.name: list(e.instructions.categories) for e in catalog.entries
                                      if e.server == ds.name and e.instructions is not None}
            d["changed_tools"] = [p["tool"] for p in pins if p["server"] == ds.name and p["status"] == "changed"]
            d["quarantined_tools"] = [p["tool"] for p in pins if p["server"] == ds.name
                                      and p["status"] == "quarantined"]
            if ds.name in self.left_out:
                d["left_out"] = self.left_out[ds.name]
            out.append(d)
        regs = [{"path": r, "tools": None if catalog is None else
                 sum(1 for e in catalog.entries if e.server is None and e.source == Path(r).stem)}
                for r in self.settings.registries]
        return {"servers": out, "registries": regs, "tools": 0 if catalog is None else catalog.ranker.size,
                "rebuilds": self.rebuilds, "policy": dataclasses.asdict(self.policy), "state_dir": str(self.pins.dir)}

    def _pin_rows(self) -> list[dict]:
        try:
            return self.pins.rows()
        except (RiskRankError, sqlite3.Error) as e:
            return [{"server": None, "tool": None, "status": f"unavailable: {e}"}]

    # ------------------------------------------------------------------------------------ transports
    def mcp_server(self):
        if self._server is None:
            self._server = build_server(self)
        return self._server

    async def serve_stdio(self) -> None:
        server = self.mcp_server()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.start)
            await server.run_stdio_async()
            tg.cancel_scope.cancel()

    async def serve_http(self, token: str | None = None) -> None:
        """Streamable HTTP at http://HOST:PORT/mcp (``settings.http.address``) behind `serve.http_guard.HttpGuard`,
        for every bind address: Host (this gateway's names, plus ``http.allowed_hosts``) and browser Origin (plus
        ``http.allowed_origins``) checked, the bearer ``token`` (read from ``http.token_file``) when one is
        given, request bodies capped; /healthz, /readyz and /metrics before the guard, and a drain on SIGTERM
        (`serve.operate.Operate`)."""
        http = self.settings.http
        host, port = host_port(http.address)
        app = self.mcp_server().streamable_http_app(host=host, transport_security=sdk_transport_security())
        app = HttpGuard(app, bind_host=host, port=port, token=token, allowed_hosts=http.allowed_hosts,
                        allowed_origins=http.allowed_origins)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.start)
            log(f"serving streamable HTTP on http://{host}:{port}/mcp" + (" (bearer token required)" if token else ""))
            await Operate(app, self).serve(host, port)  # until SIGTERM / SIGINT and the drain
            tg.cancel_scope.cancel()


__all__ = ["Gateway", "Gated", "MAX_K"]
