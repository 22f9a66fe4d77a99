"""Lateness statistics: how far behind its modelled deadline the simulator did something.

The simulator is only trustworthy while it keeps up with its own model: a token due at time T
that reaches the socket at T + 3 ms shows up as 3 ms of extra latency in the client's numbers.
So every write (and every engine wake-up) records its lateness here, and server info reports
the summary, which the harness can check before trusting a measurement.

Recording is O(1) and allocation-free (a fixed histogram: 10 µs bins up to 10 ms, 1 ms bins up
to 10 s), because it runs once per streamed event; percentiles come from the histogram, the
mean and max are exact.
"""

from __future__ import annotations

_FINE_BINS = 1000  # 10 µs each, 0..10 ms
_COARSE_BINS = 9990  # 1 ms each, 10 ms..10 s


class Lateness:
    """A running summary of lateness samples in milliseconds (negative = early, kept as 0)."""

    __slots__ = ("_bins", "count", "max_ms", "total_ms")

    def __init__(self) -> None:
        self._bins = [0] * (_FINE_BINS + _COARSE_BINS + 1)
        self.count = 0
        self.total_ms = 0.0
        self.max_ms = 0.0

    def record(self, ms: float) -> None:
        if ms < 0.0:
            ms = 0.0
        self.count += 1
        self.total_ms += ms
        if ms > self.max_ms:
            self.max_ms = ms
        if ms < 10.0:
            self._bins[int(ms * 100.0)] += 1
        else:
            self._bins[min(_FINE_BINS + int(ms - 10.0), _FINE_BINS + _COARSE_BINS)] += 1

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100), at the upper edge of its bin (never optimistic)."""
        if not self.count:
            return 0.0
        rank = q / 100.0 * self.count
        seen = 0
        for i, n in enumerate(self._bins):
            seen += n
            if n and seen >= rank:
                upper = (i + 1) / 100.0 if i < _FINE_BINS else 10.0 + (i - _FINE_BINS + 1)
                return min(upper, self.max_ms)
        return self.max_ms

    def summary(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "mean_ms": self.total_ms / self.count if self.count else 0.0,
            "p50_ms": self.percentile(50),
            "p99_ms": self.percentile(99),
            "max_ms": self.max_ms,
        }
