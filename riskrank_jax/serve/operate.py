"""What it takes to run the HTTP gateway as a team's service: probes, metrics, a drain on SIGTERM, JSON logs.

    app = Operate(HttpGuard(mcp_app, ...), gateway)     # /healthz, /readyz, /metrics answered here
    await app.serve(host, port)                          # uvicorn until SIGTERM / SIGINT, then the drain

* ``/healthz`` — liveness: 200 ``{"alive": true}`` whenever the event loop answers (while draining too);
* ``/readyz`` — readiness: 200 ``{"ready": true}`` once the first catalog is built, 503 ``{"ready": false,
  "why": ...}`` before it and from the moment a drain starts, so a load balancer stops sending;
* ``/metrics`` — Prometheus text (`GatewayMetrics`, names ``riskrank_gateway_*``), the bearer token required
  when the gateway has one.

The three are answered before `serve.http_guard.HttpGuard`, whatever the Host header: Kubernetes and HAProxy
probes name the pod's address, not the gateway's. The probes take no token and say nothing but the state;
every other path goes through the guard.

The drain: the first SIGTERM or SIGINT turns ``/readyz`` 503 and answers every new request 503 with
``Retry-After``; the requests in flight (POST and DELETE; a GET's event stream has no end to wait for) finish,
up to ``http.drain_timeout_s``; then uvicorn stops and the gateway closes its downstream servers, exit status 0.
A second signal cuts the drain short.

Logs: ``runtime.log_format = "json"`` makes `serve.downstream.log` (`log_line`) write one JSON object a line
on stderr — ``time`` (UTC, ms), ``level``, ``logger``, ``message`` and the call's fields — and sends what the
libraries log through Python's logging, and each stdio downstream server's stderr, the same way. stdout is
never touched (the stdio transport).

Why its own module: none of this changes what the gateway decides; it is how an operator runs, watches and
stops it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from riskrank_jax.serve.config import LOG_FORMATS

LOGGER = "riskrank-jax serve"
PREFIX = "riskrank_gateway_"
PROBES = ("/healthz", "/readyz")
METRICS_PATH = "/metrics"
DRAINED_METHODS = ("POST", "DELETE")  # the requests a drain waits for (a GET's event stream has no end)
SHUTDOWN_GRACE_S = 2.0  # after the drain: uvicorn's wait for the connections left (event streams) before it cuts them
RETRY_AFTER_S = 1
CALL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, float("inf"))
STDERR_LINE_MAX = 65536  # a downstream server's stderr line relayed as JSON is cut to this many bytes


# ---------------------------------------------------------------------------------------------- logs

_format = {"value": "text"}
_write_lock = threading.Lock()
_sinks: dict[str, object] = {}  # server -> the write end of the pipe its stderr goes to (json format)


def log_format() -> str:
    return _format["value"]


def log_line(message: str, level: str = "info", fields: dict | None = None, logger: str = LOGGER) -> str:
    """One log line: ``riskrank-jax serve: message`` (text; ``fields`` are not shown), or the JSON object of the
    module docstring (json)."""
    if _format["value"] != "json":
        return f"{LOGGER}: {message}"
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    record = {"time": now, "level": level, "logger": logger, "message": message}
    for k, v in (fields or {}).items():
        if k not in record:
            record[k] = v
    return json.dumps(record, ensure_ascii=False, default=str)


def write_line(line: str) -> None:
    """``line`` on stderr in one write (threads relaying servers' stderr write beside the event loop)."""
    with _write_lock:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def emit(message: str, level: str = "info", **fields) -> None:
    write_line(log_line(message, level, fields))


class JsonFormatter(logging.Formatter):
    """A Python logging record as `log_line`'s JSON object (logger: the record's logger name)."""

    def format(self, record):
        fields = {}
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        return log_line(record.getMessage(), record.levelname.lower(), fields, logger=record.name)


class _LockedHandler(logging.StreamHandler):
    def emit(self, record):
        try:
            write_line(self.format(record))
        except Exception:  # noqa: BLE001 - logging must never fail the caller
            self.handleError(record)


def set_log_format(value: str) -> None:
    """"text" (the default) or "json" (``runtime.log_format``): json also sends Python's logging (warnings
    and above, the libraries' own included) through `JsonFormatter`."""
    if value not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {value!r}")
    if value == _format["value"]:
        return
    _format["value"] = value
    if value == "json":
        handler = _LockedHandler()
        handler.setFormatter(JsonFormatter())
        handler.setLevel(logging.WARNING)
        handler.riskrank_json = True
        logging.getLogger().addHandler(handler)
        logging.captureWarnings(True)
    else:
        root = logging.getLogger()
        for h in [h for h in root.handlers if getattr(h, "riskrank_json", False)]:
            root.removeHandler(h)
        logging.captureWarnings(False)


def stderr_sink(server: str):
    """Where a stdio downstream server's stderr goes: in text format the gateway's stderr as it is now (its file
    descriptor: a stand-in without one, such as a test runner's, gives the process's own stderr); in json format
    a pipe whose lines a thread relays as JSON log lines with ``server`` and ``stream``."""
    if _format["value"] != "json":
        try:
            sys.stderr.fileno()
            return sys.stderr
        except (AttributeError, OSError, ValueError):
            return sys.__stderr__
    sink = _sinks.get(server)
    if sink is None:
        r, w = os.pipe()
        sink = _sinks[server] = os.fdopen(w, "w", buffering=1)
        threading.Thread(target=_relay, args=(os.fdopen(r, "rb"), server), daemon=True,
                         name=f"stderr of {server}").start()
    return sink


def _relay(pipe, server: str) -> None:
    for raw in iter(lambda: pipe.readline(STDERR_LINE_MAX), b""):
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        if text.strip():
            emit(text, "info", server=server, stream="stderr")


# ---------------------------------------------------------------------------------------------- metrics


class GatewayMetrics:
    """The gateway's Prometheus metrics, in a registry of its own (several gateways in one process do not
    clash). Counted as things happen: searches, call decisions, confirmations, downstream calls; read when
    scraped: the catalog's size, each server's restarts and state, the rebuilds. ``gateway``'s downstream servers
    report each call's latency here (their ``metrics``)."""

    def __init__(self, gateway=None):
        self.gateway = gateway
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.searches = Counter(PREFIX + "searches", "search_tools requests, by outcome (ok, error)", ["outcome"],
                                registry=r)
        for outcome in ("ok", "error"):
            self.searches.labels(outcome)
        self.search_seconds = Histogram(PREFIX + "search_seconds", "search_tools latency (seconds)", registry=r)
        self.calls = Counter(PREFIX + "calls", "Call decisions, by decision (allowed, confirmed, refused) and "
                             "the policy rule that decided", ["decision", "rule"], registry=r)
        self.confirmations_asked = Counter(PREFIX + "confirmations_asked", "Calls the user was asked to confirm",
                                           registry=r)
        self.confirmations_granted = Counter(PREFIX + "confirmations_granted", "Calls the user confirmed",
                                             registry=r)
        self.call_seconds = Histogram(PREFIX + "downstream_call_seconds", "Latency of calls forwarded to a "
                                      "downstream server (seconds), failed ones included", ["server"],
                                      buckets=CALL_BUCKETS, registry=r)
        self.call_errors = Counter(PREFIX + "downstream_call_errors", "Forwarded calls that failed to reach or "
                                   "get an answer from their server", ["server"], registry=r)
        self.calls_in_flight = Gauge(PREFIX + "calls_in_flight", "Calls being forwarded to downstream servers now",
                                     registry=r)
        self.http_in_flight = Gauge(PREFIX + "http_requests_in_flight", "HTTP requests in progress (POST and "
                                    "DELETE: what a drain waits for)", registry=r)
        self.draining = Gauge(PREFIX + "draining", "1 while the gateway drains before it stops", registry=r)
        r.register(_ScrapeTime(self))
        for ds in getattr(gateway, "downstreams", {}).values():
            ds.metrics = self

    @contextmanager
    def search(self):
        """Around one search_tools request: counted by outcome (an exception: "error"), its latency observed."""
        start = time.perf_counter()
        try:
            yield
        except Exception:
            self.searches.labels("error").inc()
            raise
        finally:
            self.search_seconds.observe(time.perf_counter() - start)
        self.searches.labels("ok").inc()

    def decided(self, verdict: str, rule: str | None) -> None:
        """A call's decision, once known: verdict "allowed", "confirmed" or "refused"."""
        self.calls.labels(verdict, rule or "none").inc()

    @contextmanager
    def downstream_call(self, server: str):
        """Around one forwarded call: in flight meanwhile, its latency observed, a DownstreamError counted."""
        self.calls_in_flight.inc()
        start = time.perf_counter()
        try:
            yield
        except Exception:
            self.call_errors.labels(server).inc()
            raise
        finally:
            self.call_seconds.labels(server).observe(time.perf_counter() - start)
            self.calls_in_flight.dec()

    def text(self) -> bytes:
        return generate_latest(self.registry)


class _ScrapeTime:
    """The metrics read from the gateway when scraped."""

    def __init__(self, metrics: GatewayMetrics):
        self.metrics = metrics

    def describe(self):
        return []  # read at scrape time: nothing to check for clashes

    def collect(self):
        gw = self.metrics.gateway
        if gw is None:
            return
        catalog = gw.catalog
        tools = GaugeMetricFamily(PREFIX + "catalog_tools", "Tools in the current catalog")
        tools.add_metric([], 0 if catalog is None else catalog.ranker.size)
        yield tools
        rebuilds = CounterMetricFamily(PREFIX + "catalog_rebuilds", "Catalogs built since the gateway started")
        rebuilds.add_metric([], gw.rebuilds)
        yield rebuilds
        restarts = CounterMetricFamily(PREFIX + "downstream_restarts", "Restarts of each downstream server",
                                       labels=["server"])
        up = GaugeMetricFamily(PREFIX + "downstream_up", "1 while a downstream server is up", labels=["server"])
        for name, ds in gw.downstreams.items():
            restarts.add_metric([name], ds.restarts)
            up.add_metric([name], 1 if ds.state == "up" else 0)
        yield restarts
        yield up


# ---------------------------------------------------------------------------------------------- ASGI


def _json_response(status: int, doc: dict, extra=()) -> tuple[int, bytes, list]:
    return status, json.dumps(doc).encode(), [(b"content-type", b"application/json"), *extra]


class Operate:
    """ASGI wrapper of the guarded MCP app: the probes and /metrics, the in-flight count and the drain (see the
    module docstring). ``guard``: the `HttpGuard` around the MCP app (its token check serves /metrics)."""

    def __init__(self, guard, gateway, drain_timeout_s: float | None = None):
        self.guard = guard
        self.gateway = gateway
        self.metrics = getattr(gateway, "metrics", None) or GatewayMetrics(gateway)
        self.drain_timeout_s = float(gateway.settings.http.drain_timeout_s if drain_timeout_s is None
                                     else drain_timeout_s)
        self.in_flight = 0
        self.draining = False
        self.refused_draining = 0
        self._idle = anyio.Event()
        self._drain = anyio.Event()
        self._signals = 0
        self._server = None
        self.metrics.http_in_flight.set_function(lambda: self.in_flight)

    # ------------------------------------------------------------------------------------ answers
    def readiness(self) -> tuple[bool, str | None]:
        if self.draining:
            return False, "draining: the gateway is shutting down"
        if not self.gateway._first_catalog.is_set():
            return False, "building the first catalog"
        if self.gateway.catalog is None:
            return False, "no catalog: no downstream server came up"
        return True, None

    def answer(self, path: str, method: str, headers: dict) -> tuple[int, bytes, list]:
        if method not in ("GET", "HEAD"):
            return _json_response(405, {"error": f"riskrank-jax gateway: {path} answers GET"}, [(b"allow", b"GET, HEAD")])
        if path == "/healthz":
            return _json_response(200, {"alive": True})
        if path == "/readyz":
            ready, why = self.readiness()
            return _json_response(200, {"ready": True}) if ready else _json_response(503, {"ready": False, "why": why})
        if not self.guard.token_ok(headers.get(b"authorization", b"")):
            return _json_response(401, {"error": "riskrank-jax gateway: unauthorized: /metrics needs "
                                                 "Authorization: Bearer <token>"}, [(b"www-authenticate", b"Bearer")])
        return 200, self.metrics.text(), [(b"content-type", CONTENT_TYPE_LATEST.encode())]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.guard(scope, receive, send)
            return
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if path in PROBES or path == METRICS_PATH:
            status, body, headers = self.answer(path, method, dict(scope.get("headers") or []))
            await send({"type": "http.response.start", "status": status,
                        "headers": [*headers, (b"content-length", str(len(body)).encode()),
                                    (b"cache-control", b"no-store")]})
            await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
            return
        if self.draining:
            self.refused_draining += 1
            _, body, headers = _json_response(503, {"error": "riskrank-jax gateway: shutting down: this gateway "
                                                             "takes no new requests; retry (another replica)"})
            await send({"type": "http.response.start", "status": 503,
                        "headers": [*headers, (b"content-length", str(len(body)).encode()),
                                    (b"retry-after", str(RETRY_AFTER_S).encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        if method not in DRAINED_METHODS:
            await self.guard(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.guard(scope, receive, send)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()
                self._idle = anyio.Event()

    # ------------------------------------------------------------------------------------ the drain
    def start_drain(self) -> None:
        """Take no new requests from now on (readyz 503); `serve` then waits for the ones in flight."""
        self._signals += 1
        if self._signals > 1:
            emit("second signal: stopping now, the drain cut short", "warning", in_flight=self.in_flight)
            if self._server is not None:
                self._server.should_exit = self._server.force_exit = True
            return
        self.draining = True
        self.metrics.draining.set(1)
        n = self.in_flight
        emit(f"draining: {n} request{'' if n == 1 else 's'} in flight (new requests are answered 503; at most "
             f"{self.drain_timeout_s:g} s, http.drain_timeout_s)", in_flight=n)
        self._drain.set()

    async def _drain_when_signalled(self, server) -> None:
        await self._drain.wait()
        start = time.monotonic()
        with anyio.move_on_after(self.drain_timeout_s):
            while self.in_flight > 0:
                idle = self._idle
                await idle.wait()
        took = time.monotonic() - start
        if self.in_flight:
            n = self.in_flight
            emit(f"drain timeout: {n} request{'' if n == 1 else 's'} cut after {took:.1f} s", "warning",
                 cut=n, seconds=round(took, 3))
        else:
            emit(f"drained in {took:.1f} s", seconds=round(took, 3))
        server.should_exit = True

    async def serve(self, host: str, port: int) -> None:
        """uvicorn on host:port until SIGTERM or SIGINT, then the drain; returns once uvicorn has stopped (the
        caller then closes the downstream servers)."""
        # deferred: uvicorn serves HTTP only; serve.downstream (stdio gateways too) imports this module
        import uvicorn

        loop = asyncio.get_running_loop()
        operate = self

        class Server(uvicorn.Server):
            def handle_exit(self, sig, frame):  # a signal handler: hand it to the event loop
                loop.call_soon_threadsafe(operate.start_drain)

        json_logs = log_format() == "json"
        config = uvicorn.Config(self, host=host, port=port, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                                **({"log_config": None} if json_logs else {}))
        server = self._server = Server(config)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._drain_when_signalled, server)
            await server.serve()
            tg.cancel_scope.cancel()
        if self.draining:
            emit("stopped taking requests; closing the downstream servers")


__all__ = ["Operate", "GatewayMetrics", "JsonFormatter", "log_line", "set_log_format", "stderr_sink",
           "LOG_FORMATS", "emit"]
