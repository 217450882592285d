"""`riskrank-jax serve`: run the risk-aware MCP gateway (riskrank_jax/serve) over stdio or streamable HTTP.

Why a thin shell: the gateway is a library object (`serve.gateway.Gateway`); this module only reads options.
"""

from __future__ import annotations

import ipaddress
import warnings
from pathlib import Path

import click

from riskrank_jax.cli.options import cache_dir_option, encoder_option, risk_head_option, trust_annotations_option
from riskrank_jax.errors import ConfigError

LOOPBACK_NAMES = ("localhost",)


def parse_host_port(text: str) -> tuple[str, int]:
    """"HOST:PORT" (IPv6 as "[::1]:PORT") -> (host, port); click.BadParameter otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT (e.g. 127.0.0.1:8931), got {text!r}")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path) -> str:
    p = Path(path)
    try:
        token = p.read_text().strip()
    except OSError as e:
        raise ConfigError(f"cannot read the token file ({e.strerror})", p) from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ConfigError("the token must be one line of at least 16 characters without spaces", p, 1)
    return token


@click.command("serve")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help='mcpServers JSON (as Claude Desktop / Cursor use), with optional "registries", "policy" and '
                   '"limits" (timeouts, restart backoff, caps).')
@click.option("--http", "http", default=None, metavar="HOST:PORT",
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio. A HOST other than loopback "
                   "needs --token-file.")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Bearer token clients must send over HTTP (Authorization: Bearer <token>).")
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
@trust_annotations_option
@risk_head_option
@cache_dir_option
@encoder_option
def serve_command(files, config_path, http, token_file, expose, tool_references, audit_log, allow_level, model,
                  trust_annotations, risk_head, cache_dir, encoder):
    """Run a risk-aware MCP gateway in front of your MCP servers (--config) and tool files (FILE...).

    Agents connect to it as to any MCP server. It lists every downstream server's tools, assesses each
    tool's risk as `riskrank-jax rank` does, and exposes search_tools (the risk-aware top k, with the risky
    tools held back and why), call_tool (forwarded to the owning server, gated by the policy) and
    list_servers. See docs/serve.md.
    """
    import anyio

    from riskrank_jax.serve.gateway import Gateway, GatewayOptions

    config = _gateway_config(config_path, files, allow_level)
    host, port, token = _http_settings(http, token_file)
    options = GatewayOptions(expose=expose, tool_references=tool_references, audit_log=audit_log,
                             cache_dir=cache_dir, encoder=encoder, risk_head=risk_head, model=model,
                             trust_annotations=trust_annotations)
    gateway = Gateway(config, options)
    try:
        if http is None:
            anyio.run(gateway.serve_stdio)
        else:
            anyio.run(gateway.serve_http, host, port, token)
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


def _http_settings(http, token_file):
    """(host, port, token) of --http and --token-file (None, None, None for stdio); usage errors otherwise."""
    if http is None:
        if token_file is not None:
            raise click.UsageError("--token-file is for --http; stdio needs no token")
        return None, None, None
    host, port = parse_host_port(http)
    if token_file is None and not is_loopback(host):
        raise click.UsageError(f"--http {http} listens beyond this machine: give --token-file FILE "
                               "(clients then send Authorization: Bearer <token>)")
    return host, port, None if token_file is None else read_token(token_file)


__all__ = ["serve_command"]
