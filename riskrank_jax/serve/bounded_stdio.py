"""Downstream transports that never hold more than ``limits.max_message_bytes`` of one message.

    async with stdio_client(params, max_message_bytes=8 << 20, label="files", on_dropped=warn) as streams: ...
    http = http_client(headers, max_message_bytes=8 << 20, label="tickets")   # for streamable_http_client

The SDK's stdio client (mcp.client.stdio) decodes the server's stdout to text and joins it until a newline
(``buffer + chunk`` on every read: quadratic in the line's length), then validates the whole line; a server
that writes a 50 MB result makes the gateway hold it several times over. Its HTTP client reads a JSON
response whole (``response.aread()``); only SSE events are capped (``max_sse_event_size``, 1 MiB by
default, which the gateway sets to ``max_message_bytes``).

Here, stdout is read in chunks of bytes into the current line; a line that grows past the limit is not
kept: the rest of it is counted and discarded up to its newline, so the reader holds at most the limit plus
one chunk, whatever the server writes. What can be read of a dropped message (its start, its end) names it:

* a response to one of the gateway's requests, with its id: the request fails at once with a JSON-RPC error
  "server 'x' sent a message of more than N bytes (limits.max_message_bytes); dropped" (code -32603, data
  ``{"riskrank_jax": "message_too_large", "bytes": M, "limit": N}``);
* anything else (a notification, a request from the server, an id that cannot be read): dropped, reported
  through ``on_dropped``; a call whose answer it was runs into its timeout.

The HTTP client caps each non-SSE response body at the limit, counting decoded bytes (a gzip bomb is cut
when its output passes the limit, not after).

Everything else (spawning, the shutdown sequence, the stdin writer) is the SDK's, reused from
mcp.client.stdio through `serve.sdk_hooks`. Lines are split on the byte b"\\n", which for UTF-8 (the default and what the gateway
uses) is the same as splitting the decoded text.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TextIO

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
from mcp.shared.message import SessionMessage

from riskrank_jax.serve import sdk_hooks

READ_CHUNK = 65536
HEAD_BYTES = 4096  # of a dropped message, what is kept to name it: its start ...
TAIL_BYTES = 4096  # ... and its end
TOO_LARGE = "message_too_large"

_OPEN = re.compile(rb"\s*\{")
_SCALAR = rb'"[^"\\]{0,256}"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|null|true|false'  # a short top-level value
_MEMBER = re.compile(rb'\s*"([^"\\]{1,64})"\s*:\s*(' + _SCALAR + rb')?\s*')
_TAIL_ID = re.compile(rb'[{,]\s*"id"\s*:\s*(-?\d+|"[^"\\]{0,256}")\s*\}\s*$')


@dataclass(frozen=True)
class Dropped:
    """A message dropped for its size: how many bytes it had, its JSON-RPC id (None: not read) and whether it
    is a response (has "result" or "error")."""

    size: int
    limit: int
    id: int | str | None
    response: bool

    @property
    def what(self) -> str:
        return (f"sent a message of more than {self.limit:,} bytes ({self.size:,} bytes; limits.max_message_bytes); "
                "dropped")

    def describe(self, label: str) -> str:
        return f"server '{label}' {self.what}"


def name_message(head: bytes, tail: bytes, size: int, limit: int) -> Dropped:
    """The id and kind of a JSON-RPC message from its first and last bytes: the top-level members that open it
    ("jsonrpc", "id", ... up to the first object or long string) and, when the id is not among them, a
    top-level "id" just before the closing brace (the TypeScript SDK writes ``{"result": ..., "jsonrpc":
    "2.0", "id": 5}``)."""
    simple, first_complex = {}, None
    m = _OPEN.match(head)
    pos = m.end() if m else -1
    while pos >= 0:
        m = _MEMBER.match(head, pos)
        if not m:
            break
        key, value = m.group(1).decode(), m.group(2)
        if value is None:
            first_complex = key
            break
        simple.setdefault(key, value)
        pos = m.end()
        if head[pos:pos + 1] != b",":
            break
        pos += 1
    keys = set(simple) | {first_complex}
    raw_id = simple.get("id")
    if raw_id is None and pos >= 0:
        t = _TAIL_ID.search(tail.rstrip(b"\r"))
        raw_id = t.group(1) if t else None
    try:
        msg_id = None if raw_id is None else json.loads(raw_id)
    except ValueError:
        msg_id = None
    if not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool):
        msg_id = None
    response = bool(keys & {"result", "error"}) and "method" not in keys
    return Dropped(size, limit, msg_id, response)


class _Dropping:
    """The state of a line being discarded: its first HEAD_BYTES, its last TAIL_BYTES, its length."""

    def __init__(self, start: bytes | bytearray, limit: int):
        self.head = bytes(start[:HEAD_BYTES])
        self.tail = bytes(start[-TAIL_BYTES:])
        self.size = len(start)
        self.limit = limit

    def feed(self, piece) -> None:
        self.size += len(piece)
        if len(self.head) < HEAD_BYTES:
            self.head += bytes(piece[:HEAD_BYTES - len(self.head)])
        self.tail = (self.tail + bytes(piece[-TAIL_BYTES:]))[-TAIL_BYTES:]

    def finish(self) -> Dropped:
        return name_message(self.head, self.tail, self.size, self.limit)


def too_large_error(dropped: Dropped, label: str):
    """The JSON-RPC error that answers, in the gateway's words, the request whose response was dropped."""
    error = types.ErrorData(code=types.INTERNAL_ERROR, message=dropped.describe(label),
                            data={"riskrank_jax": TOO_LARGE, "bytes": dropped.size, "limit": dropped.limit})
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=dropped.id, error=error))


def is_too_large(error) -> bool:
    """Whether an MCPError is this module's answer to a dropped response (see too_large_error)."""
    data = getattr(error, "data", None)
    return isinstance(data, dict) and data.get("riskrank_jax") == TOO_LARGE


async def read_lines(receive, max_message_bytes: int, deliver, dropped: Callable[[Dropped], object]) -> None:
    """Read chunks with ``await receive()`` until EndOfStream; ``await deliver(line bytes)`` for each line of
    at most max_message_bytes (the newline excluded), ``await dropped(Dropped)`` for each longer one. Holds
    one chunk and at most max_message_bytes of a line. deliver may raise to stop."""
    line = bytearray()
    dropping: _Dropping | None = None
    while True:
        try:
            chunk = await receive()
        except anyio.EndOfStream:
            return
        view = memoryview(chunk)
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = view[start:] if nl < 0 else view[start:nl]
            if dropping is not None:
                dropping.feed(piece)
            elif len(line) + len(piece) > max_message_bytes:
                line += piece
                dropping = _Dropping(line, max_message_bytes)
                line = bytearray()  # freed now, not when the line ends
            else:
                line += piece
            if nl < 0:
                break
            if dropping is not None:
                await dropped(dropping.finish())
                dropping = None
            else:
                data, line = bytes(line), bytearray()
                await deliver(data)
            start = nl + 1
        del view


class _SessionGone(Exception):
    """The session closed its end of the read stream."""


@dataclass
class _Pipes:
    """One server process and the four ends of the streams between it and the session."""

    process: object
    server: object  # StdioServerParameters
    read_writer: object
    read_stream: object
    write_stream: object
    write_reader: object
    writer_done: anyio.Event
    shutting_down: bool = False

    async def send(self, message) -> None:
        try:
            await self.read_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise _SessionGone from None


async def _stdout_reader(pipes: _Pipes, max_message_bytes: int, label: str, on_dropped) -> None:
    """The bounded reader: each line of at most max_message_bytes parsed as the SDK parses it, each longer one
    dropped (and answered, when it is a response whose id could be read)."""
    process, server = pipes.process, pipes.server

    async def deliver(data: bytes) -> None:
        await pipes.send(sdk_hooks.stdio_parse_line(data.decode(server.encoding, server.encoding_error_handler)))

    async def dropped(d: Dropped) -> None:
        if on_dropped is not None:
            on_dropped(d)
        if d.response and d.id is not None:
            await pipes.send(too_large_error(d, label))

    try:
        async with pipes.read_writer:
            try:
                await read_lines(lambda: process.stdout.receive(READ_CHUNK), max_message_bytes, deliver, dropped)
            except _SessionGone:
                pass  # the session is gone; only the drain remains
            finally:
                await sdk_hooks.stdio_drain_stdout(process)
    except anyio.ClosedResourceError:
        pass  # our own shutdown closed stdout under the read
    except (anyio.BrokenResourceError, ConnectionError):
        if not pipes.shutting_down:
            sdk_hooks.stdio_logger().exception("Reading from the MCP server's stdout failed mid-session")


async def _stdin_writer(pipes: _Pipes) -> None:
    """The SDK's writer: one JSON line per message."""
    server = pipes.server
    try:
        async with pipes.write_reader:
            async for session_message in pipes.write_reader:
                text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await pipes.process.stdin.send((text + "\n").encode(server.encoding, server.encoding_error_handler))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await pipes.read_writer.aclose()  # the session sees the connection end, not a hung request
    finally:
        pipes.writer_done.set()


async def _shutdown(pipes: _Pipes) -> None:
    """The SDK's shutdown sequence: stop traffic, flush, stop the server (close stdin, wait, kill the tree)."""
    pipes.read_stream.close()
    pipes.write_stream.close()
    with anyio.move_on_after(sdk_hooks.STDIO_WRITER_FLUSH_S) as flush_scope:
        await pipes.writer_done.wait()
    if flush_scope.cancelled_caught:
        await anyio.lowlevel.cancel_shielded_checkpoint()
    await sdk_hooks.stdio_stop(pipes.process)
    await sdk_hooks.aclose_all(pipes.read_stream, pipes.write_stream, pipes.read_writer, pipes.write_reader)
    await anyio.lowlevel.checkpoint()


@asynccontextmanager
async def stdio_client(server, errlog: TextIO = sys.stderr, *, max_message_bytes: int, label: str = "server",
                       on_dropped: Callable[[Dropped], None] | None = None) -> AsyncGenerator:
    """mcp.client.stdio.stdio_client with a stdout reader bounded by max_message_bytes (see the module
    docstring); ``server`` is a StdioServerParameters; ``label`` names the server in errors; ``on_dropped`` is
    told of every dropped message."""
    if max_message_bytes <= 0:
        raise ValueError("max_message_bytes must be positive")
    process = await sdk_hooks.stdio_spawn(server, errlog)
    # no awaits from here until the task group is entered (a cancellation would leak the process)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    pipes = _Pipes(process, server, read_writer, read_stream, write_stream, write_reader, anyio.Event())
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stdout_reader, pipes, max_message_bytes, label, on_dropped)
        tg.start_soon(_stdin_writer, pipes)
        try:
            yield read_stream, write_stream
        finally:
            pipes.shutting_down = True
            with anyio.CancelScope(shield=True):  # the server process must not leak, even when cancelled
                await _shutdown(pipes)
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


# ---------------------------------------------------------------------------------------------- HTTP


class MessageTooLarge(httpx2.StreamError):
    """A response body over the limit. A StreamError: the SDK then answers the request with a JSON-RPC error
    that carries this text, and the transport goes on."""


class _CappedStream(httpx2.AsyncByteStream):
    """A response body, decoded here when it is content-encoded, failing once it passes ``limit`` bytes."""

    def __init__(self, inner, decoder, limit: int, label: str, declared: int | None):
        self.inner, self.decoder, self.limit, self.label, self.declared = inner, decoder, limit, label, declared

    def _fail(self, size: int):
        raise MessageTooLarge(
            f"server '{self.label}' sent a message of more than {self.limit:,} bytes ({size:,} bytes or more; "
            "limits.max_message_bytes); dropped")

    async def __aiter__(self):
        if self.declared is not None and self.declared > self.limit and self.decoder is None:
            self._fail(self.declared)
        size = 0
        async for raw in self.inner:
            for part in ([raw] if self.decoder is None else self.decoder.decode(raw)):
                size += len(part)
                if size > self.limit:
                    self._fail(size)
                yield part
        for part in (() if self.decoder is None else self.decoder.flush()):
            size += len(part)
            if size > self.limit:
                self._fail(size)
            yield part

    async def aclose(self):
        await self.inner.aclose()


def _capped(inner, limit: int, label: str):
    """``inner`` (an httpx2 transport) with every response body but SSE streams (the SDK caps each event)
    capped at ``limit`` decoded bytes."""
    class CappedTransport(httpx2.AsyncBaseTransport):
        async def __aenter__(self):
            await inner.__aenter__()
            return self

        async def __aexit__(self, *exc):
            await inner.__aexit__(*exc)

        async def handle_async_request(self, request):
            response = await inner.handle_async_request(request)
            if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
                return response
            codings = [c.strip().lower() for c in response.headers.get_list("content-encoding", split_commas=True)]
            codings = [c for c in codings if c and c != "identity"]
            decoder, headers = None, response.headers.raw
            if codings:  # decoded here, so that the limit counts what the body expands to
                decoder = sdk_hooks.content_decoder(codings)
                headers = [(k, v) for k, v in headers if k.lower() not in (b"content-encoding", b"content-length")]
            length = response.headers.get("content-length")
            declared = int(length) if length and length.strip().isdigit() else None
            return httpx2.Response(response.status_code, headers=headers, request=request,
                                   stream=_CappedStream(response.stream, decoder, limit, label, declared),
                                   extensions=response.extensions)

        async def aclose(self):
            await inner.aclose()

    return CappedTransport()


def http_client(headers: dict[str, str] | None = None, *, max_message_bytes: int, label: str = "server"):
    """The SDK's httpx2 client (mcp.shared._httpx_utils.create_mcp_http_client: its timeouts, proxies from the
    environment) with every transport's non-SSE response bodies capped at max_message_bytes decoded bytes.
    Pass it to streamable_http_client(..., max_sse_event_size=max_message_bytes)."""
    client = sdk_hooks.create_http_client(headers)
    sdk_hooks.wrap_http_transports(client, lambda t: _capped(t, max_message_bytes, label))
    return client


def sse_too_large(message: str) -> bool:
    """Whether an SDK error text is its SSE reader's "event exceeded the N byte limit"."""
    return "exceeded the" in message and "byte limit" in message


__all__ = ["stdio_client", "http_client", "MessageTooLarge", "read_lines", "name_message", "Dropped", "too_large_error",
           "is_too_large", "sse_too_large", "READ_CHUNK"]
