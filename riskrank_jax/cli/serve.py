"""`riskrank-jax serve`: run the risk-aware MCP gateway (riskrank_jax/serve) over stdio or streamable HTTP.

Its settings are one tree (`serve.config.GatewaySettings`): read from --config, then each flag sets the one leaf
it spells (FLAG_LEAVES; a flag given wins over the file), and FILE... are added to the registries.
``--show-config`` prints the resolved tree (secrets hidden) and exits.

Why a thin shell: the gateway is a library object (`serve.gateway.Gateway`); this module only reads options.
"""

from __future__ import annotations

import json
import os
import stat
import warnings
from pathlib import Path

import anyio
import click
from click.core import ParameterSource

from riskrank_jax.cli.options import (cache_dir_option, encoder_option, intent_options, risk_head_option,
                                      trust_annotations_option)
from riskrank_jax.cli.pins import state_dir_option
from riskrank_jax.errors import ConfigError

TOKEN_MIN_CHARS = 16
FLAG_LEAVES = {  # each flag of `serve` and the leaf of serve.config.GatewaySettings it sets
    "--http": "http.address", "--token-file": "http.token_file", "--allowed-host": "http.allowed_hosts",
    "--allowed-origin": "http.allowed_origins", "--expose": "runtime.expose",
    "--tool-references": "runtime.tool_references", "--audit-log": "runtime.audit_log",
    "--state-dir": "runtime.state_dir", "--database": "runtime.database", "--cache-dir": "runtime.cache_dir", "--allow-level": "policy.allow_level",
    "--model": "rank.model", "--risk-head": "rank.risk_head", "--encoder": "rank.encoder",
    "--trust-annotations": "rank.trust_annotations", "--intent": "rank.intent",
    "--intent-hold-back": "rank.intent_hold_back", "--drain-timeout": "http.drain_timeout_s",
    "--log-format": "runtime.log_format"}


def read_token(path) -> str:
    """The bearer token in ``path``: a regular file (a symlink to one is followed) that only its owner may read
    or write, holding one line of at least 16 characters without spaces; ConfigError naming the file
    otherwise. The checks are made on the file opened, not on its name, so it cannot be swapped between."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the start
    except OSError as e:
        raise ConfigError(f"cannot read the token file ({e.strerror})", p) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError("the token file is not a regular file", p)
        data = f.read(4096 + 1)
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        token = ""
    if len(data) > 4096 or len(token) < TOKEN_MIN_CHARS or any(c.isspace() or not c.isprintable() for c in token):
        raise ConfigError(f"the token must be one line of at least {TOKEN_MIN_CHARS} characters without spaces", p, 1)
    if os.name == "posix" and st.st_mode & 0o077:
        raise ConfigError(f"the token file can be read or written by others than its owner (mode "
                          f"{stat.S_IMODE(st.st_mode):04o}); make it private: chmod 600 {p}", p)
    return token


HTTP_OPTIONS = (
    click.option("--http", "http", default=None, metavar="HOST:PORT",
                 help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio. Any HOST other than exactly "
                      "127.0.0.1, ::1 or localhost needs --token-file. Requests must name this gateway in their "
                      "Host header (421 otherwise) and, from a browser, come from an allowed Origin (403)."),
    click.option("--token-file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                 help="Bearer token clients must send over HTTP (Authorization: Bearer <token>): one line of at "
                      "least 16 characters, in a file only its owner can read (chmod 600)."),
    click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME[:PORT]",
                 help="Another Host header value the HTTP gateway answers to, e.g. its DNS name behind a proxy "
                      "(NAME alone: any port). The bind address with its port, and for a loopback bind "
                      "127.0.0.1, localhost and [::1] with that port, are always allowed. Repeatable."),
    click.option("--allowed-origin", "allowed_origins", multiple=True, metavar="URL",
                 help="A browser Origin (scheme://host[:port]) allowed to use the HTTP gateway, besides "
                      "http(s)://<an allowed host>. Requests without Origin (not from a browser) pass. Repeatable."),
    click.option("--drain-timeout", "drain_timeout", type=click.FloatRange(0, 3600), default=None, metavar="SECONDS",
                 help="On SIGTERM or SIGINT the HTTP gateway drains: /readyz turns 503, new requests get 503 with "
                      "Retry-After, and the requests in flight may finish for up to SECONDS (default 30) before it "
                      "stops and closes the downstream servers. /healthz, /readyz and /metrics: docs/serve.md."),
)


def _http_options(command):
    """HTTP_OPTIONS, in their order in --help."""
    for option in reversed(HTTP_OPTIONS):
        command = option(command)
    return command


@click.command("serve")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help='mcpServers JSON (as Claude Desktop / Cursor use), with optional "registries", "policy", '
                   '"limits" (timeouts, restart backoff, caps), "rank", "http" and "runtime" (docs/serve.md); '
                   'each flag below overrides the one setting it names.')
@click.option("--show-config", is_flag=True,
              help="Print the resolved settings as JSON (the config, then the flags; secrets hidden) and exit "
                   "without starting any server.")
@_http_options
@click.option("--expose", type=click.Choice(["search", "filtered"]), default=None,
              help="search (default): search_tools + call_tool + list_servers; filtered: the downstream tools "
                   "themselves, minus those above the policy's allow_level.")
@click.option("--tool-references", is_flag=True, default=None,
              help='search_tools also returns Anthropic {"type": "tool_reference", "tool_name": ...} blocks.')
@click.option("--audit-log", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also append one JSON line per call decision (never argument values) to FILE, flushed before "
                   "forwarding; the state store keeps every record with its outcome (riskrank-jax audit).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default=None,
              help="Log lines on stderr as text (default) or as one JSON object a line (time, level, logger, "
                   "message, ...), downstream servers' stderr included.")
@click.option("--allow-level", type=click.IntRange(1, 5), default=None,
              help="Highest risk level that passes without confirmation (overrides the config's policy; default 3).")
@click.option("--model", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="A ranker saved by `riskrank-jax fit`, used while the tools match the ones it was fitted to.")
@intent_options("0.5: the requests read as only reading (docs/serve.md)")  # serve.config.GATEWAY_HOLD_BACK
@state_dir_option
@trust_annotations_option
@risk_head_option
@cache_dir_option
@encoder_option
def serve_command(files, config_path, show_config, **flags):
    """Run a risk-aware MCP gateway in front of your MCP servers (--config) and tool files (FILE...).

    Agents connect to it as to any MCP server. It lists every downstream server's tools, assesses each
    tool's risk as `riskrank-jax rank` does, and exposes search_tools (the risk-aware top k, with the risky
    tools held back and why), call_tool (forwarded to the owning server, gated by the policy) and
    list_servers. See docs/serve.md.
    """
    # deferred: serve.config loads jax (through riskrank_jax.registry); every other command imports this module
    from riskrank_jax.serve.config import settings_view

    settings, spell = _settings(config_path, files, flags)
    token = None if settings.http.token_file is None else read_token(settings.http.token_file)
    if show_config:
        click.echo(json.dumps(settings_view(settings, spell("http.token_file")), indent=2))
        return
    # deferred: the gateway loads the MCP SDK and the ranker, which --show-config does not need
    from riskrank_jax.serve.gateway import Gateway

    gateway = Gateway(settings)
    try:
        if settings.http.address is None:
            anyio.run(gateway.serve_stdio)
        else:
            anyio.run(gateway.serve_http, token)
    except KeyboardInterrupt:
        pass


def _settings(config_path, files, flags):
    """(the gateway's settings, spell): --config (if any), then each flag given (FLAG_LEAVES), then FILE...
    added to the registries; checked, and the registry files read, before anything starts. spell(leaf): how
    the user set it ("--flag", or the config key when the file set it)."""
    # deferred: the registry loader loads jax; every other command imports this module
    from riskrank_jax.registry import load_registry
    # deferred: serve.config loads jax (through riskrank_jax.registry); every other command imports this module
    from riskrank_jax.serve.config import GatewaySettings, read_config, with_leaves

    if config_path is None and not files:
        raise click.UsageError("give --config FILE (downstream MCP servers) or registry FILE..., or both")
    from_file = read_config(config_path) if config_path else GatewaySettings()
    ctx = click.get_current_context()
    spelling = {p.name: p.opts[0] for p in ctx.command.params if p.opts[0] in FLAG_LEAVES}
    given = {FLAG_LEAVES[spelling[name]]: value for name, value in flags.items()  # --no-intent and 0 count
             if name in spelling and ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)}
    settings = with_leaves(from_file, {**given, "registries": from_file.registries
                                       + tuple(str(Path(f).resolve()) for f in files)})
    flag_of = {leaf: flag for flag, leaf in FLAG_LEAVES.items()}

    def spell(leaf: str) -> str:
        if leaf in given or _leaf(from_file, leaf) == _leaf(GatewaySettings(), leaf):
            return flag_of[leaf]
        return f'"{leaf}" of {config_path}'

    _check_http(settings, spell)
    if settings.registries:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load_registry(list(settings.registries))
    return settings, spell


def _leaf(settings, leaf: str):
    section, _, key = leaf.partition(".")
    return getattr(getattr(settings, section), key)


def _check_http(settings, spell) -> None:
    """Usage errors for HTTP settings that cannot serve, naming each leaf as the user spelled it: a token file
    or allowed hosts / origins without an address, an address that is not HOST:PORT, an address beyond exactly
    127.0.0.1, ::1 and localhost without a token file, allowed hosts / origins the guard cannot read."""
    # deferred: serve.config loads jax (through riskrank_jax.registry); every other command imports this module
    from riskrank_jax.serve.config import host_port, needs_token
    # deferred: serve.http_guard loads the MCP SDK; every other command imports this module
    from riskrank_jax.serve.http_guard import HttpGuard

    http = settings.http
    if http.address is None:
        for leaf in ("http.token_file", "http.allowed_hosts", "http.allowed_origins"):
            if _leaf(settings, leaf):
                raise click.UsageError(f"{spell(leaf)} is for {spell('http.address')}; stdio needs none")
        return
    try:
        host, port = host_port(http.address)
    except ValueError as e:
        raise click.UsageError(f"{spell('http.address')}: {e}") from None
    if http.token_file is None and needs_token(host):
        raise click.UsageError(f"{spell('http.address')} {http.address}: any address but exactly 127.0.0.1, ::1 or "
                               f"localhost needs {spell('http.token_file')} FILE (clients then send Authorization: "
                               "Bearer <token>)")
    try:
        HttpGuard(None, bind_host=host, port=port, allowed_hosts=http.allowed_hosts,
                  allowed_origins=http.allowed_origins)
    except ValueError as e:
        raise click.UsageError(f"{spell('http.allowed_hosts')}/{spell('http.allowed_origins')}: {e}") from None


__all__ = ["serve_command", "read_token", "FLAG_LEAVES"]
