"""A streaming server whose timing is known, for testing and benchmarking the load client.

Speaks SGLang's native `POST /generate` and OpenAI `POST /v1/completions` over real HTTP/1.1
(chunked SSE, keep-alive). Token i of a request (0-based) is due at
`arrival + ttft + i * itl`, on an absolute schedule so delays never accumulate; an event is
written for token 0, then every `stream_interval` tokens, and for the last token. The server
measures its own lateness against that schedule (`GET /stats`: over a sample of all events,
mean/p99/max, and the mean over first events alone, which is what it adds to TTFT; the
median and p99 of the gaps between events as it sent them, which is what a perfect client
would measure as ITL; and `arrival_lag_mean_ms`, how long its own busy loop may have kept
requests unread, an upper bound from a lag probe of its own), so a benchmark can tell the
client's error from the server's. Times are `time.perf_counter`, not uvloop's
whole-millisecond loop clock.

Fault injection, each "every N-th request" counting from 1 over measured and warmup requests
alike: `--fail-every` answers HTTP 500; `--error-every` streams one token then an in-stream
error event; `--stall-every` streams one token then never finishes (for client timeouts);
`--truncate-every` streams one token and closes the connection without `[DONE]`.

Written on raw asyncio streams rather than starlette/uvicorn so that one core can drive tens
of thousands of events per second: the benchmark needs a server faster than the client.

Run: python tests/fixedserver.py --port 0 --ttft-ms 50 --itl-ms 20   (prints "READY <port>")
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import statistics
import time
from typing import Any


class Config(argparse.Namespace):
    ttft_ms: float
    itl_ms: float
    stream_interval: int
    fail_every: int
    fail_first: int
    error_every: int
    stall_every: int
    truncate_every: int
    cumulative_text: bool
    continuous_usage: bool


class State:
    def __init__(self) -> None:
        self.requests = 0
        self.active = 0
        self.max_active = 0
        self.events = 0
        self.late: list[float] = []  # seconds late per event (sampled)
        self.late_worst = 0.0  # seconds late, the worst event of all (not sampled)
        self.late_first: list[float] = []  # seconds late per first event (every request)
        self.arrivals: list[float] = []  # when each request was read (perf_counter)
        self.sent_gaps: list[float] = []  # seconds between events as sent, per token (sampled)
        self.wakes: list[float] = []  # the server's loop probe: when it woke, how late
        self.wake_lags: list[float] = []
        self.prompts: list[list[int]] = []  # first 4 ids of each prompt, in arrival order

    def stats(self) -> dict[str, Any]:
        late = sorted(self.late)
        return {
            "requests": self.requests,
            "active": self.active,
            "max_active": self.max_active,
            "events": self.events,
            "late_mean_ms": statistics.fmean(late) * 1e3 if late else 0.0,
            "late_p99_ms": late[int(0.99 * (len(late) - 1))] * 1e3 if late else 0.0,
            "late_max_ms": late[-1] * 1e3 if late else 0.0,
            # the worst of every event, and of every request's read: what bounds a test's
            # tolerance on a loaded host (tests/test_load_client.py `lateness_ms`)
            "late_worst_ms": self.late_worst * 1e3,
            "arrival_lag_max_ms": max(self.arrival_lags(), default=0.0) * 1e3,
            # the first events come in a burst at an infinite rate: what the server adds to TTFT
            "late_first_mean_ms": statistics.fmean(self.late_first) * 1e3
            if self.late_first
            else 0.0,
            # the inter-token gaps the server really sent: what a perfect client would measure
            # the 90th percentile of the same: what the server adds to a p90 TTFT
            "late_first_p90_ms": _pct(self.late_first, 0.9) * 1e3,
            "sent_gap_median_ms": _pct(self.sent_gaps, 0.5) * 1e3,
            "sent_gap_p99_ms": _pct(self.sent_gaps, 0.99) * 1e3,
            "arrival_lag_mean_ms": statistics.fmean(self.arrival_lags()) * 1e3
            if self.arrivals
            else 0.0,
            "arrival_lag_p90_ms": _pct(self.arrival_lags(), 0.9) * 1e3,
            "prompts": self.prompts,
        }

    def arrival_lags(self) -> list[float]:
        """How long each request may have waited to be read: the server's loop lag at the
        probe wake-ups either side of its arrival, beyond uvloop's 1 ms timer resolution (a
        busy loop reads a request late, and the schedule starts at the read)."""
        out = []
        n = len(self.wakes)
        for a in self.arrivals:
            j = bisect.bisect_left(self.wakes, a)
            lag = max(self.wake_lags[j] if j < n else 0.0, self.wake_lags[j - 1] if j else 0.0)
            out.append(max(0.0, lag - TIMER_RESOLUTION_S))
        return out


#: The server's loop probe interval, and uvloop's timer resolution (lags below it are noise).
PROBE_S, TIMER_RESOLUTION_S = 0.005, 0.001


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))] if ordered else 0.0


def _every(n: int, i: int) -> bool:
    return n > 0 and i % n == 0


class Server:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.state = State()

    async def probe(self) -> None:
        """Record how late the server's loop wakes a sleeping task, and when (`/stats`)."""
        clock = time.perf_counter
        while True:
            due = clock() + PROBE_S
            await asyncio.sleep(PROBE_S)
            now = clock()
            self.state.wakes.append(now)
            self.state.wake_lags.append(max(0.0, now - due))

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if not await self.route(method, path, body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _plain(self, writer: asyncio.StreamWriter, status: str, body: bytes) -> None:
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    async def route(self, method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> bool:
        if path == "/health":
            self._plain(w, "200 OK", b"{}")
        elif path == "/stats":
            self._plain(w, "200 OK", json.dumps(self.state.stats()).encode())
        elif path == "/reset":
            self.state = State()
            self._plain(w, "200 OK", b"{}")
        elif method == "POST" and path in ("/generate", "/v1/completions"):
            return await self.generate(path == "/generate", json.loads(body), w)
        else:
            self._plain(w, "404 Not Found", b'{"error": "not found"}')
        await w.drain()
        return True

    async def generate(self, native: bool, req: dict[str, Any], w: asyncio.StreamWriter) -> bool:
        cfg, st = self.cfg, self.state
        clock = time.perf_counter  # not loop.time(): uvloop's is in whole ms, cached per pass
        arrival = clock()
        st.arrivals.append(arrival)
        st.requests += 1
        n = st.requests
        prompt = req["input_ids"] if native else req["prompt"]
        st.prompts.append(prompt[:4])
        out_len = req["sampling_params"]["max_new_tokens"] if native else req["max_tokens"]
        if _every(cfg.fail_every, n) or n <= cfg.fail_first:
            self._plain(w, "500 Internal Server Error", b'{"error": "injected failure"}')
            await w.drain()
            return True
        st.active += 1
        st.max_active = max(st.max_active, st.active)
        w.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )

        def send(data: bytes) -> None:
            w.write(b"%x\r\n%s\r\n" % (len(data) + 8, b"data: " + data + b"\n\n"))

        ttft, itl, si = cfg.ttft_ms / 1e3, cfg.itl_ms / 1e3, max(1, cfg.stream_interval)
        prev_sent, prev_i = arrival, 0
        try:
            for i in range(out_len):
                last = i == out_len - 1
                if not (i == 0 or last or i % si == 0):
                    continue
                due = arrival + ttft + i * itl
                delay = due - clock()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent = clock()
                late = sent - due
                st.late_worst = max(st.late_worst, late)
                if st.events % 8 == 0:
                    st.late.append(max(0.0, late))
                    if i:  # the gap this event ends, as sent, per token (stream_interval)
                        st.sent_gaps.append((sent - prev_sent) / (i - prev_i))
                if i == 0:
                    st.late_first.append(max(0.0, late))
                prev_sent, prev_i = sent, i
                st.events += 1
                count = i + 1
                # Hand-built JSON (same bytes json.dumps would give, compact): the server must
                # stay much faster than the client it measures.
                if native:
                    text = " the" * count if cfg.cumulative_text else " the"
                    finish = '{"type":"length"}' if last else "null"
                    event = (
                        f'{{"text":"{text}","meta_info":{{"id":"{n}","prompt_tokens":{len(prompt)},'
                        f'"completion_tokens":{count},"finish_reason":{finish}}},"index":0}}'
                    )
                else:
                    usage = f'{{"completion_tokens":{count}}}' if cfg.continuous_usage else "null"
                    event = (
                        f'{{"id":"{n}","object":"text_completion","choices":[{{"index":0,'
                        f'"text":" the","finish_reason":null}}],"usage":{usage}}}'
                    )
                send(event.encode())
                if i == 0 and _every(cfg.error_every, n):
                    send(b'{"error":{"message":"injected stream error"}}')
                    break
                if i == 0 and _every(cfg.stall_every, n):
                    await w.drain()
                    await asyncio.sleep(3600)
                if i == 0 and _every(cfg.truncate_every, n):
                    await w.drain()
                    return False
                if st.events % 16 == 0:
                    await w.drain()
            if not native:
                usage = {"prompt_tokens": len(prompt), "completion_tokens": out_len}
                send(json.dumps({"choices": [], "usage": usage}).encode())
            send(b"[DONE]")
            w.write(b"0\r\n\r\n")
            await w.drain()
        finally:
            st.active -= 1
        return True


async def main(cfg: Config, port: int) -> None:
    server = Server(cfg)
    probe = asyncio.create_task(server.probe())  # runs as long as the server
    srv = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=4096)
    print("READY", srv.sockets[0].getsockname()[1], flush=True)
    try:
        async with srv:
            await srv.serve_forever()
    finally:
        probe.cancel()


def parse(argv: list[str] | None = None) -> tuple[Config, int]:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--fail-first", type=int, default=0, help="answer the first N with 500")
    p.add_argument("--error-every", type=int, default=0)
    p.add_argument("--stall-every", type=int, default=0)
    p.add_argument("--truncate-every", type=int, default=0)
    p.add_argument("--no-cumulative-text", dest="cumulative_text", action="store_false")
    p.add_argument("--continuous-usage", action="store_true")
    ns = p.parse_args(argv, namespace=Config())
    return ns, ns.port  # type: ignore[attr-defined]


if __name__ == "__main__":
    cfg, port = parse()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    time.sleep(0)
    asyncio.run(main(cfg, port))
