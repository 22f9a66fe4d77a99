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
every `interval` and records how late it woke; the first pass of the loop after a wake-up is
what every event waits for too), counts coalesced events from the records after the cell, and
reads its CPU share. `judge` turns those into which metrics could be distorted and by how much
at most; the measurement carries that as `extra.client_check`, and the analysis keeps such
metrics out of confident verdicts.

The bounds, by metric family, each as a share of the cell's own value of that statistic and
flagged above `RATIO_LIMIT`:

* ITL percentiles: one gap is off by the difference of two lags, so the median ITL by about
  two median lags, p90/p95/p99 ITL by the lag's p90/p95/p99; and once more than
  `COALESCED_LIMIT` of the gaps are zeros (events read together) they are pulled down by about
  twice that share, the median to 0 at half.
* Mean ITL and TPOT: first to last token, two late timestamps over (tokens − 1) gaps: the
  largest lag over (shortest output − 1), against the median TPOT. Coalescing leaves them be.
* TTFT: late by the lag when the first token came, which is when the loop is busiest (sending
  a wave): the lag's p90 against the median TTFT, its p99 against the p99 TTFT. e2e: the mean
  lag against the mean e2e latency.
* Throughputs: only if the client used nearly a whole core (`CPU_LIMIT`): then its rate, not
  the server's, may be what was measured; the value is a lower bound, by an unknown amount
  (recorded as 1.0).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from matrixrun.load.records import RequestRecord

#: How often the probe asks to wake (seconds): fine enough for 1 ms lags, cheap (200/s).
PROBE_INTERVAL_S = 0.005
#: Share of inter-chunk gaps that may be exact zeros (same read) before ITL percentiles count
#: as distorted. Real servers send each event in its own write, so a quiet client sees ~0.
COALESCED_LIMIT = 0.01
#: A possible error above this share of a metric's value flags it.
RATIO_LIMIT = 0.10
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
            "affected": {k: round(v, 4) for k, v in self.affected.items()},
        }


def worst(affected: dict[str, float], n: int) -> list[tuple[str, float]]:
    """The `n` metrics with the largest possible error, largest first (what a warning names)."""
    return sorted(affected.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


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


def _pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else 0.0


def _bound(affected: dict[str, float], metrics: Sequence[str], error: float, value: float) -> None:
    """Record `metrics` as affected when `error` is more than RATIO_LIMIT of `value`."""
    if value > 0 and error / value > RATIO_LIMIT:
        for m in metrics:
            affected[m] = max(affected.get(m, 0.0), error / value)


def judge(
    records: Sequence[RequestRecord],
    probes: Sequence[LagSamples],
    cpu: float | None,
    cpu_max: float | None = None,
) -> ClientCheck:
    """The self-check's verdict for one cell (pure; see the module docstring for the bounds)."""
    lag = [x for p in probes for x in p.lag] or [0.0]
    p50, p99, top, mean = _pct(lag, 50), _pct(lag, 99), max(lag), float(np.mean(lag))
    zeros, gaps = coalesced(records)
    share = zeros / gaps if gaps else 0.0
    ok = [r for r in records if r.ok]
    itl = [b - a for r in ok for a, b in itertools.pairwise(r.chunk_times)]
    ttft = [r.ttft for r in ok if r.ttft is not None]
    tpots = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in ok if r.ttft and r.output_tokens > 1]
    shortest = min((r.output_tokens for r in ok if r.output_tokens > 1), default=2)
    affected: dict[str, float] = {}
    # one gap is off by the difference of two lags: the median by about two typical lags
    _bound(affected, ["median_itl_ms"], 2 * p50, _pct(itl, 50))
    for q in (90, 95, 99):
        _bound(affected, [f"p{q}_itl_ms"], _pct(lag, q), _pct(itl, q))
    # first to last token: two late timestamps over (tokens − 1) gaps
    _bound(affected, ["mean_itl_ms", "mean_tpot_ms", "median_tpot_ms"], top / (shortest - 1),
           _pct(tpots, 50))  # fmt: skip
    # the first token of a wave arrives while the loop is busiest (sending the wave): the lag's
    # p90, not its mean, against the median TTFT
    _bound(affected, ["mean_ttft_ms", "median_ttft_ms"], _pct(lag, 90), _pct(ttft, 50))
    _bound(affected, ["p90_ttft_ms", "p99_ttft_ms"], p99, _pct(ttft, 99))
    _bound(
        affected, ["mean_e2e_latency_ms"], mean, float(np.mean([r.e2e for r in ok])) if ok else 0
    )
    if share > COALESCED_LIMIT:  # zero gaps pull the percentiles down; at half, the median is 0
        for m in ITL_PERCENTILES:
            affected[m] = 1.0 if share >= 0.5 else max(2 * share, affected.get(m, 0.0))
    busiest = cpu if cpu_max is None else cpu_max
    if busiest is not None and busiest >= CPU_LIMIT:
        # the measured rate is a lower bound of the server's; by how much the client alone
        # cannot tell, so it is recorded as 1.0
        affected.update(dict.fromkeys(THROUGHPUT, 1.0))
    return ClientCheck(p50 * 1e3, p99 * 1e3, top * 1e3, share, cpu, affected)
