"""Modelled time vs the server's wall time: the one place a time-dilation factor is applied.

A rehearsal's simulator runs `factor` times faster than the hardware it models (so a long
experiment rehearses in minutes). Everything the spec states in modelled time (timeouts,
durations, request rates) must be converted to the server's time before the load client uses
it, and what the client measured converted back. The engine owns the factor
(`Engine.time_scale`: 1 for real servers, `rehearsal.time_scale` for the simulator), so the
runner and the load client apply it without knowing which engine they talk to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from matrixrun.core.metrics import Metrics


@dataclass(frozen=True)
class TimeScale:
    """The server runs `factor` times faster than modelled time (1: real time)."""

    factor: float = 1.0

    def __post_init__(self) -> None:
        if not self.factor > 0:
            raise ValueError(f"a time scale must be positive, got {self.factor}")

    def server_seconds(self, modelled_s: float) -> float:
        """A modelled duration (a timeout, a cell's duration) in the server's wall time."""
        return modelled_s / self.factor

    def server_rate(self, modelled_per_s: float) -> float:
        """A modelled request rate in the server's time; an infinite rate stays infinite."""
        return modelled_per_s if math.isinf(modelled_per_s) else modelled_per_s * self.factor

    def modelled(self, metrics: Metrics) -> Metrics:
        """Metrics measured in the server's time, converted back to modelled time."""
        return metrics.undilated(self.factor)


#: Real time: every real engine's scale.
REAL = TimeScale(1.0)
