"""Kept-alive connections the server has closed (issue 42): the load client must not reuse them.

uvicorn, which SGLang's and vLLM's HTTP servers run on, closes a keep-alive connection after 5 s
idle (`timeout_keep_alive=5`, its default). A request written to such a connection is lost:
asyncio's transport drops the write silently (the request then hangs until its timeout), and
uvloop's raises. On the H200 that lost 12 of 16 measured requests of a cell. These tests run a
real uvicorn server with its default keep-alive in a subprocess, on both event loops and both
transports, and a raw server that closes a reused connection as soon as a request arrives on it.

The idle waits are real (6.5 s, past uvicorn's 5 s): those tests are marked slow and each
bounds every request it sends, so a regression fails in seconds instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
import uvloop
from simserver import start_sim

from matrixrun.load import LoadConfig, run_load_sync
from matrixrun.load.apis import StreamParser, make_parser, request_body
from matrixrun.load.transport import Transport, make_transport

pytestmark = pytest.mark.timeout(120)

T = TypeVar("T")

#: Longer than uvicorn's default keep-alive timeout (5 s), with room for a slow host.
IDLE_S = 6.5
#: Bound on any one request in these tests: they answer in milliseconds when nothing is wrong.
REQUEST_BOUND_S = 10.0
BODY = request_body("sglang", [1, 2, 3], 2, None)

#: A tiny ASGI app under uvicorn with uvicorn's default keep-alive: POST streams two tokens in
#: SGLang's native format; GET /log lists the client port of every POST (one port per
#: connection), so a test can tell a fresh connection from a reused one.
UVICORN_APP = """
import json, socket, sys, uvicorn
ports = []
DONE = b"data: [DONE]\\n\\n"
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    if scope["method"] == "GET":
        body, kind = json.dumps(ports).encode(), b"application/json"
    else:
        ports.append(scope["client"][1])
        events = [json.dumps({"text": "ab"[:k], "meta_info": {"completion_tokens": k}})
                  for k in (1, 2)]
        body, kind = b"".join(b"data: " + e.encode() + b"\\n\\n" for e in events) + DONE, (
            b"text/event-stream")
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", kind)]})
    await send({"type": "http.response.body", "body": body})
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(128)
print("READY", sock.getsockname()[1], flush=True)
config = uvicorn.Config(app, lifespan="off", log_level="warning", loop=sys.argv[1])
uvicorn.Server(config).run(sockets=[sock])
"""


@contextmanager
def uvicorn_server(loop: str = "asyncio") -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", UVICORN_APP, loop], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == "READY", ready
        yield f"http://127.0.0.1:{ready[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def posted_from(url: str) -> list[int]:
    """The client port of each POST the uvicorn app answered, in order."""
    with urllib.request.urlopen(url + "/log", timeout=10) as r:
        ports: list[int] = json.loads(r.read())
        return ports


def run_on(loop: str, make: Callable[[], Awaitable[T]]) -> T:
    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(make())  # type: ignore[arg-type]


async def post(transport: Transport) -> StreamParser:
    parser = make_parser("sglang")
    async with asyncio.timeout(REQUEST_BOUND_S):
        await transport.post_stream("/generate", BODY, parser)
    return parser


def complete(parser: StreamParser) -> bool:
    return parser.output_tokens == 2 and parser.done_at is not None and not parser.error


async def outcome(transport: Transport) -> str:
    """'ok' for a complete answer, else what went wrong (a timeout: the request hung)."""
    try:
        parser = await post(transport)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok" if complete(parser) else f"incomplete: {parser.error}"


async def twice_with_idle_gap(url: str, kind: str) -> tuple[str, str]:
    """One request, IDLE_S idle, one more on the same transport: the outcome of each."""
    transport = make_transport(kind, url, 1, None)
    try:
        first = await outcome(transport)
        await asyncio.sleep(IDLE_S)
        second = await outcome(transport)
    finally:
        await transport.aclose()
    return first, second


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_connection_uvicorn_closed_when_idle_is_not_reused(loop: str) -> None:
    """Before the fix, the raw transport's second request hung on asyncio (the timeout here
    fired) and failed at once on uvloop. Both transports run side by side on one loop."""
    with uvicorn_server() as url:

        async def both() -> list[tuple[str, str]]:
            return list(
                await asyncio.gather(
                    twice_with_idle_gap(url, "raw"), twice_with_idle_gap(url, "httpx")
                )
            )

        raw, httpx = run_on(loop, both)
        ports = posted_from(url)
    assert raw == ("ok", "ok")
    assert httpx == ("ok", "ok")
    # four requests reached the server, none of them twice, each on its own connection: the
    # two idle ones really were closed (a reused connection would repeat a port)
    assert len(ports) == 4 and len(set(ports)) == 4, ports


class ClosingServer:
    """HTTP/1.1 on raw asyncio streams, in a thread: answers a request with a two-token SSE
    body (Content-Length, keep-alive) unless `closes(nth_on_connection, nth_overall)` says to
    close the connection as soon as the request has arrived, without a byte of response."""

    def __init__(self, closes: Callable[[int, int], bool]) -> None:
        self.closes = closes
        self.arrived = 0
        self.answered = 0
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def __enter__(self) -> ClosingServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        tasks = asyncio.all_tasks(self._loop)  # connections still open: end them here
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        on_connection = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                await reader.readexactly(length)
                on_connection += 1
                self.arrived += 1
                if self.closes(on_connection, self.arrived):
                    break
                self.answered += 1
                body = (
                    b'data: {"text":"a","meta_info":{"completion_tokens":1}}\n\n'
                    b'data: {"text":"ab","meta_info":{"completion_tokens":2}}\n\n'
                    b"data: [DONE]\n\n"
                )
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def raw_config(url: str, **kw: Any) -> LoadConfig:
    base: dict[str, Any] = dict(
        base_url=url, num_prompts=4, input_len=8, output_len=2, concurrency=2,
        warmup_requests=2, request_timeout_s=REQUEST_BOUND_S, processes=1,
    )  # fmt: skip
    return LoadConfig(**(base | kw))


@pytest.mark.parametrize("transport", ["raw", "httpx"])
def test_a_request_the_server_drops_on_a_reused_connection_is_retried_once(
    transport: str,
) -> None:
    """Every request after the first on a connection is dropped on arrival: each measured
    request (on a connection the warm-up used) is sent once more on a fresh connection and
    succeeds there, and is recorded once."""
    with ClosingServer(lambda nth, _: nth > 1) as server:
        res = run_load_sync(raw_config(server.url, transport=transport))
    assert [r.ok for r in res.records] == [True] * 4, [r.error for r in res.records]
    assert (res.metrics.completed, res.metrics.failed) == (4, 0)
    assert server.answered == 2 + 4  # warm-up and measured, each answered exactly once
    assert server.arrived - server.answered <= 4  # at most one dropped attempt per request


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_request_dropped_again_on_the_fresh_connection_fails_with_its_reason(
    loop: str,
) -> None:
    """After the first request the server drops everything. Three connections sit in the pool
    (one used, two opened ahead): the second request tries one of them and one fresh
    connection, not every pooled one, then fails saying so."""
    with ClosingServer(lambda _, overall: overall > 1) as server:

        async def go() -> tuple[bool, str]:
            transport = make_transport("raw", server.url, 3, None)
            try:
                await transport.prepare(3)
                first = await post(transport)
                arrived = server.arrived
                try:
                    await post(transport)
                except ConnectionError as exc:
                    return complete(first), f"{server.arrived - arrived} {exc}"
                return complete(first), "no error"
            finally:
                await transport.aclose()

        ok, outcome = run_on(loop, go)
    assert ok
    tries, _, reason = outcome.partition(" ")
    assert tries == "2", outcome  # the reused connection, then one fresh one
    assert "closed the connection" in reason and "fresh connection" in reason, reason


@pytest.mark.slow
def test_the_simulator_closes_idle_connections_like_uvicorn_and_the_client_copes() -> None:
    """The simulator keeps uvicorn's default 5 s keep-alive, so a rehearsal meets closed
    connections as a run on SGLang does; the load client still gets every answer."""
    with start_sim(["--model-path", "m"]) as (_, url):
        with uvicorn_closed_probe(url) as closed_after:
            raw = run_on("uvloop", lambda: twice_with_idle_gap(url, "raw"))
        assert raw == ("ok", "ok")
    assert 4.0 <= closed_after() <= 15.0


@contextmanager
def uvicorn_closed_probe(url: str) -> Iterator[Callable[[], float]]:
    """A plain socket that sends one request, reads its answer, and then waits for the server
    to close the connection: yields a function giving how long that took (inf: not in 15 s)."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=15)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 ")
    answered = time.monotonic()
    result: list[float] = []

    def wait() -> None:
        try:
            while sock.recv(65536):
                pass
            result.append(time.monotonic() - answered)
        except TimeoutError:
            result.append(float("inf"))

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()

    def closed_after() -> float:
        waiter.join(20)
        return result[0] if result else float("inf")

    try:
        yield closed_after
    finally:
        waiter.join(20)
        sock.close()
