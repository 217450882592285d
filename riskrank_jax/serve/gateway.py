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
import sqlite3
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from riskrank_jax.errors import RiskRankError
from riskrank_jax.serve.audit import AuditLog, arguments_digest, installation_key, session_digest
from riskrank_jax.serve.config import GatewayConfig
from riskrank_jax.serve.downstream import Downstream, DownstreamError, log
from riskrank_jax.serve.identity import identity
from riskrank_jax.serve.pins import PinStore, definition_hash
from riskrank_jax.serve.policy import Decision, Policy, ToolState, decide_call

EXPOSE_MODES = ("search", "filtered")
MAX_K = 50
READY_TIMEOUT_S = 60.0
FIRST_CATALOG_WAIT_S = 10.0  # how long servers still starting may hold back the first catalog once one is up
WARM_UP_WORDS = (4, 12, 20, 28, 56, 120)  # one request of each compact encoder row length (8, 16, 24, 32, 64, 128)


@dataclass(frozen=True)
class GatewayOptions:
    """How the gateway runs: expose mode, Anthropic tool_reference blocks, audit log path, embedding cache,
    encoder, risk head, saved ranker (``--model``), whether all annotations are trusted, and the state
    directory (pins and the audit key; None: `serve.pins.resolve_state_dir`)."""

    expose: str = "search"
    tool_references: bool = False
    audit_log: str | None = None
    cache_dir: str | None = None
    encoder: str | None = None
    risk_head: str | None = None
    model: str | None = None
    trust_annotations: bool = False
    state_dir: str | None = None


@dataclass(frozen=True, eq=False)
class Entry:
    """A tool of the catalog: its gateway identity ``server.tool``, owning server (None: listed from a registry
    file, not callable), name on that server, the MCP tool object as listed when the catalog was built, its
    `serve.pins.definition_hash`, and the instructions aimed at the agent found in it
    (`registry.poisoning.Finding`, or None)."""

    name: str
    server: str | None
    raw_name: str
    source: str
    listed: dict
    hash: str = ""
    instructions: Any = None


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


def readable_servers(server_tools) -> tuple[list, dict[str, str]]:
    """(the servers whose tool lists load as a registry, {server: why not} for the others): one server's
    unreadable list is left out alone, the others' catalogs keep updating."""
    from riskrank_jax.registry import load_registry

    ok, bad = [], {}
    for name, tools in server_tools:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if tools:
                    load_registry([(name, {"tools": tools})], separator=".", prefix_all=True)
            ok.append((name, tools))
        except RiskRankError as e:
            bad[name] = str(e)
    return ok, bad


def build_catalog(server_tools, registries, options: GatewayOptions, encoder, cache, trusted_servers=()) -> Catalog:
    """A Catalog over ``server_tools`` [(server name, [MCP tool dicts])] and registry files.

    Every tool is named ``server.tool`` (a registry file's tools ``stem.tool``; `serve.identity`). Risk is
    assessed as ``riskrank-jax rank`` does; annotations may lower it only for ``trusted_servers`` (or every
    server with ``options.trust_annotations``); instructions aimed at the agent raise it.
    """
    from riskrank_jax.rank.ranker import Ranker
    from riskrank_jax.registry import load_registry
    from riskrank_jax.registry.poisoning import detect, sibling_names

    t0 = time.perf_counter()
    inputs = [(name, {"tools": tools}) for name, tools in server_tools if tools]
    inputs += [str(r) for r in registries]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = load_registry(inputs, separator=".", prefix_all=True)
    servers = {name for name, _ in server_tools}
    listed = {(name, t["name"]): t for name, tools in server_tools for t in tools}
    names = sibling_names((t.source, t.raw_name) for t in reg.tools)
    entries = []
    for t in reg.tools:
        if t.source in servers and (t.source, t.raw_name) in listed:
            tool = listed[(t.source, t.raw_name)]
            entries.append(Entry(t.name, t.source, t.raw_name, t.source, tool, definition_hash(tool),
                                 detect(t.raw_name, tool.get("description"), tool.get("inputSchema"),
                                        names[t.source][1], own_tool_names=names[t.source][0])))
        else:
            entries.append(Entry(t.name, None, t.raw_name, t.source,
                                 {"name": t.name, "description": t.description,
                                  "inputSchema": _schema_from_params(t)}))
    trusted = tuple(trusted_servers)
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
    if tuple(reg.texts) != tuple(ranker.tool_texts):  # the texts hold each tool's name words, not its prefix
        log(f"{model_dir}: the saved ranker was fitted to other tools than the servers list now; serving the "
            "zero-shot ranker until they match again")
        return None
    ranker = dataclasses.replace(ranker, tool_names=tuple(reg.names))  # the gateway's identities server.tool
    return ranker if ranker.encoder is not None else dataclasses.replace(ranker, encoder=encoder)  # tuned: its own


# ---------------------------------------------------------------------------------------------- search


def search(catalog: Catalog, query: str, k: int, policy: Policy, tool_references: bool = False,
           state=None) -> dict:
    """The structured result of search_tools (see the module docstring); runs the Ranker, so call it from a
    worker thread. state(i): the `ToolState` of tool i now (default: as the catalog assessed it)."""
    from riskrank_jax.rank.explain import search_with_held_back

    r = catalog.ranker
    state = state or (lambda i: catalog_state(catalog, i))
    k = max(1, min(int(k), r.size))
    hits, held_back = search_with_held_back(r, query, k, zero=catalog.zero)
    tools = []
    for h in hits:
        i = catalog.by_name[h.name]
        e, now = catalog.entries[i], state(i)
        row = {"name": e.name, "description": agent_description(e), "input_schema": agent_schema(e),
               "server": e.server, "risk_level": h.risk_level, "risk_source": h.risk_source,
               "dimensions": _dimension_row(catalog, i), "score": round(h.score, 4),
               "call": call_preview(catalog, i, policy, now), "flags": tool_flags(e, now),
               "pin": None if e.server is None else now.pin}
        if now.unavailable is not None:
            row.update(available=False, call=f"unavailable: {now.unavailable}")
        tools.append(row)
    held = [{"name": x["name"], "server": catalog.entries[x["index"]].server, "risk_level": x["risk_level"],
             "risk_source": x["risk_source"],
             "dimensions": _dimension_row(catalog, x["index"]), "reason": x["reason"]} for x in held_back]
    out = {"query": query, "k": k, "tools": tools, "held_back": held}
    if tool_references:
        out["tool_references"] = [{"type": "tool_reference", "tool_name": t["name"]} for t in tools]
    return out


def agent_description(e: "Entry") -> str:
    """The description the agent sees: the server's, or the gateway's note in its place when it carries
    instructions aimed at the agent (`registry.poisoning.neutralise`)."""
    from riskrank_jax.registry.poisoning import neutralise

    desc = e.listed.get("description") or ""
    return desc if e.instructions is None else neutralise(desc, e.instructions)


FOREIGN_SCHEMA_TEXT = ("description", "title", "examples", "default", "$comment")


def agent_schema(e: "Entry") -> dict:
    """The input schema the agent sees: the server's, or for a tool with instructions aimed at the agent the
    same schema without its free text (descriptions, titles, examples, defaults), where such instructions hide."""
    schema = e.listed.get("inputSchema", {})
    return schema if e.instructions is None else _without_text(schema)


def _without_text(node):
    """A JSON schema without the FOREIGN_SCHEMA_TEXT keywords at any depth (property names are kept: a
    property may be called "description")."""
    if isinstance(node, list):
        return [_without_text(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in ("properties", "patternProperties", "$defs", "definitions") and isinstance(v, dict):
            out[k] = {name: _without_text(sub) for name, sub in v.items()}
        elif k not in FOREIGN_SCHEMA_TEXT:
            out[k] = _without_text(v)
    return out


def tool_flags(e: "Entry", now: ToolState) -> list[str]:
    """What the gateway marks on a tool, in its own words: a changed or quarantined definition, instructions
    aimed at the agent."""
    flags = []
    if e.server is not None and now.pin in ("changed", "unknown"):
        flags.append("definition changed since accepted")
    elif e.server is not None and now.pin == "quarantined":
        flags.append("quarantined until accepted")
    if e.server is not None and now.definition is not None and not now.assessed and now.pin == "accepted":
        flags.append("definition changed, not yet re-assessed")
    if e.instructions is not None:
        flags.append(f"instructions aimed at the agent ({', '.join(e.instructions.categories)}): description "
                     "withheld, calls ask")
    return flags


def call_preview(catalog: Catalog, i: int, policy: Policy, now: ToolState) -> str:
    """What call_tool would do: "allowed", "needs confirmation", "refused" or "not callable"."""
    e = catalog.entries[i]
    if e.server is None:
        return "not callable (listed from a registry file)"
    d = decide_call(policy, now)
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


def catalog_state(catalog: Catalog, i: int, definition=None, pin: str = "accepted",
                  unavailable: str | None = None) -> ToolState:
    """The `ToolState` of tool i: the catalog's assessment, with the definition its server lists now
    (default: the one assessed), its pin status and why it cannot be called now."""
    e, r = catalog.entries[i], catalog.ranker
    definition = e.listed if definition is None else definition
    row, level, source = _dimension_row(catalog, i), int(r.risk_levels[i]), r.risk_source[i]
    instructions = ((row or {}).get("agent_instructions") or {}).get("source")
    if e.instructions is not None and instructions is None:
        # found in the full schema (nested properties, defaults), which the registry's parameters do not keep
        instructions = f"detector: {', '.join(e.instructions.categories)}"
        row = None if row is None else dict(row, agent_instructions={"value": True, "source": instructions})
        level, source = max(level, 4), f"{source}, agent_instructions ({instructions})"
    return ToolState(e.name, e.server, level, source, row, definition,
                     assessed=e.server is None or definition_hash(definition) == e.hash, pin=pin,
                     unavailable=unavailable, instructions=instructions)


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
        self.pins = PinStore(options.state_dir)
        self.audit_key = installation_key(self.pins.dir)
        self.audit = AuditLog(options.audit_log) if options.audit_log else None
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
        server_tools, left_out = readable_servers(server_tools)
        for name, why in left_out.items():
            if self.left_out.get(name) != why:
                log(f"server '{name}': its tools are left out of the catalog: {why}")
        self.left_out = left_out
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
                from riskrank_jax.serve.sdk_hooks import publish_tools_changed

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
        return Gated(catalog, i, tool, decide_call(self.policy, tool, arguments, self.flows.get(session)))

    def record(self, gated: "Gated", name, arguments, verdict: str, reason: str, session=None) -> None:
        """The call's audit line (before anything is forwarded): the decision, its rule, the tool's level, the
        call's dimensions, the kinds of secret found, the pin, and a keyed digest of the arguments."""
        if self.audit is None:
            return
        from riskrank_jax.serve.identity import shown

        t, d = gated.tool, gated.decision
        dims = None
        if t is not None and t.dimensions is not None and isinstance(arguments, dict):
            from riskrank_jax.registry.dimensions import describe
            from riskrank_jax.serve.policy import call_dimensions

            dims = describe(call_dimensions(t.dimensions, arguments)[0])
        self.audit.write(tool=name if t is not None else shown(name), server=None if t is None else t.server,
                         risk_level=None if t is None else t.level, risk_source=None if t is None else t.source,
                         decision=verdict, reason=reason, rule=d.rule, dimensions=dims,
                         pin=None if t is None or t.server is None else t.pin,
                         **({"secrets": list(d.secrets)} if d.secrets else {}),
                         session=session_digest(session), arguments_hmac=arguments_digest(arguments, self.audit_key))

    async def forward(self, catalog: Catalog, i: int, arguments: dict, progress=None, session=None):
        """The owning server's result; an error result naming the server when it cannot be reached.
        progress: async (progress, total, message) callback for the server's progress notifications; session:
        the key of the MCP session the call came from (its flow records the answer)."""
        import mcp_types as types

        from riskrank_jax.serve.results import cap_result

        e = catalog.entries[i]
        ds = self.downstreams[e.server]
        try:
            result = await ds.call(e.raw_name, arguments, progress=progress)
        except DownstreamError as err:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"error: {err}")],
                                        is_error=True)
        self.note_answer(catalog, i, session)
        result, note = cap_result(result, ds.limits.max_result_bytes)
        if note is not None:
            log(f"the result of '{e.name}' was cut: {note}")
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
                for r in self.config.registries]
        return {"servers": out, "registries": regs, "tools": 0 if catalog is None else catalog.ranker.size,
                "rebuilds": self.rebuilds, "policy": dataclasses.asdict(self.policy), "state_dir": str(self.pins.dir)}

    def _pin_rows(self) -> list[dict]:
        try:
            return self.pins.rows()
        except (RiskRankError, sqlite3.Error) as e:
            return [{"server": None, "tool": None, "status": f"unavailable: {e}"}]

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

    async def serve_http(self, host: str, port: int, token: str | None, allowed_hosts=(), allowed_origins=()) -> None:
        """Streamable HTTP at http://host:port/mcp behind `serve.http_guard.HttpGuard`, for every bind address:
        Host (this gateway's names, plus ``allowed_hosts``) and browser Origin (plus ``allowed_origins``)
        checked, the bearer token when one is given, request bodies capped."""
        import uvicorn

        from riskrank_jax.serve.http_guard import HttpGuard, sdk_transport_security

        app = self.mcp_server().streamable_http_app(host=host, transport_security=sdk_transport_security())
        app = HttpGuard(app, bind_host=host, port=port, token=token, allowed_hosts=allowed_hosts,
                        allowed_origins=allowed_origins)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.start)
            server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
            log(f"serving streamable HTTP on http://{host}:{port}/mcp" + (" (bearer token required)" if token else ""))
            await server.serve()
            tg.cancel_scope.cancel()


__all__ = ["Gateway", "GatewayOptions", "Catalog", "Entry", "build_catalog", "search",
           "EXPOSE_MODES"]
