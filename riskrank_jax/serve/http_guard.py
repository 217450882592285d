"""The checks every HTTP request to the gateway passes before the MCP app sees it (one pure ASGI middleware).

    app = HttpGuard(mcp_app, bind_host="127.0.0.1", port=8931, token=token,
                    allowed_hosts=("gw.example.com",), allowed_origins=("https://app.example.com",))

In order, for every bind address (loopback or not):

1. ``Host`` must name this gateway: the bind address with its port; for a loopback or wildcard bind also
   ``127.0.0.1:PORT``, ``localhost:PORT`` and ``[::1]:PORT``; plus the operator's ``allowed_hosts``
   (``NAME`` matches NAME on any port, ``NAME:PORT`` only that port), e.g. a public name behind a proxy.
   Anything else: 421 Misdirected Request. This is the DNS-rebinding defence the MCP spec asks of
   streamable HTTP servers: a page on attacker.example whose name is made to resolve to this machine
   reaches the gateway with ``Host: attacker.example:PORT``.
2. ``Origin``, when a browser sends one, must be ``http(s)://`` an allowed host, or be in
   ``allowed_origins``: 403 otherwise. Clients that are not browsers send none, and pass.
3. With a token: ``Authorization: Bearer <token>``, compared in constant time; 401 with
   ``WWW-Authenticate: Bearer`` otherwise.
4. The body: at most ``max_request_bytes`` (a larger ``Content-Length``, or chunks that add up to more,
   413). The body is read here, chunk by chunk, before the app is called, so an oversized request never
   reaches it and no request holds more than the limit. The bodies of all requests in progress (until each
   is answered) hold at most ``max_buffered_bytes`` together: past that, 503 with ``Retry-After``, so a
   flood of large requests cannot take the memory either.

Every refusal is a JSON ``{"error": ...}`` in the gateway's words. Why not the SDK's own checks: its
DNS-rebinding protection is switched on only for binds to exactly 127.0.0.1, localhost and ::1 (and then
allows any port); a gateway bound to 0.0.0.0, a LAN address or 127.0.0.2 would have none. The gateway
turns the SDK's Host/Origin check off and decides here, for every bind (`sdk_transport_security`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json

from mcp.server.transport_security import TransportSecuritySettings

from riskrank_jax.serve.downstream import log

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024  # all requests in progress together
LOGGED_REFUSALS = 20
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")



def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_host(text: str) -> tuple[str, int | None] | None:
    """"name", "name:port", "[v6]" or "[v6]:port" -> (lower-case name without brackets, port or None); None
    when it cannot be read (a bad port, a stray bracket, user info, a path)."""
    text = text.strip().lower()
    if not text or any(c in text for c in "/@\\ ?#") or any(ord(c) < 0x21 or ord(c) > 0x7e for c in text):
        return None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[1:end], text[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        name, port = text.split(":")
    elif ":" in text:  # a bare IPv6 address (allowed_hosts only; a Host header brackets it)
        name, port = text, None
    else:
        name, port = text, None
    if not name or port is not None and (not port.isdigit() or not 0 < int(port) < 65536):
        return None
    return name.rstrip("."), None if port is None else int(port)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def sdk_transport_security():
    """The SDK's TransportSecuritySettings for an app behind HttpGuard: its Host/Origin check off, so that one
    place decides, for every bind (the SDK's check allows any port, and runs only on three bind hosts). The
    SDK still checks the Content-Type of POSTs and caps bodies at its max_request_body_size."""
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


class HttpGuard:
    """ASGI middleware in front of the gateway's streamable HTTP app (see the module docstring)."""

    def __init__(self, app, *, bind_host: str, port: int, token: str | None = None, allowed_hosts=(),
                 allowed_origins=(), max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES):
        if max_request_bytes <= 0 or max_buffered_bytes < max_request_bytes:
            raise ValueError("max_request_bytes must be positive, and max_buffered_bytes at least as large")
        self.max_buffered_bytes = int(max_buffered_bytes)
        self.buffered = 0  # bytes of request bodies held by the requests in progress
        self.refused = 0
        self.app = app
        self.port = int(port)
        self.max_request_bytes = int(max_request_bytes)
        self._expected = None if token is None else hashlib.sha256(f"Bearer {token}".encode()).digest()
        bind = bind_host.strip("[]").lower()
        exact = {(bind, self.port)}
        if _is_loopback(bind) or bind in WILDCARD_HOSTS:  # a wildcard bind listens on loopback too
            exact |= {(h, self.port) for h in LOOPBACK_HOSTS}
        exact.discard(("", self.port))
        any_port = set()
        for entry in allowed_hosts:
            parsed = split_host(entry)
            if parsed is None:
                raise ValueError(f"allowed host {entry!r} is not NAME or NAME:PORT")
            name, p = parsed
            (any_port.add(name) if p is None else exact.add((name, p)))
        self._exact, self._any_port = frozenset(exact), frozenset(any_port)
        origins = set()
        for o in allowed_origins:
            norm = self._origin_key(o)
            if norm is None:
                raise ValueError(f"allowed origin {o!r} is not scheme://host[:port]")
            origins.add(norm)
        self._origins = frozenset(origins)

    # ------------------------------------------------------------------------------------ the checks
    @property
    def allowed_hosts(self) -> list[str]:
        """The Host values this guard lets through, for messages (NAME alone: any port)."""
        return sorted(f"{_url_host(h)}:{p}" for h, p in self._exact) + sorted(self._any_port)

    def host_allowed(self, host: str | None, default_port: int) -> bool:
        parsed = split_host(host or "")
        if parsed is None:
            return False
        name, port = parsed
        return name in self._any_port or (name, default_port if port is None else port) in self._exact

    @staticmethod
    def _origin_key(origin: str) -> str | None:
        """"scheme://host[:port]" lower-cased with the scheme's default port dropped; None if malformed."""
        scheme, sep, rest = origin.strip().lower().rstrip("/").partition("://")
        if not sep or scheme not in ("http", "https"):
            return None
        parsed = split_host(rest)
        if parsed is None:
            return None
        name, port = parsed
        default = 443 if scheme == "https" else 80
        return f"{scheme}://{_url_host(name)}" + ("" if port in (None, default) else f":{port}")

    def origin_allowed(self, origin: str) -> bool:
        key = self._origin_key(origin)
        if key is None:
            return False  # "null" (a sandboxed page, a file), or not an http(s) origin
        if key in self._origins:
            return True
        scheme, _, rest = key.partition("://")
        return self.host_allowed(rest, 443 if scheme == "https" else 80)

    def token_ok(self, authorization: bytes) -> bool:
        if self._expected is None:
            return True
        # digests of equal length: the comparison's time tells nothing, not even the token's length
        return hmac.compare_digest(hashlib.sha256(authorization).digest(), self._expected)

    # ------------------------------------------------------------------------------------ ASGI
    def refusal(self, scope) -> tuple[int, str, list] | None:
        """(status, error, extra headers) when the request's headers are refused (checks 1-3), else None."""
        headers: dict[bytes, bytes] = {}
        for k, v in scope.get("headers") or []:
            k = k.lower()
            if k in headers and k in (b"host", b"origin", b"authorization", b"content-length"):
                return 400, f"more than one {k.decode()} header", []
            headers[k] = v
        secure = scope.get("scheme") in ("https", "wss")
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.host_allowed(host, 443 if secure else 80):
            self._note(f"refused a request for Host {host!r} (421)")
            return 421, (f"misdirected request: Host {host!r} is not this gateway (allowed: "
                         f"{', '.join(self.allowed_hosts)}; a name behind a proxy needs --allowed-host NAME)"), []
        origin = headers.get(b"origin")
        if origin is not None and not self.origin_allowed(origin.decode("latin-1")):
            return 403, (f"forbidden: Origin {origin.decode('latin-1')!r} may not use this gateway (a browser "
                         "app's origin needs --allowed-origin URL)"), []
        if not self.token_ok(headers.get(b"authorization", b"")):
            return 401, "unauthorized: this gateway needs Authorization: Bearer <token>", [(b"www-authenticate",
                                                                                            b"Bearer")]
        length = headers.get(b"content-length")
        if length is not None and not length.strip().isdigit():
            return 400, "Content-Length is not a number", []
        if length is not None and int(length) > self.max_request_bytes:
            return 413, f"request body larger than {self.max_request_bytes:,} bytes", []
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if refused is not None:
            await self._refuse(scope, send, *refused)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        held = [0]  # bytes of this request's body counted in self.buffered
        try:
            messages = await self._read_body(receive, held)
            if isinstance(messages, tuple):
                await self._refuse(scope, send, *messages)
                return
            if messages is None:
                return  # the client left before sending its body

            async def replay():
                return messages.pop(0) if messages else await receive()

            await self.app(scope, replay, send)
        finally:
            self.buffered -= held[0]

    async def _read_body(self, receive, held: list[int]):
        """The request's ASGI messages up to the end of its body, read before the app runs; (status, error,
        headers) when the body is too large or all bodies held would pass max_buffered_bytes; None when the
        client disconnected."""
        messages, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                if message["type"] == "http.disconnect":
                    return None
                messages.append(message)
                return messages
            n = len(message.get("body", b""))
            size += n
            if size > self.max_request_bytes:
                return 413, f"request body larger than {self.max_request_bytes:,} bytes", []
            if self.buffered + n > self.max_buffered_bytes:
                self._note(f"refused a request: {self.buffered:,} bytes of request bodies held already (503)")
                return 503, (f"busy: the requests in progress hold {self.buffered:,} bytes of bodies "
                             f"(at most {self.max_buffered_bytes:,}); retry later"), [(b"retry-after", b"1")]
            self.buffered += n
            held[0] += n
            messages.append(message)
            if not message.get("more_body", False):
                return messages

    def _note(self, text: str) -> None:
        """A refusal on stderr: the first LOGGED_REFUSALS, then one in every 1,000 (a flood must not flood the log)."""
        self.refused += 1
        if self.refused <= LOGGED_REFUSALS or self.refused % 1000 == 0:
            log(f"{text}; {self.refused:,} request(s) refused so far" if self.refused > 1 else text)

    async def _refuse(self, scope, send, status: int, text: str, extra=()) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": f"riskrank-jax gateway: {text}"}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close"), *extra]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["HttpGuard", "DEFAULT_MAX_REQUEST_BYTES", "DEFAULT_MAX_BUFFERED_BYTES", "sdk_transport_security",
           "split_host"]
