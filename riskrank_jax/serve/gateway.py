"""The MCP server an agent connects to: one risk-aware catalog over every downstream server's tools.

    gw = Gateway(config, options)            # GatewayConfig + GatewayOptions
    anyio.run(gw.serve_stdio)                # or gw.serve_http("127.0.0.1", 8931, token)

Tools it exposes (``expose = "search"``, the default; schemas in docs/serve.md):

* ``search_tools(query, k=5)`` — the `Ranker`'s risk-aware top-k: per tool its name, description, input schema,
  risk level and source, server, and what ``call_tool`` would do with it; plus the risky tools that the risk
  penalty held back (in the top-k at λ = 0, not now), with the reason;
* ``call_tool(name, arguments)`` — forwards to the owning server, gated by the `Policy` (``serve.policy``);
  every decision is written to the audit log before anything is forwarded;
* ``list_servers()`` — each server's state, tool count and risk histogram.

With ``expose = "filtered"`` the gateway lists the downstream tools themselves, minus those the policy would
not let through, and forwards calls to them under the same gate.

The catalog (`Catalog`) is rebuilt in a worker thread when a server's tools change (first listing,
``list_changed``, a restart) and swapped in whole, so requests in flight keep the catalog they started with.

Why a catalog of one Ranker: search and gating read the same risk levels, computed as ``riskrank-jax rank``
computes them.
"""

from __future__ import annotations

import dataclasses
import hmac
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import anyio

from riskrank_jax.errors import RiskRankError
from riskrank_jax.serve.audit import AuditLog, arguments_digest, session_digest
from riskrank_jax.serve.config import GatewayConfig, tool_name_safe
from riskrank_jax.serve.downstream import Downstream, DownstreamError, log
from riskrank_jax.serve.policy import Decision, Policy, decide

EXPOSE_MODES = ("search", "filtered")
MAX_K = 50
READY_TIMEOUT_S = 60.0
FIRST_CATALOG_WAIT_S = 10.0  # how long servers still starting may hold back the first catalog once one is up
WARM_UP_WORDS = (4, 12, 20, 28, 56, 120)  # one request of each compact encoder row length (8, 16, 24, 32, 64, 128)


@dataclass(frozen=True)
class GatewayOptions:
    """How the gateway runs: expose mode, Anthropic tool_reference blocks, audit log path, embedding cache,
    encoder, risk head, saved ranker (``--model``), and whether all annotations are trusted."""

    expose: str = "search"
    tool_references: bool = False
    audit_log: str | None = None
    cache_dir: str | None = None
    encoder: str | None = None
    risk_head: str | None = None
    model: str | None = None
    trust_annotations: bool = False


@dataclass(frozen=True, eq=False)
class Entry:
    """A tool of the catalog: its gateway name, owning server (None: listed from a registry file, not
    callable), name on that server, and the MCP tool object as listed."""

    name: str
    server: str | None
    raw_name: str
    source: str
    listed: dict


@dataclass(frozen=True, eq=False)
class Catalog:
    """The tools the gateway ranks and gates: ``ranker`` over ``entries`` (same order), ``zero`` the same ranker
    at λ = 0 (what relevance alone would return, for the held-back list)."""

    ranker: Any
    zero: Any
    entries: tuple[Entry, ...]
    built_at: float
    seconds: float

    @property
    def by_name(self) -> dict[str, int]:
        """gateway name -> index; the entries are the ranker's tools in its order."""
        return self.ranker.tool_index

    def histogram(self, server: str | None) -> dict[str, int]:
        """Tools per risk level "1".."5" of one server (None: the registry files)."""
        levels = [int(self.ranker.risk_levels[i]) for i, e in enumerate(self.entries) if e.server == server]
        return {str(r): levels.count(r) for r in range(1, 6)}


def _schema_from_params(tool) -> dict:
    """An input schema for a registry-file tool: its top-level parameters and their descriptions."""
    props = {n: ({"description": d} if d else {}) for n, d in tool.params}
    return {"type": "object", "properties": props}


def build_catalog(server_tools, registries, options: GatewayOptions, encoder, cache, trusted_servers=()) -> Catalog:
    """A Catalog over ``server_tools`` [(server name, [MCP tool dicts])] and registry files.

    Names used by more than one source become ``server.tool``. Risk is assessed as ``riskrank-jax rank`` does;
    annotations may lower it only for ``trusted_servers`` (or every server with ``options.trust_annotations``).
    """
    from riskrank_jax.rank.ranker import Ranker
    from riskrank_jax.registry import load_registry

    t0 = time.perf_counter()
    servers = [tool_name_safe(name) for name, _ in server_tools]
    inputs = [(safe, {"tools": tools}) for safe, (_, tools) in zip(servers, server_tools) if tools]
    inputs += [str(r) for r in registries]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = load_registry(inputs, separator=".")
    real = {safe: name for safe, (name, _) in zip(servers, server_tools)}
    listed = {(tool_name_safe(name), t["name"]): t for name, tools in server_tools for t in tools}
    entries = []
    for t in reg.tools:
        if t.source in real and (t.source, t.raw_name) in listed:
            entries.append(Entry(t.name, real[t.source], t.raw_name, t.source, listed[(t.source, t.raw_name)]))
        else:
            entries.append(Entry(t.name, None, t.raw_name, t.source,
                                 {"name": t.name, "description": t.description,
                                  "inputSchema": _schema_from_params(t)}))
    trusted = tuple(tool_name_safe(s) for s in trusted_servers)
    ranker = None
    if options.model is not None:
        ranker = _saved_ranker(options.model, reg, encoder)
    if ranker is None:
        ranker = Ranker.from_registry(reg, encoder=encoder, cache=cache, risk_head=options.risk_head,
                                      trust_annotations=options.trust_annotations, trusted_sources=trusted)
    zero = ranker.with_config(dataclasses.replace(ranker.config, lam=0.0))
    return Catalog(ranker, zero, tuple(entries), time.time(), time.perf_counter() - t0)


def _saved_ranker(model_dir, reg, encoder):
    """The ranker saved by `fit` in model_dir when it was fitted to exactly these tools, else None (logged)."""
    from riskrank_jax.rank.ranker import Ranker

    ranker = Ranker.load(model_dir, expect_encoder_id=encoder.model_id)
    if (reg.names, reg.texts) != (ranker.tool_names, ranker.tool_texts):
        log(f"{model_dir}: the saved ranker was fitted to other tools than the servers list now; serving the "
            "zero-shot ranker until they match again")
        return None
    return ranker if ranker.encoder is not None else dataclasses.replace(ranker, encoder=encoder)  # tuned: its own


# ---------------------------------------------------------------------------------------------- search


def search(catalog: Catalog, query: str, k: int, policy: Policy, tool_references: bool = False,
           blocked=None) -> dict:
    """The structured result of search_tools (see the module docstring); runs the Ranker, so call it from a
    worker thread. blocked(entry): why the tool cannot be called now (its server is restarting, its schema
    cannot be read), or None."""
    from riskrank_jax.rank.explain import search_with_held_back

    r = catalog.ranker
    k = max(1, min(int(k), r.size))
    hits, held_back = search_with_held_back(r, query, k, zero=catalog.zero)
    tools = []
    for h in hits:
        i = catalog.by_name[h.name]
        e = catalog.entries[i]
        why = None if blocked is None or e.server is None else blocked(e)
        row = {"name": e.name, "description": e.listed.get("description", ""),
               "input_schema": e.listed.get("inputSchema", {}), "server": e.server,
               "risk_level": h.risk_level, "risk_source": h.risk_source,
               "dimensions": _dimension_row(catalog, i), "score": round(h.score, 4),
               "call": _call_preview(catalog, i, policy)}
        if why is not None:
            row.update(available=False, call=f"unavailable: {why}")
        tools.append(row)
    held = [{"name": x["name"], "server": catalog.entries[x["index"]].server, "risk_level": x["risk_level"],
             "risk_source": x["risk_source"],
             "dimensions": _dimension_row(catalog, x["index"]), "reason": x["reason"]} for x in held_back]
    out = {"query": query, "k": k, "tools": tools, "held_back": held}
    if tool_references:
        out["tool_references"] = [{"type": "tool_reference", "tool_name": t["name"]} for t in tools]
    return out


def _call_preview(catalog: Catalog, i: int, policy: Policy) -> str:
    """What call_tool would do: "allowed", "needs confirmation", "refused" or "not callable"."""
    e = catalog.entries[i]
    if e.server is None:
        return "not callable (listed from a registry file)"
    d = _decision(catalog, i, policy)
    out = {"allow": "allowed", "confirm": "needs confirmation", "refuse": "refused"}[d.action]
    rule = (_dimension_row(catalog, i) or {}).get("argument_rule")
    if d.action != "allow" and d.rule == "level" and rule:
        out += f" (allowed without it for one read-only {rule.split(':')[0]} argument)" if rule[:4] != "code" else ""
    return out


def _dimension_row(catalog: Catalog, i: int) -> dict | None:
    """The tool's risk dimensions with their sources (registry.dimensions), None when its level does not
    come from dimensions."""
    dims = catalog.ranker.risk_dimensions
    return dims[i] if dims else None


def _decision(catalog: Catalog, i: int, policy: Policy, arguments=None, flow: str | None = None) -> Decision:
    """The policy's decision for tool i: with this call's ``arguments`` (None in a listing) and ``flow``, the
    tool that returned untrusted content earlier in the session (None: none did)."""
    e, r = catalog.entries[i], catalog.ranker
    return decide(policy, (e.name, f"{e.source}.{e.raw_name}", e.raw_name), int(r.risk_levels[i]), r.risk_source[i],
                  _dimension_row(catalog, i), arguments, flow)


# ---------------------------------------------------------------------------------------------- the gateway


class Gateway:
    """Downstream servers, the current Catalog, the policy and the audit log (see the module docstring)."""

    def __init__(self, config: GatewayConfig, options: GatewayOptions = GatewayOptions(), encoder=None):
        """encoder: an already loaded encoder (default: load ``options.encoder`` when the first catalog is built)."""
        if options.expose not in EXPOSE_MODES:
            raise RiskRankError(f"expose must be one of {', '.join(EXPOSE_MODES)}, got {options.expose!r}")
        self.config = config
        self.options = options
        self.policy = config.policy
        self.downstreams = {s.name: Downstream(s, config.limits, on_tools=self._tools_changed)
                            for s in config.servers}
        self.catalog: Catalog | None = None
        self.rebuilds = 0
        self.flows: dict = {}  # session key (serve.mcp_app.session_key) -> the tool that returned untrusted content
        self.audit = AuditLog(options.audit_log) if options.audit_log else None
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
        from riskrank_jax.encode.embedding_cache import EmbeddingCache
        from riskrank_jax.encode.encoder import load_encoder
        from riskrank_jax.paths import resolve_cache_dir
        from riskrank_jax.runtime import compile_cache

        if self._cache is None:
            compile_cache.enable(resolve_cache_dir(self.options.cache_dir))
            self._encoder = self._encoder or load_encoder(self.options.encoder)
            self._cache = EmbeddingCache(self.options.cache_dir)

    def _build(self) -> Catalog:
        self._load_encoder()
        server_tools = [(name, list(ds.tools)) for name, ds in self.downstreams.items()]  # a down server's too
        catalog = build_catalog(server_tools, self.config.registries, self.options, self._encoder, self._cache,
                                self.policy.trusted_servers)
        for words in WARM_UP_WORDS:  # compile (or read from the XLA cache) each request shape before it comes
            catalog.ranker.encode_queries([" ".join(["tool"] * words)])
        search(catalog, "warm up", min(5, catalog.ranker.size), self.policy)
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
            if self._server is not None and self.options.expose == "filtered":
                from mcp.shared.subscriptions import ToolsListChanged

                await self._server._subscriptions.publish(ToolsListChanged())

    async def _tools_changed(self, ds: Downstream) -> None:
        if self._ready.is_set():
            await self.rebuild()

    async def start(self) -> None:
        """Start every downstream server, wait for each first attempt (up or failed), build the first catalog.
        Runs beside the MCP server, so a client can connect at once; searches wait for the first catalog.
        A server still starting FIRST_CATALOG_WAIT_S after another came up does not hold the others back: the
        first catalog is built without it, and rebuilt when it comes up."""
        async with anyio.create_task_group() as tg:
            for ds in self.downstreams.values():
                tg.start_soon(ds.run)
            await self._first_attempts()
            self._ready.set()
            if any(ds.tools for ds in self.downstreams.values()) or self.config.registries:
                await self.rebuild()
            else:
                down = "; ".join(f"{ds.name}: {ds.error}" for ds in self.downstreams.values())
                log(f"no downstream server came up ({down}); the catalog stays empty until one does")
            self._first_catalog.set()

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
        from riskrank_jax.rank.ranker import check_queries

        check_queries([query])
        if not 1 <= k <= MAX_K:
            raise RiskRankError(f"k must be in 1..{MAX_K}, got {k}")
        catalog = await self.wait_catalog()
        return await anyio.to_thread.run_sync(search, catalog, query, k, self.policy, self.options.tool_references,
                                              self.blocked, limiter=self._rank_limiter)

    def blocked(self, e: "Entry") -> str | None:
        """Why the tool of ``e`` cannot be called now: its server is not running (its tools stay listed,
        marked unavailable, until it is back), or its input schema cannot be read; None when it can."""
        ds = self.downstreams.get(e.server) if e.server is not None else None
        if ds is None:
            return None
        if e.raw_name in ds.not_callable:
            return f"'{e.raw_name}' of server '{ds.name}' is not callable: {ds.not_callable[e.raw_name]}"
        return ds.unavailable()

    def _servers_line(self) -> str:
        return "; ".join(f"{d['name']} {d['state']}" + (f" ({d['error']})" if d.get("error") else "")
                         for d in (ds.status() for ds in self.downstreams.values())) or "no servers configured"

    def gate(self, name: str, arguments, session=None) -> tuple[Catalog | None, int | None, Decision]:
        """(catalog, tool index, decision) for a call with these arguments in ``session``'s flow; unknown and
        registry-file tools are refused."""
        catalog = self.catalog
        if catalog is None or name not in catalog.by_name:
            return catalog, None, Decision("refuse", f"unknown tool '{name}': the gateway did not list it "
                                                     "(use search_tools to find tools)")
        i = catalog.by_name[name]
        if catalog.entries[i].server is None:
            return catalog, i, Decision("refuse", f"'{name}' is listed from the registry file of "
                                                  f"'{catalog.entries[i].source}', not served by any MCP server")
        if not isinstance(arguments, dict):
            return catalog, i, Decision("refuse", "arguments must be a JSON object")
        return catalog, i, _decision(catalog, i, self.policy, arguments, self.flows.get(session))

    def record(self, catalog, i, name, arguments, decision: str, reason: str, session=None) -> None:
        if self.audit is None:
            return
        e = None if i is None else catalog.entries[i]
        rule, dims = None, None
        if e is not None and e.server is not None and isinstance(arguments, dict):
            from riskrank_jax.registry.dimensions import describe
            from riskrank_jax.serve.policy import call_dimensions

            rule = _decision(catalog, i, self.policy, arguments, self.flows.get(session)).rule
            row = call_dimensions(_dimension_row(catalog, i), arguments)[0]
            dims = None if row is None else describe(row)
        self.audit.write(tool=name, server=None if e is None else e.server,
                         risk_level=None if i is None else int(catalog.ranker.risk_levels[i]),
                         risk_source=None if i is None else catalog.ranker.risk_source[i],
                         decision=decision, reason=reason, rule=rule, dimensions=dims,
                         session=session_digest(session), arguments_sha256=arguments_digest(arguments))

    async def forward(self, catalog: Catalog, i: int, arguments: dict, progress=None, session=None):
        """The owning server's result; an error result naming the server when it cannot be reached.
        progress: async (progress, total, message) callback for the server's progress notifications; session:
        the key of the MCP session the call came from (its flow records the answer)."""
        import mcp_types as types

        e = catalog.entries[i]
        try:
            result = await self.downstreams[e.server].call(e.raw_name, arguments, progress=progress)
        except DownstreamError as err:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"error: {err}")],
                                        is_error=True)
        self.note_answer(catalog, i, session)
        return result

    def note_answer(self, catalog: Catalog, i: int, session=None) -> None:
        """Tool i answered in ``session``: when it returns untrusted content, later public-sink, destructive
        and secret-source calls of the session ask (policy: session flow)."""
        row = _dimension_row(catalog, i)
        if row is not None and row["untrusted_content"]["value"]:
            self.flows[session] = catalog.entries[i].name

    def servers_status(self) -> dict:
        catalog = self.catalog
        out = []
        for ds in self.downstreams.values():
            d = ds.status()
            if catalog is not None:
                d["risk_histogram"] = catalog.histogram(ds.name)
            out.append(d)
        regs = [{"path": r, "tools": None if catalog is None else
                 sum(1 for e in catalog.entries if e.server is None and e.source == Path(r).stem)}
                for r in self.config.registries]
        return {"servers": out, "registries": regs, "tools": 0 if catalog is None else catalog.ranker.size,
                "rebuilds": self.rebuilds, "policy": dataclasses.asdict(self.policy)}

    # ------------------------------------------------------------------------------------ transports
    def mcp_server(self):
        from riskrank_jax.serve.mcp_app import build_server

        if self._server is None:
            self._server = build_server(self)
        return self._server

    async def serve_stdio(self) -> None:
        server = self.mcp_server()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.start)
            await server.run_stdio_async()
            tg.cancel_scope.cancel()

    async def serve_http(self, host: str, port: int, token: str | None) -> None:
        import uvicorn

        app = self.mcp_server().streamable_http_app(host=host)
        if token is not None:
            app = BearerAuth(app, token)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.start)
            server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
            log(f"serving streamable HTTP on http://{host}:{port}/mcp" + (" (bearer token required)" if token else ""))
            await server.serve()
            tg.cancel_scope.cancel()


class BearerAuth:
    """ASGI middleware: 401 unless ``Authorization: Bearer <token>`` (compared in constant time)."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = b'{"error": "unauthorized: this gateway needs Authorization: Bearer <token>"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


__all__ = ["Gateway", "GatewayOptions", "Catalog", "Entry", "build_catalog", "search",
           "EXPOSE_MODES", "BearerAuth"]
