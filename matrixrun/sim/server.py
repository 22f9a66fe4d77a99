"""The simulator's HTTP face: a raw ASGI app speaking SGLang's native and the OpenAI APIs.

It owns the routes, the failure effects that act on requests (error rate, malformed streams,
slow start, hang, crash) and the per-request output channel (`channel.Channel`), which the batcher
feeds and the request's handler drains onto the socket. It is a bare ASGI callable rather than
a framework app because every streamed event passes through here: no routing tables,
middleware or response objects per event, one future wake-up and one `send` per event (or per
several, when a handler falls behind, its pending events go out in one write).

All times it reports (`e2e_latency`, lateness) are wall-clock seconds/milliseconds of this
process, i.e. modelled time divided by `time_scale`; the harness converts them back.

Endpoints, as SGLang 0.5.23 has them (`srt/entrypoints/http_server.py`): GET /health and GET
/health_generate (503 while starting; /health_generate also 503 when hung, and once ready it
answers only after `effects.health_check_s`, as SGLang's handler sleeps 1 s before it looks),
GET /server_info and /get_server_info (server args plus the per-launch fields
`launch_command`, `startup_time`, `status`, `kv_events`, `internal_states`, `version`,
`frontend`), GET /model_info and /get_model_info, GET /v1/models, GET|POST /flush_cache (400
while requests run or wait; with `?timeout=S` it waits up to S seconds for idle first; a flush
also resets the lateness window), POST /generate, POST /v1/completions, POST
/v1/chat/completions.

When a stream's handler falls behind, its pending native output goes out as ONE event, the
newest (cumulative text and counts; with --incremental-streaming-output the deltas joined), as
SGLang's `_stream_one_response` drains `out_list`, never as several events in one write.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from matrixrun import __version__
from matrixrun.core.profile import Curve, Effects, Profile
from matrixrun.sim import protocol
from matrixrun.sim.batcher import Batcher, SimRequest
from matrixrun.sim.channel import Channel
from matrixrun.sim.clock import now
from matrixrun.sim.lateness import Lateness
from matrixrun.sim.prefix_cache import RadixCache
from matrixrun.sim.protocol import BadRequest, GenRequest
from matrixrun.sim.tokens import TokenSource, prompt_key, render

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

VERSION = f"matrixrun-sim {__version__}"
#: The token pool when `--max-total-tokens` is not given: the prefix cache's capacity (what
#: server info has always reported as `max_total_num_tokens`).
DEFAULT_TOTAL_TOKENS = 1 << 20
_FLUSH_FAILED = b"Flush cache failed.\n"
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
]
_FLUSHED = (
    b"Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    b"waiting requests, the operation will not be performed.)\n"
)


@dataclass
class SimConfig:
    """Everything a simulated server is launched with (`cli.py` builds it from argv)."""

    profile: Profile
    server_args: dict[str, Any] = field(default_factory=dict)
    time_scale: float = 1.0
    seed: int = 0
    started_at: float = field(default_factory=now)


class SimServer:
    """The ASGI application plus the state behind it (one per process)."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        args = config.server_args
        self.curve: Curve
        self.effects: Effects
        self.curve, self.effects = config.profile.resolve(args)
        s = config.time_scale
        self.stream_interval = int(args.get("stream_interval") or config.profile.stream_interval)
        self.incremental = bool(args.get("incremental_streaming_output", False))
        #: `--strict-openai`: behave as transformers serve does (refuse fields outside the
        #: OpenAI completions API with 422; end streams without `data: [DONE]`), so tests show
        #: the harness meets such a server.
        self.strict_openai = bool(args.get("strict_openai", False))
        max_running = args.get("max_running_requests")
        chunk = args.get("chunked_prefill_size")
        chunk = int(chunk) if isinstance(chunk, int | float) and chunk > 0 else None
        eff = self.effects
        self.ready_at = config.started_at + eff.slow_start_s / s
        self.crash_at = (
            None if eff.crash_after_s is None else config.started_at + eff.crash_after_s / s
        )
        hang_at = None if eff.hang_after_s is None else config.started_at + eff.hang_after_s / s
        self.cache = prefix_cache_of(args)
        self.cache_report = bool(args.get("enable_cache_report", False))
        self.batcher = Batcher(
            self.curve,
            time_scale=s,
            stream_interval=self.stream_interval,
            max_running_requests=int(max_running) if max_running else None,
            chunked_prefill_size=chunk,
            seed=config.seed,
            ready_at=self.ready_at,
            hang_at=hang_at,
            cache=self.cache,
            lpm=str(args.get("schedule_policy", "fcfs")) == "lpm",
        )
        self.model = str(args.get("served_model_name") or args.get("model_path") or "default")
        self._rng = random.Random(config.seed ^ 0x5EED5EED)
        self._engine_task: asyncio.Task[None] | None = None
        self._crash_handle: asyncio.TimerHandle | None = None
        self.write_lateness = Lateness()
        self.window_start = now()
        self.events = 0
        self.errors_injected = 0
        self.malformed_injected = 0
        self.bad_requests = 0
        self.flush_calls = 0
        self.faults_injected = 0
        self._routes: dict[tuple[str, str], Callable[[Scope, Receive, Send], Awaitable[None]]] = {
            ("GET", "/health"): self._health,
            ("GET", "/health_generate"): self._health_generate,
            ("GET", "/get_server_info"): self._server_info,
            ("GET", "/server_info"): self._server_info,
            ("GET", "/get_model_info"): self._model_info,
            ("GET", "/model_info"): self._model_info,
            ("GET", "/v1/models"): self._models,
            ("GET", "/flush_cache"): self._flush_cache,
            ("POST", "/flush_cache"): self._flush_cache,
            ("POST", "/generate"): self._generate,
            ("PUT", "/generate"): self._generate,
            ("POST", "/v1/completions"): self._completions,
            ("POST", "/v1/chat/completions"): self._chat_completions,
        }

    # -- ASGI -----------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            handler = self._routes.get((scope["method"], scope["path"]))
            if handler is None:
                known = any(path == scope["path"] for _, path in self._routes)
                code, detail = (405, "Method Not Allowed") if known else (404, "Not Found")
                await _send_json(send, code, {"detail": detail})
                return
            await handler(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                self.start()
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def start(self) -> None:
        """Start the engine loop (and arm the crash effect) on the running loop."""
        loop = asyncio.get_running_loop()
        self._engine_task = loop.create_task(self.batcher.run())
        if self.crash_at is not None:
            self._crash_handle = loop.call_later(max(0.0, self.crash_at - now()), _crash)

    async def stop(self) -> None:
        if self._crash_handle is not None:
            self._crash_handle.cancel()
        if self._engine_task is not None:
            self._engine_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._engine_task

    # -- plain endpoints ------------------------------------------------------------------
    async def _health(self, scope: Scope, receive: Receive, send: Send) -> None:
        """SGLang's /health: 503 while the server is starting, then 200 (no generation)."""
        await _send_bytes(send, 200 if self.batcher.ready() else 503, b"", b"text/plain")

    async def _health_generate(self, scope: Scope, receive: Receive, send: Send) -> None:
        ok = self.batcher.ready() and not self.batcher.hung
        if ok and self.effects.health_check_s:
            await asyncio.sleep(self.effects.health_check_s / self.config.time_scale)
        await _send_bytes(send, 200 if ok else 503, b"", b"text/plain")

    async def _server_info(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _send_json(send, 200, self.server_info())

    async def _model_info(self, scope: Scope, receive: Receive, send: Send) -> None:
        """0.5.23's `/model_info` fields (`http_server.model_info`)."""
        args = self.config.server_args
        info = {
            "model_path": args.get("model_path"),
            "served_model_name": self.model,
            "tokenizer_path": args.get("tokenizer_path") or args.get("model_path"),
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "load_format": args.get("load_format", "auto"),
            "reasoning_parser": args.get("reasoning_parser"),
            "tool_call_parser": args.get("tool_call_parser"),
            "disaggregation_mode": "null",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": "simulated",
            "architectures": ["SimulatedForCausalLM"],
        }
        await _send_json(send, 200, info)

    async def _models(self, scope: Scope, receive: Receive, send: Send) -> None:
        card = {
            "id": self.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "sglang",
            "root": self.config.server_args.get("model_path"),
        }
        await _send_json(send, 200, {"object": "list", "data": [card]})

    async def _flush_cache(self, scope: Scope, receive: Receive, send: Send) -> None:
        """SGLang's flush: refused (400) while requests run or wait; `?timeout=S` waits up to
        S seconds for idle first (0.5.23's SchedulerFlushWrapper)."""
        await _read_body(receive)
        self.flush_calls += 1
        if self.flush_calls <= self.effects.flush_refusals:
            await _send_bytes(send, 400, _FLUSH_FAILED, b"text/plain")
            return
        wait_s = _query_float(scope, "timeout")
        busy = self.batcher.running or self.batcher.waiting
        if busy and wait_s > 0:
            deadline = now() + wait_s
            while (self.batcher.running or self.batcher.waiting) and now() < deadline:
                await asyncio.sleep(0.005)
            if self.batcher.running or self.batcher.waiting:
                await _send_bytes(send, 400, b"Timed out waiting for idle state.", b"text/plain")
                return
        elif busy:
            await _send_bytes(send, 400, _FLUSH_FAILED, b"text/plain")
            return
        if self.cache is not None:
            self.cache.clear()
        self.reset_window()
        await _send_bytes(send, 200, _FLUSHED, b"text/plain")

    def reset_window(self) -> None:
        """Start a new lateness window (the harness flushes between cells)."""
        self.write_lateness = Lateness()
        self.batcher.engine_lateness = Lateness()
        self.window_start = now()

    def server_info(self) -> dict[str, Any]:
        """SGLang's shape (server args, internal_states, version) plus the simulator's state."""
        b = self.batcher
        t = now()
        loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
        stats = {
            "uptime_s": t - self.config.started_at,
            "window_s": t - self.window_start,
            "ready": b.ready(),
            "hung": b.hung,
            "requests": b.submitted,
            "completed": b.completed,
            "aborted": b.aborted,
            "errors_injected": self.errors_injected,
            "malformed_injected": self.malformed_injected,
            "bad_requests": self.bad_requests,
            "faults_injected": self.faults_injected,
            "flush_calls": self.flush_calls,
            "running": b.running,
            "waiting": b.waiting,
            "max_running_seen": b.max_batch,
            "iterations": b.iteration,
            "tokens": b.tokens,
            "events": self.events,
            "compile_events": b.compile_events,
            "prompt_tokens": b.prompt_tokens,
            "cached_tokens": b.cached_tokens,
            "prefix_cache": None
            if self.cache is None
            else {
                "capacity_tokens": self.cache.capacity,
                "size_tokens": self.cache.size,
                "page_size": self.cache.page,
                "lpm": b.lpm,
                **dataclasses.asdict(self.cache.stats),
            },
            "instance_factor": b.instance_factor,
            "write_lateness_ms": self.write_lateness.summary(),
            "engine_lateness_ms": b.engine_lateness.summary(),
            "loop": loop,
        }
        args = self.config.server_args
        return {
            **args,
            # the per-launch fields of 0.5.23's build_server_info and server_info
            "launch_command": " ".join(
                ["python3 -m sglang.launch_server"]
                + [f"--{k.replace('_', '-')} {v}" for k, v in args.items()]
            ),
            "status": "ready",
            "max_total_num_tokens": _total_tokens(args),
            "max_req_input_len": 1 << 17,
            "startup_time": self.config.started_at,
            "kv_events": None,
            "frontend": "python",
            "stream_interval": self.stream_interval,
            "max_running_requests": b.max_running,
            "chunked_prefill_size": b.prefill_budget,
            "version": VERSION,
            "simulated": True,
            "time_scale": self.config.time_scale,
            "sim_seed": self.config.seed,
            "profile": self.config.profile.name,
            "sim_profile": {
                "name": self.config.profile.name,
                "curve": self.curve.model_dump(),
                "effects": self.effects.model_dump(),
                "stream_interval": self.stream_interval,
            },
            "internal_states": [
                {
                    "max_running_requests": b.max_running,
                    "num_running_reqs": b.running,
                    "num_waiting_reqs": b.waiting,
                }
            ],
            "sim_stats": stats,
        }

    # -- generation -----------------------------------------------------------------------
    async def _generate(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._serve_generation(receive, send, protocol.parse_native)

    async def _completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        parse = protocol.parse_openai_strict if self.strict_openai else protocol.parse_openai
        await self._serve_generation(receive, send, parse)

    async def _chat_completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._serve_generation(receive, send, protocol.parse_chat)

    async def _serve_generation(
        self, receive: Receive, send: Send, parse: Callable[[Any], GenRequest]
    ) -> None:
        body = await _read_body(receive)
        if body is None:
            return
        try:
            req = parse(json.loads(body))
        except protocol.ContractError as e:
            self.bad_requests += 1
            await _send_json(send, 400, {"error": str(e)})
            return
        except protocol.UnexpectedFields as e:
            self.bad_requests += 1
            await _send_json(send, 422, protocol.error_body(str(e), 422))
            return
        except (BadRequest, ValueError) as e:
            self.bad_requests += 1
            await _send_json(send, 400, protocol.error_body(str(e), 400))
            return
        eff = self.effects
        if eff.error_rate and self._rng.random() < eff.error_rate:
            self.errors_injected += 1
            msg = f"simulated internal error (error_rate={eff.error_rate})"
            await _send_json(send, 500, protocol.error_body(msg, 500))
            return
        if eff.hold_rate and self._rng.random() < eff.hold_rate:
            self.faults_injected += 1
            while (await receive())["type"] != "http.disconnect":
                pass  # held: nothing is sent until the client gives up
            return
        malformed = bool(req.stream and eff.malformed_rate)
        malformed = malformed and self._rng.random() < eff.malformed_rate
        self.malformed_injected += malformed
        cut = None
        if eff.abort_rate and self._rng.random() < eff.abort_rate:
            cut = "abort"
        elif req.stream and eff.stream_error_rate and self._rng.random() < eff.stream_error_rate:
            cut = "error"
        if req.api != "native" and cut == "error":
            cut = None  # SGLang's in-stream error shape is the native API's
        self.faults_injected += cut is not None
        salt = self._rng.getrandbits(64) if req.temperature > 0 else None
        src = TokenSource(prompt_key(req.prompt_ids), eff.diverge_after_tokens, salt)
        prefix = "cmpl-" if req.api == "openai" else ""
        ch = Channel(
            req,
            src,
            req.rid or prefix + uuid.uuid4().hex,
            incremental=self.incremental,
            malformed=malformed,
            created=int(time.time()),
            model=req.model or self.model,
            cut=cut,
            cache_report=self.cache_report,
        )
        if req.max_new_tokens == 0:  # prefill only: an empty output, at once
            ch.emit(0, True, now())
            if req.stream:
                await self._drain_stream(send, ch, asyncio.get_running_loop())
            else:
                await self._respond_whole(send, ch, asyncio.get_running_loop())
            return
        sreq = SimRequest(len(req.prompt_ids), req.max_new_tokens, req.stream, ch, req.prompt_ids)
        ch.sim = sreq
        loop = asyncio.get_running_loop()
        watcher = loop.create_task(self._watch_disconnect(receive, ch, sreq))
        try:
            self.batcher.submit(sreq)
            if req.stream:
                await self._drain_stream(send, ch, loop)
            else:
                await self._respond_whole(send, ch, loop)
        finally:
            watcher.cancel()
            self.batcher.abort(sreq)

    async def _watch_disconnect(self, receive: Receive, ch: Channel, sreq: SimRequest) -> None:
        """Free the request's batch slot when its client goes away mid-generation."""
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                break
        if not ch.done:
            ch.disconnected = True
            self.batcher.abort(sreq)
            if ch.waiter is not None and not ch.waiter.done():
                ch.waiter.set_result(None)

    async def _drain_stream(self, send: Send, ch: Channel, loop: asyncio.AbstractEventLoop) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        lateness = self.write_lateness
        while True:
            if not ch.pending:
                if ch.disconnected:
                    return
                ch.waiter = loop.create_future()
                await ch.waiter
                ch.waiter = None
                continue
            chunks, deadlines = ch.take()
            done = ch.done
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            await send({"type": "http.response.body", "body": body, "more_body": not done})
            t = now()
            for d in deadlines:
                lateness.record((t - d) * 1000.0)
            self.events += len(deadlines)
            if done:
                return

    async def _respond_whole(
        self, send: Send, ch: Channel, loop: asyncio.AbstractEventLoop
    ) -> None:
        while not ch.done:
            if ch.disconnected:
                return
            ch.waiter = loop.create_future()
            await ch.waiter
            ch.waiter = None
        ids = ch.tokens()
        text = "".join(render(t) for t in ids)
        req = ch.req
        out: dict[str, Any]
        if req.api == "native":
            e2e = ch.finished_at - ch.arrival
            out = protocol.native_response(ch.rid, len(req.prompt_ids), text, ids, e2e, ch.cached)
            if ch.cut == "abort":
                out["meta_info"]["finish_reason"] = protocol.abort_reason(
                    "simulated scheduler abort"
                )
        else:
            out = protocol.openai_response(
                ch.rid, int(time.time()), req.model or self.model, len(req.prompt_ids),
                len(ids), text, ids if req.return_token_ids else None, chat=req.chat,
                cached=ch.reported_cached,
            )  # fmt: skip
            if ch.cut == "abort":
                out["choices"][0]["finish_reason"] = "abort"
        await _send_json(send, 200, out)
        self.write_lateness.record((now() - ch.finished_at) * 1000.0)
        self.events += 1


def _total_tokens(args: dict[str, Any]) -> int:
    """`--max-total-tokens` (a number), else `DEFAULT_TOTAL_TOKENS`."""
    value = args.get("max_total_tokens")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value)
    return DEFAULT_TOTAL_TOKENS


def prefix_cache_of(args: dict[str, Any]) -> RadixCache | None:
    """The prefix cache SGLang's flags describe: none with `--disable-radix-cache`, else
    `--max-total-tokens` of capacity in pages of `--page-size` tokens (default 1)."""
    if args.get("disable_radix_cache", False) is True:
        return None
    page = args.get("page_size")
    page = int(page) if isinstance(page, int) and page > 0 else 1
    return RadixCache(_total_tokens(args), page)


def _crash() -> None:
    """The crash effect: die hard, as an engine process killed by a fault would."""
    sys.stderr.write("matrixrun-sim: simulated crash (effects.crash_after_s reached)\n")
    sys.stderr.flush()
    os._exit(1)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client went away first."""
    parts: list[bytes] = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return None
        parts.append(msg.get("body", b""))
        if not msg.get("more_body", False):
            return b"".join(parts)


def _query_float(scope: Scope, name: str) -> float:
    """A float query parameter (0 when absent or not a number)."""
    values = parse_qs(scope.get("query_string", b"").decode()).get(name)
    try:
        return max(0.0, float(values[0])) if values else 0.0
    except ValueError:
        return 0.0


async def _send_bytes(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_json(send: Send, status: int, obj: Any) -> None:
    body = json.dumps(obj, separators=(",", ":")).encode()
    await _send_bytes(send, status, body, b"application/json")
