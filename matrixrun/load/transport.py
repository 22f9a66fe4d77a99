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


class HttpxTransport:
    """httpx streaming: simple and standard, but several coroutine hops per network read."""

    def __init__(self, base_url: str, concurrency: int, api_key: str | None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._url = base_url
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
            timeout=httpx.Timeout(None, connect=30.0),
        )

    async def post_stream(self, path: str, body: bytes, sink: StreamParser) -> None:
        headers = {"Content-Type": "application/json"}
        try:
            async with self._client.stream("POST", path, content=body, headers=headers) as resp:
                if resp.status_code != 200:
                    raise HTTPStatusFailed(resp.status_code, await resp.aread())
                feed, clock = sink.feed, time.perf_counter
                async for data in resp.aiter_raw():
                    feed(data, clock())
        except httpx.ConnectError as e:
            raise ConnectFailed(self._url, e) from None
        sink.finish(time.perf_counter())

    async def prepare(self, connections: int) -> None:
        """httpx opens connections on demand; nothing to do."""

    async def aclose(self) -> None:
        await self._client.aclose()


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
    def start(self, sink: StreamParser, request: bytes) -> asyncio.Future[None]:
        self.sink, self.status, self.got_bytes, self.reusable = sink, 0, False, False
        self.error_body.clear()
        self.waiter = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(request)
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
        while True:
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else await self._connect()
            try:
                await conn.start(sink, request)
            except ConnectionError:
                conn.close()
                self._all.discard(conn)
                # A kept-alive connection the server had already closed: retry once, fresh.
                if reused and not conn.got_bytes:
                    continue
                raise
            except BaseException:  # cancelled (timeout): the response is abandoned
                conn.close()
                self._all.discard(conn)
                raise
            break
        if conn.reusable and not conn.closed:
            self._idle.append(conn)
        else:
            conn.close()
            self._all.discard(conn)
        if conn.status != 200:
            raise HTTPStatusFailed(conn.status, bytes(conn.error_body))
        sink.finish(time.perf_counter())

    async def prepare(self, connections: int) -> None:
        """Open idle connections up to `connections` before the benchmark clock starts, so a
        burst of requests at t=0 does not time TCP handshakes (bench_serving even connects
        per request; a real serving client keeps its connections)."""
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
