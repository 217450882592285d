"""The parts of a team's gateway service that tests start on 127.0.0.1: HAProxy with deploy/haproxy.cfg.

    cfg = render_haproxy_cfg(bind_port=8931, backend_ports=[9001, 9002])   # the config's text
    with start_haproxy(free_port(), [9001, 9002], workdir=tmp_path) as lb:   # a running HAProxy
        urllib.request.urlopen(lb.url + "/mcp", ...)
    # or: lb = start_haproxy(...); ...; lb.stop()

`render_haproxy_cfg` rewrites only the addresses of deploy/haproxy.cfg (the frontend's bind, the stats bind and
the servers between its BEGIN/END gateway replicas marks; optionally the health checks' interval), so the tests
run the shipped routing, stick table and health checks unchanged. `haproxy_binary()` is None when HAProxy is not
installed (`apt-get install haproxy`; .ci/run installs it): tests skip with `HAPROXY_MISSING`.

Real gateways behind it on other ports than HAProxy's: clients send ``Host: 127.0.0.1:<bind_port>``, which a
gateway bound to 127.0.0.1:<its port> answers only with ``--allowed-host 127.0.0.1:<bind_port>`` (421
otherwise). HAProxy's health checks (GET /readyz) need nothing: the gateway answers probes whatever the Host.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from system_packages import install

REPO = Path(__file__).resolve().parent.parent
HAPROXY_CFG = REPO / "deploy" / "haproxy.cfg"
HAPROXY_MISSING = "HAProxy is not installed (apt-get install haproxy)"
_BEGIN, _END = "# BEGIN gateway replicas", "# END gateway replicas"


def haproxy_binary() -> str | None:
    """The haproxy executable (PATH, then /usr/sbin, where Debian puts it; installed with apt-get on first use
    when missing and allowed, tests/system_packages.py), or None."""
    for attempt in range(2):
        found = shutil.which("haproxy")
        if found:
            return found
        if os.access("/usr/sbin/haproxy", os.X_OK):
            return "/usr/sbin/haproxy"
        if attempt == 0 and install("haproxy") is not None:
            return None
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render_haproxy_cfg(bind_port: int, backend_ports: Sequence[int], *, host: str = "127.0.0.1",
                       stats_port: int | None = None, check_inter_ms: int | None = None,
                       template: str | os.PathLike = HAPROXY_CFG) -> str:
    """deploy/haproxy.cfg (or ``template``) with clients' bind at host:bind_port, one server
    ``gateway-<i>`` at host:port per ``backend_ports`` (i from 1), the stats/metrics frontend at
    host:stats_port (None: a free port) and, when given, health checks every ``check_inter_ms`` (inter and
    downinter; fall/rise unchanged). ValueError when the template lacks a part it rewrites."""
    text = Path(template).read_text()
    if not backend_ports:
        raise ValueError("at least one backend port")
    stats_port = _free_port() if stats_port is None else stats_port
    replaced = {}

    def sub(pattern: str, repl: str, what: str, s: str) -> str:
        out, n = re.subn(pattern, repl, s)
        if n != 1:
            raise ValueError(f"{template}: expected one {what}, found {n}")
        replaced[what] = True
        return out

    text = sub(r'bind "\$\{HAPROXY_BIND-[^}]*\}"', f"bind {host}:{bind_port}", "HAPROXY_BIND bind", text)
    text = sub(r'bind "\$\{HAPROXY_STATS_BIND-[^}]*\}"', f"bind {host}:{stats_port}", "HAPROXY_STATS_BIND bind",
               text)
    block = re.compile(rf"^(?P<indent>[ \t]*){re.escape(_BEGIN)}\n.*?^[ \t]*{re.escape(_END)}$", re.M | re.S)
    m = block.search(text)
    if m is None:
        raise ValueError(f"{template}: no '{_BEGIN}' ... '{_END}' block")
    indent = m.group("indent")
    servers = "\n".join(f"{indent}server gateway-{i} {host}:{port}" for i, port in enumerate(backend_ports, 1))
    text = text[:m.start()] + f"{indent}{_BEGIN}\n{servers}\n{indent}{_END}" + text[m.end():]
    if check_inter_ms is not None:
        text = sub(r"(default-server check) inter \S+ (fastinter \S+ )?downinter \S+",
                   rf"\1 inter {check_inter_ms}ms fastinter {check_inter_ms}ms downinter {check_inter_ms}ms",
                   "default-server check interval", text)
    return text


@dataclass
class Haproxy:
    """A running HAProxy: ``url`` (http://host:port, clients' side), ``stats_url`` (/metrics, /stats),
    ``cfg`` (the rendered file), ``proc``; ``log()`` what it printed so far; ``stop()`` ends it (also as a
    context manager)."""

    proc: subprocess.Popen
    url: str
    stats_url: str
    cfg: Path
    log_path: Path
    _log_file: object = field(repr=False, default=None)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, seconds: float = 5) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # hard stop; SIGUSR1 would wait for the streams to end
            try:
                self.proc.wait(seconds)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "Haproxy":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_haproxy(bind_port: int, backend_ports: Sequence[int], *, workdir: str | os.PathLike,
                  host: str = "127.0.0.1", stats_port: int | None = None, check_inter_ms: int | None = None,
                  template: str | os.PathLike = HAPROXY_CFG, seconds: float = 10) -> Haproxy:
    """Render the config (`render_haproxy_cfg`) into ``workdir``/haproxy.cfg, check it (haproxy -c), start
    ``haproxy -db -f`` on it (log in ``workdir``/haproxy.log) and return once ``bind_port`` accepts
    connections. RuntimeError (with HAProxy's output) when the check fails or HAProxy exits; TimeoutError
    after ``seconds``; FileNotFoundError when HAProxy is not installed."""
    binary = haproxy_binary()
    if binary is None:
        raise FileNotFoundError(HAPROXY_MISSING)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    stats_port = _free_port() if stats_port is None else stats_port
    cfg = workdir / "haproxy.cfg"
    cfg.write_text(render_haproxy_cfg(bind_port, backend_ports, host=host, stats_port=stats_port,
                                      check_inter_ms=check_inter_ms, template=template))
    check = subprocess.run([binary, "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=30)
    if check.returncode != 0:
        raise RuntimeError(f"haproxy -c -f {cfg} failed:\n{check.stdout}{check.stderr}")
    log_path = workdir / "haproxy.log"
    log_file = open(log_path, "wb")
    proc = subprocess.Popen([binary, "-db", "-f", str(cfg)], stdout=log_file, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    lb = Haproxy(proc, f"http://{host}:{bind_port}", f"http://{host}:{stats_port}", cfg, log_path, log_file)
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            lb.stop()
            raise RuntimeError(f"haproxy exited with {proc.returncode}:\n{lb.log()}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((host, bind_port)) == 0:
                return lb
        if time.monotonic() > deadline:
            lb.stop()
            raise TimeoutError(f"haproxy does not listen on {host}:{bind_port} after {seconds} s:\n{lb.log()}")
        time.sleep(0.05)


def stop_haproxy(lb: Haproxy) -> None:
    """Stop a HAProxy started by `start_haproxy` (the same as ``lb.stop()``)."""
    lb.stop()
