"""Is the client itself the bottleneck? A self-check that runs in every cell.

A load client timestamps each streamed event when its event loop gets to it. When the client is
starved of CPU (it shares the host with the engine's scheduler and tokenizer processes on a GPU
node, the normal case), two things go wrong without any error:

* **Coalescing.** Several SSE events wait in the socket buffer and are read in one go; they all
  get the same timestamp, so their gaps are recorded as 0. The median inter-token latency
  collapses towards 0 while mean TPOT (from first and last token) still looks plausible.
* **Loop lag.** Every timestamp is late by however long the loop was busy elsewhere: TTFT grows
  by the lag, and a gap between two tokens is off by up to the lag either way.

So the client measures its own lag while the cell runs (`LagProbe`: a task that asks to wake
every `interval` and records when it woke and how late; the first pass of the loop after a
wake-up is what every event waits for too), counts coalesced events from the records after the
cell, and reads its CPU share. `judge` turns those into which metrics could be distorted and by
how much at most; the measurement carries that as `extra.client_check`, and the analysis keeps
such metrics out of confident verdicts.

The bounds are **time-aligned**: each event (a chunk's arrival, a request's end) is bounded by
the lag of the probe wake-ups around its own time (`aligned`), not by the lag's percentiles over
the whole cell. That matters because the loop is busiest exactly when many events come at once:
at concurrency 1024 and an infinite rate, 1024 first tokens come back together while the loop
is still sending, a stretch one probe wake-up in a thousand sees; the cell's lag percentiles
hide it, the first tokens' own lags do not. Conversely a busy loop while no token was due
(between waves, after the last request) distorts nothing and flags nothing. Per metric family,
each bound as a share of the cell's own value of that statistic and flagged above
`RATIO_LIMIT`:

* TTFT: late by the first token's bound: the mean bound against the mean TTFT, the bounds'
  median/p90/p99 against the TTFT's. Sending adds nothing to it: the raw transport takes a
  request's start and writes its bytes in the same step of the loop (on a connection opened
  before the clock started), so a burst of 1024 sends delays the later *starts*, which TTFT
  does not count (bench_serving's definition), not the time from start to bytes sent.
* ITL percentiles: a gap is off by up to the larger bound of its two ends; the bounds'
  median/p90/p95/p99 against the ITL's (a chunk of k tokens: k values of gap/k, as
  `aggregate.py`). Once more than `COALESCED_LIMIT` of the gaps are zeros (events read together)
  they are pulled down by about twice that share, the median to 0 at half.
* Mean ITL and TPOT: first to last token, two late timestamps over (tokens − 1) gaps, per
  request; e2e: late by the end's bound. Coalescing leaves them be.
* Throughputs: a request's slot stands idle while the client is late reading its end and late
  sending it (at a concurrency limit, the next one waits for that slot), so the rates are
  understated by up to the mean of each request's start and end bounds against its mean e2e.
  That is what a client starved of CPU on a busy host does without using much CPU itself
  (issue 44: a rehearsal's client at 3% CPU lost 14% of a cell's throughput unflagged). And if
  a client process used nearly a whole core (`CPU_LIMIT`), its rate, not the server's, may be
  what was measured; the value is a lower bound, by an unknown amount (recorded as 1.0).

What the probe cannot see: a busy stretch shorter than one probe interval (5 ms) that ended
before the next wake-up was due. Those are at most an interval long, and a lag longer than an
interval gets one interval added (the stretch may have begun up to that long before the probe
was due); below that the bound is what was measured less `TIMER_SLACK_S`, the timer's own
rounding (epoll and libuv take whole-millisecond timeouts, which delay no socket read), so a
quiet loop's timer jitter does not flag a cell. With several client processes (`multi.py`)
each request is judged by its own process's probe.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from matrixrun.core.tuning import CLIENT_LIMIT
from matrixrun.load.records import RequestRecord

#: How often the probe asks to wake (seconds): fine enough for 1 ms lags, cheap (200/s).
PROBE_INTERVAL_S = 0.005
#: How late a sleeping task may wake on an idle loop: epoll_wait and libuv take their timeouts
#: in whole milliseconds, so the probe wakes up to ~1 ms after it was due with nothing else to
#: do. A socket read is not delayed by that rounding (data wakes the loop at once), so this
#: much of each probe lag is not counted against the events around it (without it, a quiet
#: client's p99 ITL at 20 ms read as "up to 10% off" from timer rounding alone).
TIMER_SLACK_S = 0.001
#: Share of inter-chunk gaps that may be exact zeros (same read) before ITL percentiles count
#: as distorted. Real servers send each event in its own write, so a quiet client sees ~0.
COALESCED_LIMIT = 0.01
#: A possible error above this share of a metric's value flags it (and the metric then
#: carries no number of the measurement: `core.keeping`).
RATIO_LIMIT = CLIENT_LIMIT
#: CPU seconds per wall second above which the client may limit throughput (one core).
CPU_LIMIT = 0.9

ITL_PERCENTILES = ("median_itl_ms", "p90_itl_ms", "p95_itl_ms", "p99_itl_ms")
PER_TOKEN = ("mean_itl_ms", "mean_tpot_ms", "median_tpot_ms", "mean_e2e_latency_ms")
TTFT = ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")
THROUGHPUT = ("output_throughput", "input_throughput", "total_throughput", "request_throughput")


@dataclass(frozen=True)
class LagSamples:
    """One client process's probe: when each wake-up came (seconds after the cell's start,
    the clock the records' `start` uses) and how late it was (seconds)."""

    at: list[float]
    lag: list[float]


class LagProbe:
    """Records how late the event loop wakes a sleeping task, and when (see the module
    docstring)."""

    def __init__(self, interval_s: float = PROBE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.wakes: list[float] = []
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        interval, clock = self.interval_s, time.perf_counter
        while True:
            due = clock() + interval
            await asyncio.sleep(interval)
            now = clock()
            self.wakes.append(now)
            self.lags.append(max(0.0, now - due))

    def start(self) -> LagProbe:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def stop(self, t0: float) -> LagSamples:
        """Stop probing; the samples with their wake times relative to `t0` (perf_counter)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        return LagSamples([w - t0 for w in self.wakes], list(self.lags))


@dataclass(frozen=True)
class ClientCheck:
    """What the client saw of itself during one cell, and what it could have distorted.

    `affected` maps a metric name to the most it could be off, as a share of its value
    (1.0 = the value could be meaningless); empty when the client kept up.
    """

    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    coalesced_share: float
    cpu: float | None
    affected: dict[str, float] = field(default_factory=dict)
    #: The mean bound on how late the first tokens were read (ms): the TTFT share the
    #: client may have added, from the lags aligned with the first-token times.
    first_token_lag_ms: float = 0.0
    #: The busiest client process's CPU share (== cpu with one process).
    cpu_max: float | None = None

    @property
    def client_bound(self) -> bool:
        return bool(self.affected)

    def as_dict(self) -> dict[str, object]:
        return {
            "client_bound": self.client_bound,
            "lag_p50_ms": round(self.lag_p50_ms, 3),
            "lag_p99_ms": round(self.lag_p99_ms, 3),
            "lag_max_ms": round(self.lag_max_ms, 3),
            "coalesced_share": round(self.coalesced_share, 4),
            "cpu": None if self.cpu is None else round(self.cpu, 3),
            "cpu_max": None if self.cpu_max is None else round(self.cpu_max, 3),
            "first_token_lag_ms": round(self.first_token_lag_ms, 3),
            "affected": {k: round(v, 4) for k, v in self.affected.items()},
        }


def coalesced(records: Sequence[RequestRecord]) -> tuple[int, int]:
    """(zero gaps, all gaps) between token-carrying chunks of successful requests: a zero gap
    means two events were read in one go, so one of their arrival times is not real."""
    zeros = total = 0
    for r in records:
        if not r.ok:
            continue
        t = r.chunk_times
        for a, b in itertools.pairwise(t):
            total += 1
            zeros += b <= a
    return zeros, total


def _pct(values: Sequence[float] | np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else 0.0


def _bound(affected: dict[str, float], metrics: Sequence[str], error: float, value: float) -> None:
    """Record `metrics` as affected when `error` is more than RATIO_LIMIT of `value`."""
    if value > 0 and error / value > RATIO_LIMIT:
        for m in metrics:
            affected[m] = max(affected.get(m, 0.0), error / value)


def aligned(
    probe: LagSamples, times: np.ndarray, interval_s: float = PROBE_INTERVAL_S
) -> np.ndarray:
    """How late the loop may have handled an event at each of `times` (seconds after the
    start): the larger lag of the probe's wake-ups either side of it (the loop's busy stretch
    that delayed the event delayed a probe due inside it, which woke just before or just after
    the event depending on the loop's phase) less the timer's own rounding (`TIMER_SLACK_S`),
    plus one probe interval where that lag is itself longer than an interval (such a stretch
    may have begun up to an interval before the probe was due). A probe with no samples
    bounds nothing (0)."""
    return _aligned(_arrays(probe), times, interval_s)


def _arrays(probe: LagSamples) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(probe.at, dtype=np.float64), np.asarray(probe.lag, dtype=np.float64)


def _aligned(
    probe: tuple[np.ndarray, np.ndarray], times: np.ndarray, interval_s: float
) -> np.ndarray:
    at, lag = probe
    if not len(at) or not len(times):
        return np.zeros(len(times))
    after = np.searchsorted(at, times, side="left")
    worst = np.maximum(lag[np.minimum(after, len(at) - 1)], lag[np.maximum(after - 1, 0)])
    worst = np.maximum(worst - TIMER_SLACK_S, 0.0)  # the timer's rounding delayed no event
    out: np.ndarray = np.where(worst > interval_s, worst + interval_s, worst)
    return out


@dataclass
class _Bounds:
    """Per-value bounds beside the values they bound, pooled over a cell's requests."""

    ttft: list[float] = field(default_factory=list)
    ttft_err: list[float] = field(default_factory=list)
    itl: list[np.ndarray] = field(default_factory=list)
    itl_err: list[np.ndarray] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    tpot_err: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    e2e_err: list[float] = field(default_factory=list)
    #: how late the request was sent plus how late its end was read: its slot's idle time
    slot_err: list[float] = field(default_factory=list)


def _per_request(records: Sequence[RequestRecord], probes: Sequence[LagSamples]) -> _Bounds:
    """Each successful request's TTFT, ITL values, TPOT and e2e with the most its own
    process's loop lag could have added to each (request i ran in process i % len(probes))."""
    out = _Bounds()
    arrays = [_arrays(p) for p in probes] or [_arrays(LagSamples([], []))]
    for r in records:
        if not r.ok or not r.chunk_times:
            continue
        t = np.asarray(r.chunk_times, dtype=np.float64)
        at = r.start + np.concatenate(([0.0], t, [r.e2e]))
        b = _aligned(arrays[r.index % len(arrays)], at, PROBE_INTERVAL_S)
        sent, b = float(b[0]), b[1:]
        first, end, chunks = float(b[0]), float(b[-1]), b[:-1]
        out.ttft.append(t[0])
        out.ttft_err.append(first)  # the start is taken just before the bytes are written
        k = np.asarray(r.chunk_tokens[1:], dtype=np.int64)
        if len(k):
            keep = k > 0  # a chunk of k tokens gives k values of gap/k (stats.itl_values)
            gap_err = np.maximum(chunks[1:], chunks[:-1])  # either end of the gap was late
            out.itl.append(np.repeat(np.diff(t)[keep] / k[keep], k[keep]))
            out.itl_err.append(np.repeat(gap_err[keep] / k[keep], k[keep]))
        if r.output_tokens > 1 and r.ttft is not None:
            out.tpot.append((r.e2e - r.ttft) / (r.output_tokens - 1))
            out.tpot_err.append(max(first, end) / (r.output_tokens - 1))
        out.e2e.append(r.e2e)
        out.e2e_err.append(end)
        out.slot_err.append(sent + end)
    return out


def judge(
    records: Sequence[RequestRecord],
    probes: Sequence[LagSamples],
    cpu: float | None,
    cpu_max: float | None = None,
) -> ClientCheck:
    """The self-check's verdict for one cell (pure; see the module docstring for the bounds).

    `probes` has one entry per client process; request i ran in process i % len(probes).
    `cpu` is the client's CPU seconds per wall second over all processes, `cpu_max` the
    busiest process's (None: the same as `cpu`, one process)."""
    lag = [x for p in probes for x in p.lag] or [0.0]
    zeros, gaps = coalesced(records)
    share = zeros / gaps if gaps else 0.0
    b = _per_request(records, probes)
    itl = np.concatenate(b.itl) if b.itl else np.zeros(0)
    itl_err = np.concatenate(b.itl_err) if b.itl_err else np.zeros(0)
    affected: dict[str, float] = {}
    for q, name in (
        (50, "median_itl_ms"),
        (90, "p90_itl_ms"),
        (95, "p95_itl_ms"),
        (99, "p99_itl_ms"),
    ):
        _bound(affected, [name], _pct(itl_err, q), _pct(itl, q))
    for q, name in ((50, "median_ttft_ms"), (90, "p90_ttft_ms"), (99, "p99_ttft_ms")):
        _bound(affected, [name], _pct(b.ttft_err, q), _pct(b.ttft, q))
    _bound(affected, ["mean_ttft_ms"], _mean(b.ttft_err), _mean(b.ttft))
    _bound(affected, ["mean_itl_ms", "mean_tpot_ms"], _mean(b.tpot_err), _mean(b.tpot))
    _bound(affected, ["median_tpot_ms"], _pct(b.tpot_err, 50), _pct(b.tpot, 50))
    _bound(affected, ["mean_e2e_latency_ms"], _mean(b.e2e_err), _mean(b.e2e))
    _bound(affected, list(THROUGHPUT), _mean(b.slot_err), _mean(b.e2e))
    if share > COALESCED_LIMIT:  # zero gaps pull the percentiles down; at half, the median is 0
        for m in ITL_PERCENTILES:
            affected[m] = 1.0 if share >= 0.5 else max(2 * share, affected.get(m, 0.0))
    busiest = cpu if cpu_max is None else cpu_max
    if busiest is not None and busiest >= CPU_LIMIT:
        # the measured rate is a lower bound of the server's; by how much the client alone
        # cannot tell, so it is recorded as 1.0
        affected.update(dict.fromkeys(THROUGHPUT, 1.0))
    return ClientCheck(
        _pct(lag, 50) * 1e3, _pct(lag, 99) * 1e3, max(lag) * 1e3, share, cpu, affected,
        first_token_lag_ms=_mean(b.ttft_err) * 1e3, cpu_max=busiest,
    )  # fmt: skip


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0
