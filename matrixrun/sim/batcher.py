"""The simulated engine: a continuous-batching scheduler driven by a `Curve`.

Requests join a waiting queue; one async loop runs engine iterations. Each iteration admits
waiting requests up to `max_running_requests`, then lasts

    (curve.step_time_ms(batch) + curve.prefill_time_ms(tokens admitted) + compile penalty)
        * instance factor * step noise / time_scale

where the compile penalty is paid the first time a batch-size bucket (next power of two) is
seen, the instance factor is one log-normal draw per launch (`instance_noise`, seeded) and the
step noise one draw per iteration (`noise`). At the iteration's end every running request has
one more token: a request admitted in it gets its first token (TTFT = queueing + its prefill
iteration), the others their next one; a request leaves after `max_new_tokens`.

Deadlines are absolute (each iteration ends at the previous deadline plus its duration, never
"now plus duration"), so time spent formatting and writing never accumulates as drift; how late
the loop actually woke is recorded instead. Per iteration the loop touches only the requests
that emit an event (first token, every `stream_interval`-th token, last token), found by their
phase, not the whole batch, so a 1024-request batch costs O(events) per step.

With a prefix cache (`prefix_cache.RadixCache`; SGLang's radix cache, on unless
`--disable-radix-cache`), an admitted request is charged prefill only for the prompt tokens
past its longest cached prefix (at most all but the last token, as SGLang always computes the
last one), the prefill budget counts those tokens only, and its prompt is cached when its
prefill iteration is over, so requests admitted in the same iteration do not share each
other's prefix. `--schedule-policy lpm` orders the waiting queue before each admission by
cached prefix length, longest first, with SGLang's in-batch rule: a request with a short
cached prefix (≤ 32 tokens) that shares ≥ 32 tokens with a request ahead of it in the queue
goes to the back, so one of a group computes the prefix and the rest find it cached. As in
SGLang, lpm falls back to the queue's current order while more than 128 requests wait.

The batcher knows nothing about HTTP: each request carries a `Sink`, told how many tokens the
request has produced and the deadline they were due at; `server.py` turns that into SSE bytes.
"""

from __future__ import annotations

import asyncio
import enum
import math
import random
from collections import deque
from typing import Protocol

from matrixrun.core.profile import Curve
from matrixrun.sim.clock import DeadlineTimer, now
from matrixrun.sim.lateness import Lateness
from matrixrun.sim.prefix_cache import RadixCache

#: SGLang's `_determine_active_policy`: lpm's prefix matching and sorting are skipped (the
#: queue keeps its order) while more requests than this wait.
LPM_QUEUE_LIMIT = 128
#: SGLang's IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD and ..._DEPRIORITIZE_THRESHOLD (tokens).
IN_BATCH_CHECK = 32
IN_BATCH_DEPRIORITIZE = 32


class Sink(Protocol):
    """Where a request's progress goes (the HTTP side implements it)."""

    def emit(self, produced: int, finished: bool, deadline: float) -> None:
        """`produced` tokens exist (cumulative) as of `deadline` (time.monotonic seconds)."""


class State(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"
    ABORTED = "aborted"


class SimRequest:
    """One generation request as the scheduler sees it."""

    __slots__ = (
        "cached",
        "first_iter",
        "max_new_tokens",
        "prompt",
        "prompt_len",
        "sink",
        "state",
        "stream",
    )

    def __init__(
        self,
        prompt_len: int,
        max_new_tokens: int,
        stream: bool,
        sink: Sink,
        prompt: list[int] | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        self.prompt_len = prompt_len
        #: The prompt's token ids (what the prefix cache matches); None: never cached.
        self.prompt = prompt
        #: Prompt tokens found in the prefix cache at admission (SGLang's `cached_tokens`).
        self.cached = 0
        self.max_new_tokens = max_new_tokens
        self.stream = stream
        self.sink = sink
        self.first_iter = -1
        self.state = State.WAITING


def lognormal_factor(rng: random.Random, rel_sd: float) -> float:
    """A mean-1 log-normal multiplier whose relative standard deviation is `rel_sd`."""
    if rel_sd <= 0:
        return 1.0
    sigma = math.sqrt(math.log1p(rel_sd * rel_sd))
    return rng.lognormvariate(-sigma * sigma / 2, sigma)


class Batcher:
    """Continuous batching on absolute deadlines; see the module docstring for the model."""

    def __init__(
        self,
        curve: Curve,
        *,
        time_scale: float = 1.0,
        stream_interval: int = 1,
        max_running_requests: int | None = None,
        chunked_prefill_size: int | None = None,
        seed: int = 0,
        ready_at: float = 0.0,
        hang_at: float | None = None,
        cache: RadixCache | None = None,
        lpm: bool = False,
    ) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.curve = curve
        self.time_scale = time_scale
        self.stream_interval = max(1, stream_interval)
        self.max_running = max_running_requests or curve.max_running_requests
        self.prefill_budget = chunked_prefill_size or curve.chunked_prefill_size
        self.ready_at = ready_at
        self.hang_at = hang_at
        #: The prefix cache (None: `--disable-radix-cache`); lpm needs one, as in SGLang.
        self.cache = cache
        self.lpm = lpm and cache is not None
        self._rng = random.Random(seed)
        self.instance_factor = lognormal_factor(self._rng, curve.instance_noise)
        self._waiting: deque[SimRequest] = deque()
        self._running: set[SimRequest] = set()
        self._phases: list[set[SimRequest]] = [set() for _ in range(self.stream_interval)]
        self._finish_at: dict[int, list[SimRequest]] = {}
        self._buckets_seen: set[int] = set()
        self._wakeup: asyncio.Future[None] | None = None
        self.iteration = 0
        self.hung = False
        #: When the engine's timeline began (time.monotonic): deadlines count from here, so a
        #: reader can tell the model's times from the event loop's start-up delay.
        self.started_at: float | None = None
        # counters (lifetime of the process)
        self.submitted = 0
        self.completed = 0
        self.aborted = 0
        self.tokens = 0
        self.max_batch = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.compile_events = 0
        self.engine_lateness = Lateness()

    # -- requests -------------------------------------------------------------------------
    def submit(self, req: SimRequest) -> None:
        self.submitted += 1
        self._waiting.append(req)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def abort(self, req: SimRequest) -> None:
        """Drop a request whose client went away (no-op once it finished)."""
        if req.state is State.WAITING:
            self._waiting.remove(req)
        elif req.state is State.RUNNING:
            self._running.discard(req)
            if req.stream:
                self._phases[req.first_iter % self.stream_interval].discard(req)
        else:
            return
        req.state = State.ABORTED
        self.aborted += 1

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def ready(self) -> bool:
        return now() >= self.ready_at

    # -- the model ------------------------------------------------------------------------
    def iteration_seconds(self, batch: int, prefill_tokens: int) -> float:
        """Wall duration of one iteration (consumes one noise draw when noise is on)."""
        curve = self.curve
        ms = curve.step_time_ms(batch)
        if prefill_tokens:
            ms += curve.prefill_time_ms(prefill_tokens)
        bucket = 1 << max(batch - 1, 0).bit_length()
        if bucket not in self._buckets_seen:
            self._buckets_seen.add(bucket)
            if curve.compile_penalty_ms > 0:
                ms += curve.compile_penalty_ms
                self.compile_events += 1
        ms *= self.instance_factor * lognormal_factor(self._rng, curve.noise)
        return ms / 1000.0 / self.time_scale

    # -- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        """Run engine iterations until cancelled."""
        loop = asyncio.get_running_loop()
        timer = DeadlineTimer(loop)
        try:
            await timer.sleep_until(self.ready_at)
            deadline = self.started_at = now()
            while True:
                if not self._running and not self._waiting:
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    deadline = max(deadline, now())
                    continue
                if self.hang_at is not None and now() >= self.hang_at:
                    self.hung = True
                    await loop.create_future()  # never resolves: the engine is stuck
                i = self.iteration
                admitted, prefill = self._admit(i)
                batch = len(self._running)
                self.max_batch = max(self.max_batch, batch)
                deadline += self.iteration_seconds(batch, prefill)
                await timer.sleep_until(deadline)
                self.engine_lateness.record((now() - deadline) * 1000.0)
                self._produce(i, admitted, deadline)
                self.iteration = i + 1
        finally:
            timer.close()

    def _admit(self, i: int) -> tuple[list[SimRequest], int]:
        """Admit waiting requests (queue order, lpm's when on) while a slot and the prefill
        budget allow; returns them and the prompt tokens this iteration computes."""
        if self.lpm and 1 < len(self._waiting) <= LPM_QUEUE_LIMIT:
            self._order_by_prefix()
        cap = self.max_running
        budget = self.prefill_budget
        cache = self.cache
        admitted: list[SimRequest] = []
        tokens = 0
        while self._waiting and (cap is None or len(self._running) < cap):
            req = self._waiting[0]
            cached = 0
            if cache is not None and req.prompt is not None:
                cached = min(cache.match(req.prompt), req.prompt_len - 1)
            new = req.prompt_len - cached
            if budget is not None and admitted and tokens + new > budget:
                break  # the rest waits for the next iteration's prefill chunk
            self._waiting.popleft()
            req.cached = cached
            tokens += new
            req.state = State.RUNNING
            req.first_iter = i
            self._running.add(req)
            self._finish_at.setdefault(i + req.max_new_tokens - 1, []).append(req)
            admitted.append(req)
        for req in admitted:
            self.prompt_tokens += req.prompt_len
            self.cached_tokens += req.cached
            if cache is not None and req.prompt is not None:
                cache.insert(req.prompt)  # computed by this iteration: the next ones find it
        return admitted, tokens

    def _order_by_prefix(self) -> None:
        """lpm: the waiting queue by cached prefix length, longest first (stable), with
        SGLang's in-batch rule (module docstring) sending followers of a new prefix back.

        SGLang keeps the waiting prompts seen so far in a second radix tree and sends a
        prompt back when it matches ≥ `IN_BATCH_DEPRIORITIZE` tokens there; a match that long
        means the same first `IN_BATCH_DEPRIORITIZE` tokens, so a set of those heads answers
        the same question in one lookup (this runs before every admission, on the
        simulator's clock)."""
        cache = self.cache
        assert cache is not None
        heads: set[tuple[int, ...]] = set()  # of the waiting prompts seen so far
        keyed: list[tuple[float, int, SimRequest]] = []
        for n, req in enumerate(self._waiting):
            ids = req.prompt or []
            got = cache.match(ids, touch=False)
            key = float(-got)
            if got <= IN_BATCH_CHECK:
                head = tuple(ids[:IN_BATCH_DEPRIORITIZE])
                if len(head) == IN_BATCH_DEPRIORITIZE and head in heads:
                    key = math.inf
                else:
                    heads.add(head)
            keyed.append((key, n, req))
        keyed.sort(key=lambda t: (t[0], t[1]))
        self._waiting = deque(r for _, _, r in keyed)

    def _produce(self, i: int, admitted: list[SimRequest], deadline: float) -> None:
        self.tokens += len(self._running)
        k = self.stream_interval
        for req in self._finish_at.pop(i, ()):
            if req.state is not State.RUNNING:
                continue
            req.state = State.DONE
            self._running.discard(req)
            if req.stream and req.max_new_tokens > 1:
                self._phases[req.first_iter % k].discard(req)
            self.completed += 1
            req.sink.emit(req.max_new_tokens, True, deadline)
        for req in self._phases[(i + 1) % k]:
            req.sink.emit(i - req.first_iter + 1, False, deadline)
        for req in admitted:
            if req.state is State.RUNNING and req.stream:
                req.sink.emit(1, False, deadline)
                self._phases[i % k].add(req)
