"""The async load client: drive one server with one cell's workload and record every request.

`run_load(config)` draws the prompts (`prompts.py`), runs the warmup requests (off the clock,
not recorded), then dispatches the measured requests at the configured rate (all at once for
an infinite rate, else Poisson arrivals from the seed) under a concurrency limit, streams each
response through an API parser (`apis.py`), and returns per-request records (`records.py`),
their aggregate metrics (`aggregate.py`) and the client's self-check (`selfcheck.py`). It keeps
real time; time dilation is `cell.py`'s business (with the engine's time scale).

One process measures a `Share` of the cell (`measure_share`: all of it by default); with
`processes` above 1 (or `auto` choosing more) `multi.py` runs one share per child process
from a common start instant and `finish` merges them, so both paths end in the same code.

Per-request failures (HTTP errors, in-stream errors, truncated streams, timeouts, refused
connections) are data: the request's record carries the error text. So are the requests the
cell's time cap ended: cut in flight (`CUT`) or never sent (`NEVER_SENT`), each a record, so
that no count of the cell leaves them out (`cell.py` then fails the run: its survivors are
the fast requests). Only a cell that cannot be
measured at all raises `LoadError`: every warmup request failed, or the server could not be
reached for any request.

Transport: the benchmark (`benchmarks/client_overhead.py`) decides between httpx and a minimal
HTTP/1.1 client on asyncio + httptools (`transport.py`); see there for the numbers.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from matrixrun.core.errors import InputError, LoadError
from matrixrun.core.metrics import Metrics
from matrixrun.load.aggregate import compute_metrics, duration_of
from matrixrun.load.apis import PATHS, Api, StreamParser, make_parser, request_body
from matrixrun.load.datasets import Cell, DatasetConfig
from matrixrun.load.datasets.build import arrivals, requests_for, warmup_for
from matrixrun.load.records import RequestRecord
from matrixrun.load.selfcheck import ClientCheck, LagProbe, LagSamples, judge
from matrixrun.load.transport import (
    CLIENT_LIMIT,
    ConnectFailed,
    HTTPStatusFailed,
    Transport,
    make_transport,
)

#: Warmup requests generate at most this many tokens (as bench_serving does): enough to
#: exercise decode, short enough not to delay the cell.
WARMUP_OUTPUT_LEN = 32

T = TypeVar("T")

#: The error of a measured request the cell's time cap cut in flight. A fixed text (what had
#: arrived is in the record: its tokens, its chunk times), so records count by reason.
CUT = "cut by the cell's time cap"
#: The start of the error of a measured request that never left the client: it is a failure
#: of the cell as much as a cut one (the workload was not what the spec asked), not a request
#: that did not exist.
NEVER_SENT = "never sent: "
#: Why it was never sent: every concurrency slot was still taken when the cap came ...
WAITED = NEVER_SENT + "every concurrency slot was still taken when the cell's time cap came"
#: ... or it was due (its arrival time) only after the cap.
DUE_AFTER = NEVER_SENT + "it was due after the cell's time cap"
#: Server seconds a request that the cap should have ended may take to end (its cancellation
#: cleaned up) before it is abandoned and recorded as cut without its details.
CUT_GRACE_S = 2.0


class LoadConfig(BaseModel):
    """One cell's workload against one server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    api: Api = "sglang"
    model: str | None = Field(None, description="model name sent to the openai API")
    num_prompts: int = Field(ge=1)
    input_len: int = Field(ge=1)
    output_len: int = Field(ge=1)
    concurrency: int = Field(ge=1, description="most requests in flight at once")
    request_rate: float = Field(math.inf, gt=0, description="requests/s; inf sends at once")
    burstiness: float = Field(
        1.0, gt=0, description="gamma shape of the gaps at a finite rate (1: Poisson)"
    )
    warmup_requests: int = Field(1, ge=0)
    warmup_output_len: int | None = Field(
        None, ge=1, description="output tokens per warmup request; None: output_len, at most 32"
    )
    seed: int = 0
    request_timeout_s: float = Field(600.0, gt=0)
    duration_s: float | None = Field(
        None,
        gt=0,
        description="stop sending new requests this long after the start "
        "(num_prompts is then an upper bound); requests in flight finish and count",
    )
    api_key: SecretStr | None = None
    transport: Literal["raw", "httpx"] = "raw"
    time_cap_s: float | None = Field(
        None,
        gt=0,
        description="the cell's time cap: requests not finished this long after the start are "
        "cancelled (and those not yet sent are not sent); each is a failed request with its "
        "reason",
    )
    prompt_format: Literal["token_ids", "text"] = "token_ids"
    tokenizer: str | None = Field(
        None, description="tokenizer.json (or its folder) for prompt_format text"
    )
    strict_openai: bool = Field(
        False, description="send only OpenAI completions fields (no ignore_eos)"
    )
    processes: int | Literal["auto"] = Field(
        "auto",
        description="client processes to spread the requests over; auto: one per 256 of "
        "concurrency, at most the free cores (see multi.py)",
    )
    dataset: DatasetConfig = Field(
        default_factory=DatasetConfig,
        description="what the prompts are (load/datasets): the kind, the token ids drawn",
    )

    @field_validator("processes")
    @classmethod
    def _check_processes(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"must be at least 1 (or auto), got {v}")
        return v

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected a URL like http://127.0.0.1:30000, got {v!r}")
        return v.rstrip("/")


@dataclass(frozen=True)
class LoadResult:
    """What one cell measured: every request's record and their aggregate."""

    records: list[RequestRecord]
    metrics: Metrics
    warmup_failed: int = 0
    #: Requests cut by the time cap (cancelled in flight, or never sent): 0 for a full cell.
    #: Each is also a failed record (`CUT`, `NEVER_SENT`), so the metrics count it.
    capped: int = 0
    #: Warm-up requests cut by the same cap (a `warmup_requests: cell` copy of a capped cell).
    warmup_capped: int = 0
    #: CPU seconds the client process used per wall second of the measured part (1.0 = one
    #: core busy): near 1 the client, not the server, may be what limits the numbers.
    client_cpu: float | None = None
    #: The client's self-check (`selfcheck.py`): its lag, coalesced events, affected metrics.
    check: ClientCheck | None = None
    #: Client processes the requests were spread over (`multi.py`).
    processes: int = 1
    #: The output tokens each request asked for, by index (a dataset's differ per request).
    output_lens: tuple[int, ...] = ()

    def short_outputs(self, output_len: int) -> int:
        """Completed requests that produced fewer tokens than asked (`output_len`, or each
        request's own): the model stopped early, possible only where ignore_eos was not sent."""
        lens = self.output_lens

        def asked(i: int) -> int:
            return lens[i] if i < len(lens) else output_len

        return sum(1 for r in self.records if r.ok and r.output_tokens < asked(r.index))


def cell_of(config: LoadConfig) -> Cell:
    """The sizes the dataset builds the cell's requests from (`load/datasets`)."""
    text = config.prompt_format == "text"
    tokenizer = config.dataset.tokenizer or config.tokenizer
    if text and not tokenizer:
        raise InputError("prompt_format text needs a tokenizer (model.tokenizer or model.path)")
    return Cell(
        config.seed, config.num_prompts, config.input_len, config.output_len, text, tokenizer
    )


def _outcome(parser: StreamParser, output_len: int) -> str:
    """The error text of a stream that ended normally at the HTTP level ('' if it is good)."""
    if parser.error:
        return parser.error
    if parser.ended_at is None:
        return (
            f"stream ended without data: [DONE] or a finish_reason after "
            f"{parser.output_tokens} tokens"
        )
    if not parser.times:
        return "stream ended without any tokens"
    return ""


async def _request(
    transport: Transport,
    api: Api,
    body: bytes,
    index: int,
    prompt_tokens: int,
    output_len: int,
    timeout_s: float,
    t0: float,
    cap_at: float = math.inf,
) -> RequestRecord:
    """Send one request and stream its answer, within its own timeout and the cell's time cap
    (`cap_at`, perf_counter time): what the cap cuts is `CUT`, apart from a request that timed
    out on its own."""
    parser = make_parser(api)
    start = time.perf_counter()
    error = ""
    capped = cap_at - start < timeout_s
    try:
        async with asyncio.timeout(cap_at - start if capped else timeout_s):
            await transport.post_stream(PATHS[api], body, parser)
    except TimeoutError:
        error = (
            CUT
            if capped
            else f"timed out after {timeout_s:g} s ({parser.output_tokens} tokens received)"
        )
    except (ConnectFailed, HTTPStatusFailed) as e:
        error = str(e)
    except Exception as e:  # any transport failure is this request's data, not a crash
        error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    if not error:
        error = _outcome(parser, output_len)
    ended = parser.ended_at
    end = ended if not error and ended is not None else time.perf_counter()
    times = parser.times
    return RequestRecord(
        index=index,
        start=start - t0,
        ttft=times[0] - start if times else None,
        e2e=end - start,
        chunk_times=[t - start for t in times],
        chunk_tokens=parser.tokens,
        prompt_tokens=prompt_tokens if parser.reported_prompt is None else parser.reported_prompt,
        output_tokens=parser.output_tokens,
        error=error,
        cached_tokens=parser.cached,
    )


def _unreachable(records: list[RequestRecord], url: str) -> LoadError | None:
    if records and all(r.error.startswith(ConnectFailed.PREFIX) for r in records):
        if CLIENT_LIMIT in records[0].error:
            return LoadError(records[0].error)
        return LoadError(f"{records[0].error}; is the server running?")
    return None


@dataclass(frozen=True)
class Share:
    """The part of a cell one client process sends: the global indices of its requests, its
    slots of the concurrency and its warmup requests (all of it for one process)."""

    indices: list[int]
    concurrency: int
    warmup: int

    @classmethod
    def whole(cls, config: LoadConfig) -> Share:
        return cls(list(range(config.num_prompts)), config.concurrency, config.warmup_requests)


@dataclass(frozen=True)
class Measured:
    """What one process measured of its share: records with `start` relative to the common
    start instant, its probe's samples, its CPU seconds and the span they were spent in."""

    records: list[RequestRecord]
    lags: LagSamples
    cpu_s: float
    wall_s: float
    capped: int
    warmup_failed: int
    warmup_capped: int = 0


#: Waits for the common start instant and returns it (perf_counter time): "now" for one
#: process, the parent's instant for a worker (`multi.py`).
StartAt = Callable[[], Awaitable[float]]


async def now() -> float:
    """The start instant of a cell measured in this process alone."""
    return time.perf_counter()


def finish(
    config: LoadConfig, parts: list[Measured], cpu: float | None, cpu_max: float | None
) -> LoadResult:
    """Merge what the processes measured (records in global index order) into one result:
    metrics recomputed from all records, the self-check over every process's probe."""
    records = sorted((r for m in parts for r in m.records), key=lambda r: r.index)
    err = _unreachable(records, config.base_url)
    if err:
        raise err
    # cut in flight or never sent: each share has their records (failures with a reason)
    capped = sum(m.capped for m in parts)
    metrics = compute_metrics(records, duration_of(records))
    check = judge(records, [m.lags for m in parts], cpu, cpu_max)
    lens = tuple(r.output_len for r in requests_for(config.dataset, cell_of(config)))
    return LoadResult(
        records, metrics, sum(m.warmup_failed for m in parts), capped=capped, client_cpu=cpu,
        check=check, processes=len(parts), warmup_capped=sum(m.warmup_capped for m in parts),
        output_lens=lens,
    )  # fmt: skip


async def measure_share(config: LoadConfig, share: Share, start_at: StartAt) -> Measured:
    """Warm up, open the share's connections, wait for the start instant, then send the
    share's requests at their global arrival offsets under the share's concurrency. Every
    request of the share that was due before the end (`duration_s`) has a record: the cap's
    cut and unsent ones are failures with their reason, so no count can leave them out."""
    # every process builds the whole cell's requests (same seed, same prompts as one process,
    # before the start instant) and sends its share of them
    cell = cell_of(config)
    reqs = requests_for(config.dataset, cell)
    bodies = {
        i: request_body(
            config.api, reqs[i].prompt, reqs[i].output_len, config.model, config.strict_openai
        )
        for i in share.indices
    }
    offsets = arrivals(config.dataset, cell, config.request_rate, config.burstiness)
    key = config.api_key.get_secret_value() if config.api_key else None
    transport = make_transport(config.transport, config.base_url, share.concurrency, key)
    cap = config.time_cap_s if config.time_cap_s is not None else math.inf
    try:
        warmup_failed, warmup_cut = await _warmup(
            config, transport, share.warmup, share.concurrency
        )
        await transport.prepare(min(share.concurrency, len(share.indices)))
        sem = asyncio.Semaphore(share.concurrency)
        # The cap has come at the first cut, not only when the clock reads it: uvloop rounds
        # timers to whole ms, so a cut can fire up to a ms early and free its slot before the
        # clock reads the cap; a waiter sent then was cut too (5-8 cut at concurrency 4).
        cap_came = asyncio.Event()

        async def limited(i: int, t0: float) -> RequestRecord | None:
            due = time.perf_counter()
            if not await _slot(sem, t0 + cap):
                return _unsent(i, reqs[i].prompt_tokens, due - t0, cap, WAITED)
            try:
                now = time.perf_counter()
                if stop_at is not None and now >= stop_at:
                    return None  # duration-sized cell: the time is up, never sent
                if cap_came.is_set() or now >= t0 + cap:  # the slot came as the cap did
                    return _unsent(i, reqs[i].prompt_tokens, due - t0, cap, WAITED)
                record = await _request(
                    transport, config.api, bodies[i], i, reqs[i].prompt_tokens,
                    reqs[i].output_len, config.request_timeout_s, t0, t0 + cap,
                )  # fmt: skip
                if record.error == CUT:
                    cap_came.set()  # before its slot is released to a waiter
                return record
            finally:
                sem.release()

        t0 = await start_at()
        probe = LagProbe().start()
        cpu0 = time.process_time()
        stop_at = t0 + config.duration_s if config.duration_s is not None else None
        sent, late = _due(config, share, offsets, cap)
        tasks: list[asyncio.Task[RequestRecord | None]] = []
        for i in sent:
            delay = t0 + offsets[i] - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(limited(i, t0)))
        finished, cut = await _within(tasks, t0 + cap + CUT_GRACE_S)
        wall = time.perf_counter() - t0
        cpu_s = time.process_time() - cpu0
        lags = await probe.stop(t0)
    finally:
        await transport.aclose()
    records = [r for r in finished if r is not None]
    # abandoned past the grace (not ended by their own cut), and those due after the cap
    records += [_unsent(sent[p], reqs[sent[p]].prompt_tokens, cap, cap, CUT) for p in cut]
    records += [_unsent(i, reqs[i].prompt_tokens, cap, cap, DUE_AFTER) for i in late]
    records.sort(key=lambda r: r.index)
    capped = sum(1 for r in records if is_capped(r.error))
    return Measured(records, lags, cpu_s, wall, capped, warmup_failed, warmup_cut)


def is_capped(error: str) -> bool:
    """Whether a request's error says the cell's time cap cut it or kept it from being sent."""
    return error == CUT or error.startswith(NEVER_SENT)


def _due(
    config: LoadConfig, share: Share, offsets: list[float], cap: float
) -> tuple[list[int], list[int]]:
    """The share's requests to send (due before the end and the cap), and those due before the
    end but after the cap (never sent: failures). Requests due after `duration_s` are not
    the cell's: a duration-sized cell sends what fits."""
    send: list[int] = []
    late: list[int] = []
    for i in share.indices:
        due = offsets[i]
        if config.duration_s is not None and due >= config.duration_s:
            break
        (send if due < cap else late).append(i)
    return send, late


async def _slot(sem: asyncio.Semaphore, cap_at: float) -> bool:
    """Take a concurrency slot before the cap (`cap_at`, perf_counter time); False when the
    cap came first (the request is then never sent)."""
    if math.isinf(cap_at):
        await sem.acquire()
        return True
    try:
        async with asyncio.timeout(max(0.0, cap_at - time.perf_counter())):
            await sem.acquire()
    except TimeoutError:
        return False
    return True


def _unsent(index: int, prompt_tokens: int, start: float, end: float, why: str) -> RequestRecord:
    """The record of a request the cap ended without an answer: from when it was due (or the
    cap) to the cap, nothing received, `why` as its error."""
    return RequestRecord(
        index=index, start=start, e2e=max(0.0, end - start), prompt_tokens=prompt_tokens,
        error=why,
    )  # fmt: skip


async def _within(tasks: list[asyncio.Task[T]], deadline: float) -> tuple[list[T], list[int]]:
    """The results of the tasks that finish by `deadline` (perf_counter time), in order, and
    the positions of the rest, which are cancelled: a cell that would run for hours ends at
    its cap with what it measured instead of losing everything to a timeout."""
    if not tasks:
        return [], []
    if math.isinf(deadline):
        return list(await asyncio.gather(*tasks)), []
    done, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.perf_counter()))
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return [t.result() for t in tasks if t in done], [
        p for p, t in enumerate(tasks) if t in pending
    ]


async def _warmup(
    config: LoadConfig, transport: Transport, n: int, concurrency: int
) -> tuple[int, int]:
    """Run `n` warmup requests (at most `concurrency` at once); return how many failed and how
    many the cell's time cap cut. The cap bounds the warm-up as it bounds the measured part: a
    `warmup_requests: cell` copy of a cell that the cap cuts would otherwise run to the end
    (256 requests one at a time on the H200: 5 minutes before a 20 s cell) and the cell's
    outer bound would fail it with nothing kept."""
    if n == 0:
        return 0, 0
    out_len = config.warmup_output_len or min(config.output_len, WARMUP_OUTPUT_LEN)
    prompts = warmup_for(config.dataset, cell_of(config), n, out_len)
    sem = asyncio.Semaphore(concurrency)
    t0 = time.perf_counter()

    async def one(i: int) -> RequestRecord:
        async with sem:
            prompt, count = prompts[i].prompt, prompts[i].prompt_tokens
            body = request_body(config.api, prompt, out_len, config.model, config.strict_openai)
            return await _request(
                transport, config.api, body, i, count, out_len, config.request_timeout_s, t0,
            )  # fmt: skip

    cap = config.time_cap_s if config.time_cap_s is not None else math.inf
    records, cut = await _within([asyncio.create_task(one(i)) for i in range(n)], t0 + cap)
    failed = [r for r in records if not r.ok]
    if records and len(failed) == len(records):
        # an unreachable server ends the cell here; any other failure is only the warmup's
        # (a first request that hit a JIT compile, one 500): the measured requests decide
        err = _unreachable(failed, config.base_url)
        if err is not None:
            raise err
    return len(failed), len(cut)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """New event loops for measuring: uvloop's when installed (lower per-event overhead)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is in the "fast" extra
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def validate_config(**kwargs: object) -> LoadConfig:
    """Build a `LoadConfig`, turning validation errors into one-sentence `InputError`s."""
    try:
        return LoadConfig.model_validate(kwargs)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        raise InputError(f"bad load option {_FLAGS.get(where, where)}: {msg}") from None


#: LoadConfig fields by the bench-client flag a user typed.
_FLAGS = {
    "base_url": "--url",
    "num_prompts": "--num-prompts",
    "input_len": "--input-len",
    "output_len": "--output-len",
    "concurrency": "--concurrency",
    "request_rate": "--request-rate",
    "warmup_requests": "--warmup-requests",
    "request_timeout_s": "--timeout",
    "duration_s": "--duration",
    "time_cap_s": "--time-cap",
}
