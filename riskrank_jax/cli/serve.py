"""`riskrank-jax serve`: run the risk-aware MCP gateway (riskrank_jax/serve) over stdio or streamable HTTP.

Why a thin shell: the gateway is a library object (`serve.gateway.Gateway`); this module only reads options.
"""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path

import click

from riskrank_jax.cli.options import cache_dir_option, encoder_option, risk_head_option, trust_annotations_option
from riskrank_jax.cli.pins import state_dir_option
from riskrank_jax.errors import ConfigError

NO_TOKEN_HOSTS = ("127.0.0.1", "::1", "localhost")  # exactly these: another loopback address needs a token too
TOKEN_MIN_CHARS = 16


def parse_host_port(text: str) -> tuple[str, int]:
    """"HOST:PORT" (IPv6 as "[::1]:PORT") -> (host, port); click.BadParameter otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT (e.g. 127.0.0.1:8931), got {text!r}")
    return host.strip("[]"), int(port)


def needs_token(host: str) -> bool:
    """Whether serving HTTP on ``host`` needs --token-file: every address but exactly 127.0.0.1, ::1 and
    localhost (127.0.0.2, 127.1 or a wildcard reach further, or are easy to mistake for one that does not)."""
    return host not in NO_TOKEN_HOSTS


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
)


def _http_options(command):
    """HTTP_OPTIONS, in their order in --help."""
    for option in reversed(HTTP_OPTIONS):
        command = option(command)
    return command


@click.command("serve")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help='mcpServers JSON (as Claude Desktop / Cursor use), with optional "registries", "policy" and '
                   '"limits" (timeouts, restart backoff, caps).')
@_http_options
@click.option("--expose", type=click.Choice(["search", "filtered"]), default="search", show_default=True,
              help="search: search_tools + call_tool + list_servers; filtered: the downstream tools themselves, "
                   "minus those above the policy's allow_level.")
@click.option("--tool-references", is_flag=True,
              help='search_tools also returns Anthropic {"type": "tool_reference", "tool_name": ...} blocks.')
@click.option("--audit-log", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Append one JSON line per call decision (never argument values), flushed before forwarding.")
@click.option("--allow-level", type=click.IntRange(1, 5), default=None,
              help="Highest risk level that passes without confirmation (overrides the config's policy; default 3).")
@click.option("--model", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="A ranker saved by `riskrank-jax fit`, used while the tools match the ones it was fitted to.")
@state_dir_option
@trust_annotations_option
@risk_head_option
@cache_dir_option
@encoder_option
def serve_command(files, config_path, http, token_file, allowed_hosts, allowed_origins, expose, tool_references,
                  audit_log, allow_level, model,
                  state_dir, trust_annotations, risk_head, cache_dir, encoder):
    """Run a risk-aware MCP gateway in front of your MCP servers (--config) and tool files (FILE...).

    Agents connect to it as to any MCP server. It lists every downstream server's tools, assesses each
    tool's risk as `riskrank-jax rank` does, and exposes search_tools (the risk-aware top k, with the risky
    tools held back and why), call_tool (forwarded to the owning server, gated by the policy) and
    list_servers. See docs/serve.md.
    """
    import functools

    import anyio

    config = _gateway_config(config_path, files, allow_level)
    host, port, token = _http_settings(http, token_file, allowed_hosts, allowed_origins)  # before the gateway loads

    from riskrank_jax.serve.gateway import Gateway, GatewayOptions

    options = GatewayOptions(expose=expose, tool_references=tool_references, audit_log=audit_log,
                             cache_dir=cache_dir, encoder=encoder, risk_head=risk_head, model=model,
                             trust_annotations=trust_annotations, state_dir=state_dir)
    gateway = Gateway(config, options)
    try:
        if http is None:
            anyio.run(gateway.serve_stdio)
        else:
            anyio.run(functools.partial(gateway.serve_http, host, port, token, allowed_hosts=allowed_hosts,
                                        allowed_origins=allowed_origins))
    except KeyboardInterrupt:
        pass


def _gateway_config(config_path, files, allow_level):
    """The GatewayConfig of --config (if any) plus FILE... and --allow-level; registry files are read here, so
    a bad one fails before anything starts."""
    import dataclasses

    from riskrank_jax.registry import load_registry
    from riskrank_jax.serve.config import GatewayConfig, read_config

    if config_path is None and not files:
        raise click.UsageError("give --config FILE (downstream MCP servers) or registry FILE..., or both")
    config = read_config(config_path) if config_path else GatewayConfig()
    config = dataclasses.replace(config, registries=config.registries + tuple(str(Path(f).resolve()) for f in files))
    if allow_level is not None:
        config = dataclasses.replace(config, policy=dataclasses.replace(config.policy, allow_level=allow_level))
    if config.registries:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load_registry(list(config.registries))
    return config


def _http_settings(http, token_file, allowed_hosts=(), allowed_origins=()):
    """(host, port, token) of --http and --token-file (None, None, None for stdio); usage errors otherwise,
    also for --allowed-host / --allowed-origin values the guard cannot read."""
    from riskrank_jax.serve.http_guard import HttpGuard

    if http is None:
        for given, option in ((token_file, "--token-file"), (allowed_hosts, "--allowed-host"),
                              (allowed_origins, "--allowed-origin")):
            if given:
                raise click.UsageError(f"{option} is for --http; stdio needs none")
        return None, None, None
    host, port = parse_host_port(http)
    if token_file is None and needs_token(host):
        raise click.UsageError(f"--http {http}: any address but exactly 127.0.0.1, ::1 or localhost needs "
                               "--token-file FILE (clients then send Authorization: Bearer <token>)")
    try:
        HttpGuard(None, bind_host=host, port=port, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
    except ValueError as e:
        raise click.UsageError(f"--allowed-host/--allowed-origin: {e}") from None
    return host, port, None if token_file is None else read_token(token_file)


__all__ = ["serve_command"]
