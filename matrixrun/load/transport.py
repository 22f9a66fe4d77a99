"""How the client moves bytes: one seam, `Transport.post_stream(path, body, sink)`.

`post_stream` sends one POST and feeds each network read of a 200 response body to
`sink.feed(data, arrival_time)`; any other status raises `HTTPStatusFailed`, a refused
connection raises `ConnectFailed`. Two implementations:

* `RawTransport` (default): HTTP/1.1 on asyncio protocols with httptools (llhttp) parsing:
  keep-alive connections, chunked or sized bodies, one `perf_counter()` per network read and
  no per-read coroutine hops. `benchmarks/client_overhead.py` measured it sustaining several
  times httpx's event rate on one core, which is what keeps the client off the critical path
  at high concurrency.
* `HttpxTransport`: httpx's AsyncClient with a pool sized to the concurrency. Kept as the
  reference implementation (and for https with proxies, which the raw one does not do).

Kept-alive connections die: uvicorn, which SGLang's and vLLM's HTTP servers run on, closes one
idle for 5 s. Both transports take only connections the server has not closed, and a request
that fails on a reused connection before any response byte is sent once more, on a fresh
connection, inside the same `post_stream` (one request, one record); a second failure is the
request's error, with both reasons. Before, a request written to such a connection hung until
its timeout on asyncio's loop (the write is dropped silently) and failed on uvloop's.
"""

from __future__ import annotations

import asyncio
import errno
import ssl
import time
from typing import Protocol, cast
from urllib.parse import urlsplit

import httptools
import httpx

from matrixrun.load.apis import StreamParser


class ConnectFailed(Exception):
    """The server could not be reached (refused, unknown host, connect timeout)."""

    PREFIX = "could not connect to"

    def __init__(self, url: str, reason: object) -> None:
        super().__init__(f"{self.PREFIX} {url}: {reason}")


#: Text of a connect failure that is the client's own limit, not the server's absence.
CLIENT_LIMIT = "the client's open-file limit"


def _connect_reason(e: OSError) -> str:
    """Why a connection failed, in words; running out of file descriptors is the client's
    limit (ulimit -n), and the sentence says so instead of blaming the server."""
    if e.errno in (errno.EMFILE, errno.ENFILE):
        try:
            import resource  # Unix only: the sentence says ? where it is missing

            soft = str(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        except (ImportError, OSError, ValueError):
            soft = "?"
        return (
            f"{e.strerror} ({CLIENT_LIMIT}, ulimit -n {soft}, is below the concurrency: raise "
            "it or lower the concurrency)"
        )
    return str(e.strerror or e)


class HTTPStatusFailed(Exception):
    """The server answered with a status other than 200; the message has a body excerpt."""

    def __init__(self, status: int, body: bytes) -> None:
        text = body[:300].decode("utf-8", "replace").strip()
        super().__init__(f"HTTP {status}: {text}" if text else f"HTTP {status}")
        self.status = status


class Transport(Protocol):
    async def post_stream(self, path: str, body: bytes, sink: StreamParser) -> None: ...

    async def prepare(self, connections: int) -> None: ...

    async def aclose(self) -> None: ...


def make_transport(kind: str, base_url: str, concurrency: int, api_key: str | None) -> Transport:
    if kind == "httpx":
        return HttpxTransport(base_url, concurrency, api_key)
    return RawTransport(base_url, api_key)


def failed_twice(fresh: Exception, stale: Exception) -> ConnectionError:
    """The error of a request that failed on a kept-alive connection before any answer, was
    sent once more on a fresh one and failed there too: both reasons, in one sentence."""
    how = "the same way" if str(fresh) == str(stale) else f"({stale})"
    return ConnectionError(
        f"{fresh}, on a fresh connection too (sent once more after a kept-alive connection "
        f"failed {how})"
    )


class _Stale(Exception):
    """An httpx request failed on a kept-alive connection before any response byte."""

    def __init__(self, cause: httpx.TransportError) -> None:
        super().__init__(str(cause) or type(cause).__name__)
        self.cause = cause


class HttpxTransport:
    """httpx streaming: simple and standard, but several coroutine hops per network read.

    httpcore already skips a pooled connection the server has closed (it checks the socket
    before reuse); what it does not do is send again a request that the server dropped on a
    kept-alive connection before answering ("Server disconnected without sending a
    response"). That is retried once here, on a connection of its own (`_fresh` keeps none).
    """

    def __init__(self, base_url: str, concurrency: int, api_key: str | None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._url = base_url
        timeout = httpx.Timeout(None, connect=30.0)
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
            timeout=timeout,
        )
        self._fresh = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            limits=httpx.Limits(max_keepalive_connections=0),
            timeout=timeout,
        )

    async def post_stream(self, path: str, body: bytes, sink: StreamParser) -> None:
        try:
            try:
                await self._attempt(self._client, path, body, sink)
            except _Stale as stale:
                try:
                    await self._attempt(self._fresh, path, body, sink)
                except _Stale as again:
                    raise failed_twice(again, stale) from None
        except httpx.ConnectError as e:
            raise ConnectFailed(self._url, e) from None
        sink.finish(time.perf_counter())

    async def _attempt(
        self, client: httpx.AsyncClient, path: str, body: bytes, sink: StreamParser
    ) -> None:
        """One try; `_Stale` when it failed on a reused connection before the response began
        (httpcore's trace says whether this try opened its connection)."""
        opened = answered = False

        async def trace(event: str, info: dict[str, object]) -> None:
            nonlocal opened
            opened = opened or "connect_tcp" in event

        headers = {"Content-Type": "application/json"}
        extensions = {"trace": trace}
        try:
            async with client.stream(
                "POST", path, content=body, headers=headers, extensions=extensions
            ) as resp:
                answered = True
                if resp.status_code != 200:
                    raise HTTPStatusFailed(resp.status_code, await resp.aread())
                feed, clock = sink.feed, time.perf_counter
                async for data in resp.aiter_raw():
                    feed(data, clock())
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
            if opened or answered:
                raise
            raise _Stale(e) from e

    async def prepare(self, connections: int) -> None:
        """httpx opens connections on demand; nothing to do."""

    async def aclose(self) -> None:
        await self._client.aclose()
        await self._fresh.aclose()


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; httptools calls the on_* methods while parsing."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.sink: StreamParser | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.status = 0
        self.error_body = bytearray()
        self.now = 0.0
        self.got_bytes = False
        self.reusable = False
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.now = time.perf_counter()
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(ConnectionError(f"malformed HTTP response: {e}"))
            self.close()

    def eof_received(self) -> bool | None:
        """The server closed its side (uvicorn does so after 5 s idle): mark the connection
        dead at once, so the pool never hands it out again. Returning None lets the
        transport close; `connection_lost` follows and fails a request in flight."""
        self.closed = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ConnectionResetError("server closed the connection before the response ended"))

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if self.status == 200 and self.sink is not None:
            self.sink.feed(body, self.now)
        else:
            self.error_body += body

    def on_message_complete(self) -> None:
        self.reusable = self.parser.should_keep_alive()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    # used by RawTransport
    def usable(self) -> bool:
        """Open as far as this side knows: the server has not closed it."""
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def start(self, sink: StreamParser, request: bytes) -> asyncio.Future[None]:
        """Send `request`; the future ends with the response. A connection that is closed
        raises ConnectionResetError here: asyncio's transport would drop the write silently
        (the request would hang until its timeout) and uvloop's raises a RuntimeError."""
        self.sink, self.status, self.got_bytes, self.reusable = sink, 0, False, False
        self.error_body.clear()
        if not self.usable():
            raise ConnectionResetError("the server had closed the kept-alive connection")
        self.waiter = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        try:
            self.transport.write(request)
        except (OSError, RuntimeError) as exc:
            raise ConnectionResetError(f"could not send on the connection: {exc}") from None
        return self.waiter

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class RawTransport:
    """Minimal HTTP/1.1 client: POST, stream the body into the sink, reuse the connection."""

    def __init__(self, base_url: str, api_key: str | None) -> None:
        parts = urlsplit(base_url)
        self._url = base_url
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._prefix = parts.path.rstrip("/")
        auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        host = parts.netloc.rsplit("@", 1)[-1]
        self._head = (
            f"Host: {host}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n{auth}"
        )
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(
                _Connection, self._host, self._port, ssl=self._ssl
            )
        except OSError as e:
            raise ConnectFailed(self._url, _connect_reason(e)) from None
        self._all.add(conn)
        return conn

    async def post_stream(self, path: str, body: bytes, sink: StreamParser) -> None:
        request = (
            f"POST {self._prefix}{path} HTTP/1.1\r\n{self._head}Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        conn = self._take_idle()
        if conn is None:
            conn = await self._connect()
            await self._exchange(conn, sink, request)
        else:
            try:
                await self._exchange(conn, sink, request)
            except ConnectionError as stale:
                if conn.got_bytes:
                    raise  # the server answered, then broke off: that is this request's fate
                # A kept-alive connection the server closed (its idle timeout racing this
                # request) or dropped on arrival: once more on a fresh connection, one request
                # still (the sink saw nothing). Not again from the pool: it may hold more.
                conn = await self._connect()
                try:
                    await self._exchange(conn, sink, request)
                except ConnectionError as exc:
                    raise failed_twice(exc, stale) from None
        if conn.reusable and conn.usable():
            self._idle.append(conn)
        else:
            self._drop(conn)
        if conn.status != 200:
            raise HTTPStatusFailed(conn.status, bytes(conn.error_body))
        sink.finish(time.perf_counter())

    def _take_idle(self) -> _Connection | None:
        """A pooled connection the server has not closed, or None; the dead ones are dropped
        on the way (uvicorn closes a connection idle for 5 s, SGLang's and vLLM's alike)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            self._drop(conn)
        return None

    async def _exchange(self, conn: _Connection, sink: StreamParser, request: bytes) -> None:
        """One request and its response on `conn`; on any failure the connection is closed
        (a cancelled request abandons its response, which leaves it unusable)."""
        try:
            await conn.start(sink, request)
        except BaseException:
            self._drop(conn)
            raise

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._all.discard(conn)

    async def prepare(self, connections: int) -> None:
        """Open idle connections up to `connections` before the benchmark clock starts, so a
        burst of requests at t=0 does not time TCP handshakes (bench_serving even connects
        per request; a real serving client keeps its connections)."""
        for conn in [c for c in self._idle if not c.usable()]:
            self._idle.remove(conn)
            self._drop(conn)
        missing = connections - len(self._idle)
        if missing > 0:
            opened = await asyncio.gather(
                *(self._connect() for _ in range(missing)), return_exceptions=True
            )
            # A connect failure here is reported by the requests that hit it, per request.
            self._idle.extend(c for c in opened if isinstance(c, _Connection))

    async def aclose(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
        self._idle.clear()
        await asyncio.sleep(0)
