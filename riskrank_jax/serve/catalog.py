"""The gateway's catalog: every tool of the downstream servers and registry files, ranked by one `Ranker`, and
what an agent sees of each (search results, descriptions, schemas, flags, what a call would do).

    catalog = build_catalog([("files", tools)], ["more_tools.json"], RankSettings(), encoder, cache)
    search(catalog, "delete a file", 5, Policy())        # the structured result of search_tools

Every tool is named by its identity ``server.tool`` (`serve.identity`); its risk is assessed as
``riskrank-jax rank`` assesses it, raised for instructions aimed at the agent (`registry.poisoning`).

Why a catalog of one Ranker: search and gating read the same risk levels, computed as ``riskrank-jax rank``
computes them.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass
from typing import Any

from riskrank_jax.errors import RiskRankError
from riskrank_jax.rank.explain import search_explained
from riskrank_jax.rank.ranker import Ranker
from riskrank_jax.registry import load_registry
from riskrank_jax.registry.poisoning import detect, neutralise, sibling_names
from riskrank_jax.serve.config import RankSettings
from riskrank_jax.serve.downstream import log
from riskrank_jax.serve.pins import definition_hash
from riskrank_jax.serve.policy import Policy, ToolState, decide_call


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
    """The tools the gateway ranks and gates: ``ranker`` over ``entries`` (same order)."""

    ranker: Any
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


def build_catalog(server_tools, registries, rank: RankSettings, encoder, cache, trusted_servers=()) -> Catalog:
    """A Catalog over ``server_tools`` [(server name, [MCP tool dicts])] and registry files, ranked as ``rank``
    says (`serve.config.RankSettings`: its saved ranker, risk head, RankConfig, intent leaves).

    Every tool is named ``server.tool`` (a registry file's tools ``stem.tool``; `serve.identity`). Risk is
    assessed as ``riskrank-jax rank`` does; annotations may lower it only for ``trusted_servers`` (or every
    server with ``rank.trust_annotations``); instructions aimed at the agent raise it.
    """
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
    if rank.model is not None:
        ranker = _saved_ranker(rank.model, reg, encoder)
    if ranker is None:
        ranker = Ranker.from_registry(reg, encoder=encoder, cache=cache, config=rank.ranker_config(),
                                      risk_head=rank.risk_head, trust_annotations=rank.trust_annotations,
                                      trusted_sources=trusted)
    else:  # the saved ranker's own config, with the gateway's intent leaves
        ranker = ranker.with_config(rank.ranker_config(ranker.config))
    return Catalog(ranker, tuple(entries), time.time(), time.perf_counter() - t0)


def _saved_ranker(model_dir, reg, encoder):
    """The ranker saved by `fit` in model_dir when it was fitted to exactly these tools, else None (logged)."""
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
    """The structured result of search_tools (see the module docstring): {"query", "k", "request": what the
    request was read as asking (None without the intent stage), "tools", "held_back": per tool held back,
    "held_by" and the gateway's "reason"}; runs the Ranker, so call it from a worker thread. state(i): the
    `ToolState` of tool i now (default: as the catalog assessed it)."""
    r = catalog.ranker
    state = state or (lambda i: catalog_state(catalog, i))
    k = max(1, min(int(k), r.size))
    hits, held_back, request = search_explained(r, query, k)
    tools = []
    for h in hits:
        i = catalog.by_name[h.name]
        e, now = catalog.entries[i], state(i)
        row = {"name": e.name, "description": agent_description(e), "input_schema": agent_schema(e),
               "server": e.server, "risk_level": h.risk_level, "risk_source": h.risk_source,
               "dimensions": dimension_row(catalog, i), "score": round(h.score, 4),
               "call": call_preview(catalog, i, policy, now), "flags": tool_flags(e, now),
               "pin": None if e.server is None else now.pin}
        if now.unavailable is not None:
            row.update(available=False, call=f"unavailable: {now.unavailable}")
        tools.append(row)
    held = [{"name": x["name"], "server": catalog.entries[x["index"]].server, "risk_level": x["risk_level"],
             "risk_source": x["risk_source"], "dimensions": dimension_row(catalog, x["index"]),
             "held_by": x["held_by"], "reason": x["reason"]} for x in held_back]
    out = {"query": query, "k": k, "request": request, "tools": tools, "held_back": held}
    if tool_references:
        out["tool_references"] = [{"type": "tool_reference", "tool_name": t["name"]} for t in tools]
    return out


def agent_description(e: "Entry") -> str:
    """The description the agent sees: the server's, or the gateway's note in its place when it carries
    instructions aimed at the agent (`registry.poisoning.neutralise`)."""
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
    rule = (dimension_row(catalog, i) or {}).get("argument_rule")
    if d.action != "allow" and d.rule == "level" and rule:
        out += f" (allowed without it for one read-only {rule.split(':')[0]} argument)" if rule[:4] != "code" else ""
    return out


def dimension_row(catalog: Catalog, i: int) -> dict | None:
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
    row, level, source = dimension_row(catalog, i), int(r.risk_levels[i]), r.risk_source[i]
    instructions = ((row or {}).get("agent_instructions") or {}).get("source")
    if e.instructions is not None and instructions is None:
        # found in the full schema (nested properties, defaults), which the registry's parameters do not keep
        instructions = f"detector: {', '.join(e.instructions.categories)}"
        row = None if row is None else dict(row, agent_instructions={"value": True, "source": instructions})
        level, source = max(level, 4), f"{source}, agent_instructions ({instructions})"
    return ToolState(e.name, e.server, level, source, row, definition,
                     assessed=e.server is None or definition_hash(definition) == e.hash, pin=pin,
                     unavailable=unavailable, instructions=instructions)


__all__ = ["Entry", "Catalog", "build_catalog", "readable_servers", "search", "agent_description", "agent_schema",
           "tool_flags", "call_preview", "dimension_row", "catalog_state", "FOREIGN_SCHEMA_TEXT"]
