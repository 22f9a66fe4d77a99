"""How fast a rehearsal may run and how long it will take: arithmetic on a profile's curve.

Two questions a newcomer has before the first `--rehearse` (issue 33): "why does this take
seven minutes?" and "how long will it take?". A rehearsal of a spec that brings no profile
ran in real time (time scale 1) although nothing in it is real; it now runs as fast as the
load client can follow, and `plan` estimates its wall time from the same numbers.

The limit on the speed-up is the client, not the simulator: at time scale S one engine step
of `step_ms` lasts step_ms / S, and each of the batch's requests sends an event every
`stream_interval` tokens, so the client reads batch / stream_interval events per step. The
committed example rehearsal (spec/glm5_cutedsl.yaml: concurrency 1024, ×50, 8 tokens per
event) reads about 15 000 events/s on a 2-core machine with its self-check clean; the budget
below keeps well under it. Pure: no clocks, no I/O.
"""

from __future__ import annotations

import math

from matrixrun.core.profile import Curve

#: Events per second the default speed-up may ask of the load client (see the module doc).
EVENT_BUDGET = 10_000.0
#: Speed-ups tried for a spec without a profile, fastest first (10: a step of 20 ms lasts 2 ms,
#: still far above the event loop's resolution).
SCALES = (10.0, 5.0, 2.0, 1.0)
#: Tokens per streamed event for a spec without a profile (the client reads a quarter as many
#: events; TTFT and the last token are exact, inter-token times are per 4 tokens).
STREAM_INTERVAL = 4
#: Real seconds around each launch (simulator start, health check, correctness gate) and each
#: cell (cache flush, client start), measured on the lent 2-core machine (docs/benchmarks.md).
LAUNCH_S = 7.0
CELL_S = 1.0


def events_per_second(curve: Curve, batch: int, stream_interval: int, scale: float) -> float:
    """Streamed events per real second at a steady `batch` of running requests."""
    step_s = curve.step_time_ms(batch) / scale / 1000.0
    return batch / stream_interval / step_s


def safe_scale(curves: list[Curve], max_batch: int, stream_interval: int) -> float:
    """The fastest of `SCALES` at which no curve asks more than `EVENT_BUDGET` events/s at
    the largest batch the matrix runs (1 when none does)."""
    for scale in SCALES:
        if all(
            events_per_second(c, _batch(c, max_batch), stream_interval, scale) <= EVENT_BUDGET
            for c in curves
        ):
            return scale
    return 1.0


def cell_seconds(
    curve: Curve, concurrency: int, num_prompts: int, input_len: int, output_len: int
) -> float:
    """Modelled seconds of one cell: waves of `concurrency` requests, each a prefill step and
    `output_len` decode steps at that batch (continuous batching overlaps waves a little, so
    this errs long)."""
    batch = _batch(curve, min(concurrency, max(num_prompts, 1)))
    waves = math.ceil(max(num_prompts, 1) / batch)
    wave_ms = curve.prefill_time_ms(batch * input_len) + output_len * curve.step_time_ms(batch)
    return waves * wave_ms / 1000.0


def _batch(curve: Curve, batch: int) -> int:
    return min(batch, curve.max_running_requests or batch)
