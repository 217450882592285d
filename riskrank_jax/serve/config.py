"""The gateway's config: the ``mcpServers`` JSON of Claude Desktop, Cursor and the SDKs, plus ``registries``
and a ``policy`` block.

    {"mcpServers": {"files": {"command": "python", "args": ["files_server.py"], "env": {}, "cwd": "."},
                    "tickets": {"url": "http://127.0.0.1:8931/mcp", "headers": {"Authorization": "Bearer …"}}},
     "registries": ["more_tools.json"],
     "policy": {"allow_level": 3, "allow": ["files.write_note"], "deny": ["*drop_*"],
                "trusted_servers": ["files"], "confirm": "elicit"},
     "limits": {"call_timeout_s": 120, "stable_after_s": 60}}

A server's name (its ``mcpServers`` key) prefixes its tools' identities ``server.tool`` (`serve.identity`):
1-64 characters of ``A-Za-z0-9_-``, never ".". ``policy.quarantine_new_servers`` holds every tool seen for the
first time until a person accepts it (`riskrank-jax pins accept`). Relative paths (``registries``, ``cwd``) are
relative to the config file. Every error names the file and the line of the offending entry (`ConfigError`),
before anything starts.

Why the same JSON: a user moves the servers of an existing client config behind the gateway unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from riskrank_jax.errors import ConfigError
from riskrank_jax.registry.jsontext import line_of, read_json_file
from riskrank_jax.registry.dimensions import DIMENSION_NAMES
from riskrank_jax.serve.identity import server_name_problem
from riskrank_jax.serve.policy import CONFIRM_MODES, Policy

SERVER_KEYS_STDIO = {"command", "args", "env", "cwd", "type", "protocol", "limits"}
SERVER_KEYS_HTTP = {"url", "headers", "type", "protocol", "limits"}
PROTOCOLS = ("auto", "legacy")  # "legacy": the initialize handshake, for servers that mishandle server/discover
TOP_KEYS = {"mcpServers", "registries", "policy", "limits"}
POLICY_KEYS = {"allow_level", "allow", "deny", "trusted_servers", "confirm", "ask_dimensions", "allow_dimensions",
               "session_flow", "quarantine_new_servers"}
HTTP_TYPES = ("http", "streamable-http", "streamableHttp", "streamable_http")


@dataclass(frozen=True)
class ServerSpec:
    """One downstream MCP server: stdio (command, args, env, cwd) or streamable HTTP (url, headers)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    protocol: str = "auto"
    limits: tuple[tuple[str, float], ...] = ()  # this server's overrides of the config's limits

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def where(self) -> str:
        return " ".join([self.command, *self.args]) if self.command is not None else str(self.url)


@dataclass(frozen=True)
class Limits:
    """How the gateway treats its downstream servers (the config's ``limits`` block): timeouts, restart
    backoff, and caps that keep one server's oversized listing from flooding the catalog."""

    connect_timeout_s: float = 30.0  # handshake and the first tools/list; also a ping's answer
    call_timeout_s: float = 120.0  # a tools/call with no answer by then fails, naming the server
    backoff_first_s: float = 0.5  # first restart delay; doubles on each failure ...
    backoff_max_s: float = 30.0  # ... up to this
    stable_after_s: float = 60.0  # the delay resets only after a server stayed up this long
    ping_every_s: float = 2.0  # liveness check of servers without subscriptions/listen
    relist_min_interval_s: float = 1.0  # list_changed re-lists at most this often per server
    max_tools_per_server: int = 2000  # tools kept per server; the rest is reported
    max_description_chars: int = 8192  # longer tool descriptions are cut, with a warning
    max_result_bytes: int = 1_048_576  # a call's result (content + structured content) is cut to this, with a note
    max_message_bytes: int = 8_388_608  # a larger JSON-RPC message from a server is dropped unread, its call failed


LIMIT_KEYS = {f.name for f in fields(Limits)}


@dataclass(frozen=True)
class GatewayConfig:
    """servers: downstream MCP servers; registries: files listed and searchable but not callable; policy;
    limits; path: the config file (None when the gateway serves registry files only)."""

    servers: tuple[ServerSpec, ...] = ()
    registries: tuple[str, ...] = ()
    policy: Policy = field(default_factory=Policy)
    path: str | None = None
    limits: Limits = field(default_factory=Limits)


def _fail(path, obj, message, parent=None):
    raise ConfigError(message, path, line_of(obj) or line_of(parent))


def _strings(path, value, what, parent) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        _fail(path, value, f"{what} must be a list of strings", parent)
    return tuple(value)


def _string_map(path, value, what, parent) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        _fail(path, value, f"{what} must be an object of strings", parent)
    return tuple(value.items())


def _server(path, base: Path, name: str, entry, parent) -> ServerSpec:
    if not isinstance(entry, dict):
        _fail(path, entry, f"mcpServers.{name} must be an object with \"command\" (stdio) or \"url\" (HTTP)", parent)
    if (problem := server_name_problem(name)) is not None:
        _fail(path, entry, f"mcpServers: {problem}", parent)
    kind = entry.get("type")
    if kind is not None and kind not in ("stdio", *HTTP_TYPES):
        _fail(path, entry, f"mcpServers.{name}.type {kind!r} is not supported (stdio or streamable HTTP; the "
                           "gateway does not speak the deprecated SSE transport)")
    protocol = entry.get("protocol", "auto")
    if protocol not in PROTOCOLS:
        _fail(path, entry, f"mcpServers.{name}.protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    limits = tuple(_limit_values(path, entry["limits"], f"mcpServers.{name}.limits", entry).items()) \
        if "limits" in entry else ()
    has_cmd, has_url = "command" in entry, "url" in entry
    if has_cmd == has_url:
        _fail(path, entry, f"mcpServers.{name} needs exactly one of \"command\" (stdio) and \"url\" (HTTP)")
    allowed = SERVER_KEYS_STDIO if has_cmd else SERVER_KEYS_HTTP
    unknown = sorted(set(entry) - allowed)
    if unknown:
        _fail(path, entry, f"mcpServers.{name}: unknown key(s) {', '.join(unknown)} for a "
                           f"{'stdio' if has_cmd else 'HTTP'} server (allowed: {', '.join(sorted(allowed))})")
    if has_cmd:
        if not isinstance(entry["command"], str) or not entry["command"].strip():
            _fail(path, entry, f"mcpServers.{name}.command must be a non-empty string")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            _fail(path, entry, f"mcpServers.{name}.cwd must be a string")
        if cwd is not None and not (base / cwd).is_dir():
            _fail(path, entry, f"mcpServers.{name}.cwd: no such directory {base / cwd}")
        return ServerSpec(name, command=entry["command"],
                          args=_strings(path, entry.get("args", []), f"mcpServers.{name}.args", entry),
                          env=_string_map(path, entry.get("env", {}), f"mcpServers.{name}.env", entry),
                          cwd=None if cwd is None else str((base / cwd).resolve()), protocol=protocol,
                          limits=limits)
    url = entry["url"]
    if not isinstance(url, str) or not re.match(r"https?://", url):
        _fail(path, entry, f"mcpServers.{name}.url must be an http:// or https:// URL, got {url!r}")
    return ServerSpec(name, url=url, headers=_string_map(path, entry.get("headers", {}),
                                                          f"mcpServers.{name}.headers", entry), protocol=protocol,
                      limits=limits)


def _policy(path, block, parent) -> Policy:
    if not isinstance(block, dict):
        _fail(path, block, "policy must be an object", parent)
    unknown = sorted(set(block) - POLICY_KEYS)
    if unknown:
        _fail(path, block, f"policy: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(POLICY_KEYS))})")
    level = block.get("allow_level", Policy.allow_level)
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 5:
        _fail(path, block, f"policy.allow_level must be an integer 1..5, got {level!r}")
    confirm = block.get("confirm", Policy.confirm)
    if confirm not in CONFIRM_MODES:
        _fail(path, block, f"policy.confirm must be one of {', '.join(CONFIRM_MODES)}, got {confirm!r}")
    flags = {k: block.get(k, getattr(Policy, k)) for k in ("session_flow", "quarantine_new_servers")}
    for k, v in flags.items():
        if not isinstance(v, bool):
            _fail(path, block, f"policy.{k} must be true or false, got {v!r}")
    dims = {k: _strings(path, block.get(k, []), f"policy.{k}", block) for k in ("ask_dimensions", "allow_dimensions")}
    for k, names in dims.items():
        bad = [d for d in names if d not in DIMENSION_NAMES]
        if bad:
            _fail(path, block, f"policy.{k}: unknown dimension(s) {', '.join(bad)} (known: {', '.join(DIMENSION_NAMES)})")
    return Policy(allow_level=level, confirm=confirm, **flags, **dims,
                  **{k: _strings(path, block.get(k, []), f"policy.{k}", block)
                     for k in ("allow", "deny", "trusted_servers")})


def _limit_values(path, block, what, parent) -> dict:
    if not isinstance(block, dict):
        _fail(path, block, f"{what} must be an object", parent)
    unknown = sorted(set(block) - LIMIT_KEYS)
    if unknown:
        _fail(path, block, f"{what}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(LIMIT_KEYS))})")
    for k, v in block.items():
        integer = isinstance(getattr(Limits, k), int)
        if isinstance(v, bool) or not isinstance(v, int if integer else (int, float)) or v <= 0:
            _fail(path, block, f"{what}.{k} must be a positive {'integer' if integer else 'number'}, got {v!r}")
    return dict(block)


def read_config(path) -> GatewayConfig:
    """The GatewayConfig of a JSON file; ConfigError (file:line) on anything malformed or unknown."""
    path = Path(path)
    doc = read_json_file(path)  # MalformedJSONError with file, line and column
    if not isinstance(doc, dict):
        raise ConfigError(f"a gateway config is a JSON object with \"mcpServers\", got a JSON {type(doc).__name__}",
                          path, 1)
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        _fail(path, doc, f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(TOP_KEYS))})")
    base = path.resolve().parent
    servers_doc = doc.get("mcpServers", {})
    if not isinstance(servers_doc, dict):
        _fail(path, servers_doc, "mcpServers must be an object of server name -> server", doc)
    servers = tuple(_server(path, base, name, entry, servers_doc) for name, entry in servers_doc.items())
    registries = _strings(path, doc.get("registries", []), "registries", doc)
    for r in registries:
        if not (base / r).is_file():
            _fail(path, doc, f"registries: no such file {base / r}")
    policy = _policy(path, doc.get("policy", {}), doc)
    names = {s.name for s in servers}
    for t in policy.trusted_servers:
        if t not in names:
            _fail(path, doc.get("policy"), f"policy.trusted_servers names {t!r}, which is not in mcpServers "
                                           f"({', '.join(sorted(names)) or 'none'})")
    if not servers and not registries:
        _fail(path, doc, "no mcpServers and no registries: nothing to serve")
    limits = Limits(**_limit_values(path, doc.get("limits", {}), "limits", doc))
    return GatewayConfig(servers, tuple(str((base / r).resolve()) for r in registries), policy, str(path), limits)


__all__ = ["ServerSpec", "GatewayConfig", "Limits", "read_config"]
