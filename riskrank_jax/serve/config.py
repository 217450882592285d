"""The gateway's settings, one frozen tree (`GatewaySettings`), read from its JSON config file: the
``mcpServers`` JSON of Claude Desktop, Cursor and the SDKs, plus ``registries``, ``policy``, ``limits`` and the
sections ``rank``, ``http`` and ``runtime``; each flag of ``riskrank-jax serve`` then sets one leaf.

    {"mcpServers": {"files": {"command": "python", "args": ["files_server.py"], "env": {}, "cwd": "."},
                    "tickets": {"url": "http://127.0.0.1:8931/mcp", "headers": {"Authorization": "Bearer …"}}},
     "registries": ["more_tools.json"],
     "policy": {"allow_level": 3, "allow": ["files.write_note"], "deny": ["*drop_*"],
                "trusted_servers": ["files"], "confirm": "elicit"},
     "limits": {"call_timeout_s": 120, "stable_after_s": 60},
     "rank": {"model": "my_ranker"}, "http": {"address": "127.0.0.1:8931"}, "runtime": {"audit_log": "audit.jsonl"}}

A server's name (its ``mcpServers`` key) prefixes its tools' identities ``server.tool`` (`serve.identity`):
1-64 characters of ``A-Za-z0-9_-``, never ".". ``policy.quarantine_new_servers`` holds every tool seen for the
first time until a person accepts it (`riskrank-jax pins accept`). Relative paths (``registries``, ``cwd``,
PATH_LEAVES) are relative to the config file. Every error names the file and the line of the offending entry
(`ConfigError`), before anything starts. `settings_view` is the tree as JSON with its secrets hidden
(``serve --show-config``).

Why the same JSON: a user moves the servers of an existing client config behind the gateway unchanged.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlsplit

from riskrank_jax.errors import ConfigError
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, RankConfig
from riskrank_jax.registry.jsontext import line_of, read_json_file
from riskrank_jax.registry.dimensions import DIMENSION_NAMES
from riskrank_jax.serve.identity import server_name_problem
from riskrank_jax.serve.policy import CONFIRM_MODES, Policy

SERVER_KEYS_STDIO = {"command", "args", "env", "cwd", "type", "protocol", "limits"}
SERVER_KEYS_HTTP = {"url", "headers", "type", "protocol", "limits"}
PROTOCOLS = ("auto", "legacy")  # "legacy": the initialize handshake, for servers that mishandle server/discover
TOP_KEYS = {"mcpServers", "registries", "policy", "limits", "rank", "http", "runtime"}
POLICY_KEYS = {"allow_level", "allow", "deny", "trusted_servers", "confirm", "ask_dimensions", "allow_dimensions",
               "session_flow", "quarantine_new_servers"}
HTTP_TYPES = ("http", "streamable-http", "streamableHttp", "streamable_http")
EXPOSE_MODES = ("search", "filtered")
LOG_FORMATS = ("text", "json")  # runtime.log_format (serve.operate)
MAX_SECONDS = 3600.0  # the largest number of seconds a *_s setting of a section takes (http.drain_timeout_s)
NO_TOKEN_HOSTS = ("127.0.0.1", "::1", "localhost")  # exactly these: another loopback address needs a token too
PATH_LEAVES = ("rank.risk_head", "rank.model", "http.token_file", "runtime.audit_log", "runtime.state_dir",
               "runtime.cache_dir")  # relative to the config file when given there
HIDDEN = "(hidden)"  # settings_view's stand-in for a secret value


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


# The gateway's intent hold-back (RankConfig.intent_hold_back; DEFAULT_REGISTRY_CONFIG leaves it off): a must-confirm
# tool is held back when the request asks for no change, 1 − (its highest need) > this (retrieve.intent.held_back).
# 0.5 holds back exactly for the requests search_tools reads as "the request only reads" (every need < 0.5,
# intent.ASKED). Chosen through the gateway over the published servers (docs/serve.md, tests/test_serve_published.py,
# 16 read and 12 write requests): of the values that cannot hold back for a request read as a change (≥ 0.5), 0.5
# and 0.7 keep every write request's tool (10 of 12, as with intent off) and show the read requests' top-5 lists
# the fewest must-confirm tools (1; 5 with the hold-back off, 11 with intent off, 2 at 0.9), with identical results;
# 0.5 is the one whose rule the explanation states.
GATEWAY_HOLD_BACK = 0.5


@dataclass(frozen=True)
class RankSettings:
    """How the catalog ranks and assesses risk: encoder (a name of ``encode.families``: "mpnet", "use", "e5",
    "minilm+use", ...; a local encoder directory or hub id; None: the embedded all-MiniLM-L6-v2), risk_head (a head
    of ``fit-risk``; None: the risk dimensions), model (a ranker saved by ``fit``, served while the tools match the
    ones it was fitted to), trust_annotations (every server's MCP annotations may lower risk, not only
    ``policy.trusted_servers``'), intent (the intent stage: what the request asks for weighs each tool's risk
    penalty, ``retrieve.intent``), intent_hold_back (0: off; else a tool with a must-confirm effect is held back,
    ranked last, for a request that asks for no change: 1 − its highest need exceeds it; GATEWAY_HOLD_BACK), config
    (the zero-shot ranker's `RankConfig`; set from Python only, the file and flags leave it). The two intent leaves
    apply to the ranker served, zero-shot or saved (``ranker_config``)."""

    encoder: str | None = None
    risk_head: str | None = None
    model: str | None = None
    trust_annotations: bool = False
    intent: bool = DEFAULT_REGISTRY_CONFIG.intent
    intent_hold_back: float = GATEWAY_HOLD_BACK
    config: RankConfig = DEFAULT_REGISTRY_CONFIG

    def ranker_config(self, config: RankConfig | None = None) -> RankConfig:
        """``config`` (None: the zero-shot ranker's, ``self.config``) with the intent leaves."""
        config = self.config if config is None else config
        return dataclasses.replace(config, intent=self.intent, intent_hold_back=float(self.intent_hold_back))


@dataclass(frozen=True)
class HttpSettings:
    """Streamable HTTP instead of stdio: address "HOST:PORT" (None: stdio), token_file (the file of the bearer
    token clients must send; the token is read when the gateway starts and never kept in the tree),
    allowed_hosts / allowed_origins (more Host header values and browser Origins, `serve.http_guard`),
    drain_timeout_s (on SIGTERM, how long the requests in flight may take to finish, `serve.operate`)."""

    address: str | None = None
    token_file: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    drain_timeout_s: float = 30.0


@dataclass(frozen=True)
class RuntimeSettings:
    """What the gateway exposes and where it keeps things: expose ("search": search_tools + call_tool +
    list_servers; "filtered": the downstream tools themselves), tool_references (Anthropic tool_reference blocks
    in search results), audit_log (one JSON line per call decision, the audit's export; None: none), state_dir
    (the SQLite state store and its keys; None: `serve.pins.resolve_state_dir`), database (a postgresql:// URL:
    the state store every replica shares, `serve.store`; None: $RISKRANK_DATABASE, else SQLite in state_dir),
    cache_dir (embedding and compile cache; None: the default), log_format ("text", or "json": one JSON object a
    line on stderr, `serve.operate`)."""

    expose: str = "search"
    tool_references: bool = False
    audit_log: str | None = None
    state_dir: str | None = None
    database: str | None = None
    cache_dir: str | None = None
    log_format: str = "text"


@dataclass(frozen=True)
class GatewaySettings:
    """Every setting of the gateway, one tree: servers (downstream MCP servers), registries (files listed and
    searchable but not callable), policy, limits, rank, http, runtime; path: the config file (None: no file)."""

    servers: tuple[ServerSpec, ...] = ()
    registries: tuple[str, ...] = ()
    policy: Policy = field(default_factory=Policy)
    path: str | None = None
    limits: Limits = field(default_factory=Limits)
    rank: RankSettings = field(default_factory=RankSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)


SECTIONS = {"rank": RankSettings, "http": HttpSettings, "runtime": RuntimeSettings}
FILE_LEAVES = {name: tuple(f.name for f in fields(cls) if f.name != "config") for name, cls in SECTIONS.items()}


def host_port(text: str) -> tuple[str, int]:
    """"HOST:PORT" (IPv6 as "[::1]:PORT") -> (host, port); ValueError otherwise."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:8931), got {text!r}")
    return host.strip("[]"), int(port)


def needs_token(host: str) -> bool:
    """Whether serving HTTP on ``host`` needs a token file: every address but exactly 127.0.0.1, ::1 and
    localhost (127.0.0.2, 127.1 or a wildcard reach further, or are easy to mistake for one that does not)."""
    return host not in NO_TOKEN_HOSTS


def with_leaves(settings: GatewaySettings, leaves: dict) -> GatewaySettings:
    """``settings`` with each leaf ``"section.key"`` (or a top-level key) of ``leaves`` set to its value."""
    for leaf, value in leaves.items():
        section, _, key = leaf.rpartition(".")
        if section:
            value = dataclasses.replace(getattr(settings, section), **{key: value})
        settings = dataclasses.replace(settings, **{key if not section else section: value})
    return settings


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


def _section(path, base: Path, doc, name: str):
    """The SECTIONS[name] settings of the file's block ``name``: its keys' types checked, paths made absolute."""
    cls = SECTIONS[name]
    block = doc.get(name, {})
    if not isinstance(block, dict):
        _fail(path, block, f"{name} must be an object", doc)
    allowed = FILE_LEAVES[name]
    unknown = sorted(set(block) - set(allowed))
    if unknown:
        _fail(path, block, f"{name}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})")
    values = {}
    for key, value in block.items():
        default = getattr(cls, key)
        if isinstance(default, bool):
            if not isinstance(value, bool):
                _fail(path, block, f"{name}.{key} must be true or false, got {value!r}")
        elif isinstance(default, float):  # the shares of [0, 1] (rank.intent_hold_back); seconds (*_s)
            top = MAX_SECONDS if key.endswith("_s") else 1
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= top:
                _fail(path, block, f"{name}.{key} must be a number in 0..{top:g}, got {value!r}")
            value = float(value)
        elif isinstance(default, tuple):
            value = _strings(path, value, f"{name}.{key}", block)
        elif not isinstance(value, str) or not value.strip():
            _fail(path, block, f"{name}.{key} must be a non-empty string, got {value!r}")
        if f"{name}.{key}" in PATH_LEAVES or (f"{name}.{key}" == "rank.encoder" and (base / value).is_dir()):
            value = str((base / Path(value).expanduser()).resolve())
        values[key] = value
    settings = cls(**values)
    if name == "runtime" and settings.expose not in EXPOSE_MODES:
        _fail(path, block, f"runtime.expose must be one of {', '.join(EXPOSE_MODES)}, got {settings.expose!r}")
    if name == "runtime" and settings.log_format not in LOG_FORMATS:
        _fail(path, block, f"runtime.log_format must be one of {', '.join(LOG_FORMATS)}, got {settings.log_format!r}")
    if name == "http" and settings.address is not None:
        try:
            host_port(settings.address)
        except ValueError as e:
            _fail(path, block, f"http.address: {e}")
    return settings


def read_config(path) -> GatewaySettings:
    """The GatewaySettings of a JSON file; ConfigError (file:line) on anything malformed or unknown."""
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
    return GatewaySettings(servers, tuple(str((base / r).resolve()) for r in registries), policy, str(path), limits,
                           **{name: _section(path, base, doc, name) for name in SECTIONS})


def _url_view(url: str) -> str:
    """``url`` without what may be a credential: its user and password, its query."""
    parts = urlsplit(url)
    netloc = parts.netloc if "@" not in parts.netloc else f"{HIDDEN}@{parts.netloc.rpartition('@')[2]}"
    return parts._replace(netloc=netloc, query=HIDDEN if parts.query else "", fragment="").geturl()


def _server_view(s: ServerSpec) -> dict:
    view: dict = {"transport": s.transport}
    if s.transport == "stdio":
        view.update(command=s.command, args=list(s.args), env={k: HIDDEN for k, _ in s.env}, cwd=s.cwd)
    else:
        view.update(url=_url_view(s.url), headers={k: HIDDEN for k, _ in s.headers})
    return dict(view, protocol=s.protocol, limits=dict(s.limits))


def settings_view(settings: GatewaySettings, token_from: str | None = None) -> dict:
    """The tree as JSON-ready data (``serve --show-config``) with its secrets hidden: the values of the servers'
    ``env`` and ``headers``, the user, password and query of their URLs and of the state database's URL. The HTTP token is never in the tree:
    ``http.token`` says whether one is set and where it is read from (``token_from``: the flag or the config
    key that named ``http.token_file``). ``rank.config`` is the zero-shot ranker's config as served, the intent
    leaves applied."""
    tree = dataclasses.asdict(settings)
    tree["rank"]["config"] = dataclasses.asdict(settings.rank.ranker_config())
    http = dict(tree["http"], token="none" if settings.http.token_file is None else
                f"set: read from token_file when the gateway starts (token_file given by {token_from or 'Python'})")
    return {"path": settings.path, "servers": {s.name: _server_view(s) for s in settings.servers},
            "registries": list(settings.registries), "policy": tree["policy"], "limits": tree["limits"],
            "rank": tree["rank"], "http": http,
            "runtime": dict(tree["runtime"], database=None if settings.runtime.database is None else
                            _url_view(settings.runtime.database))}


__all__ = ["ServerSpec", "Limits", "RankSettings", "HttpSettings", "RuntimeSettings", "GatewaySettings",
           "read_config", "with_leaves", "settings_view", "host_port", "needs_token", "EXPOSE_MODES", "PATH_LEAVES",
           "GATEWAY_HOLD_BACK"]
