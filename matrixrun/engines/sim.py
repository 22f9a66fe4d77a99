"""The built-in simulator as an engine, for `--rehearse`.

It is the sglang engine with its launch command pointed at `python -m matrixrun.sim` (which
accepts SGLang's launch_server command line) plus the simulator's own options, so a rehearsal
runs the same flag rendering, launch, health, server-info, flush and teardown code as a GPU
node. Each launch gets its own seed: a fresh server is a fresh instance, as on real hardware.

What makes a rehearsal different lives here, not in the runner: the simulator runs
`rehearsal.time_scale` times faster than the hardware it models, so the engine's `time_scale`
carries that factor (the runner and load client convert timeouts, rates and metrics through
it). The per-cell lateness read is the sglang engine's `cell_extras`, which asks any server
that says it is the simulator, rehearsal or not.
"""

from __future__ import annotations

import hashlib
import sys

from matrixrun.core.timescale import TimeScale
from matrixrun.engines.base import Launch
from matrixrun.engines.sglang import Negatable, SGLangEngine
from matrixrun.plan import ServerGroup
from matrixrun.spec import Spec


def rehearsal_engine(
    spec: Spec, seed_material: str, negatable: Negatable | None = None
) -> SimEngine:
    """The sglang engine pointed at the built-in simulator with the spec's profile, time scale
    and stream interval."""
    from matrixrun.sim.profile import Profile

    profile = spec.rehearsal.profile
    if not isinstance(profile, Profile):
        profile = Profile()
    extra = [
        "--profile-json",
        profile.model_dump_json(),
        "--time-scale",
        str(spec.rehearsal.time_scale),
    ]
    if spec.rehearsal.stream_interval:
        extra += ["--stream-interval", str(spec.rehearsal.stream_interval)]
    engine = SimEngine(
        [sys.executable, "-m", "matrixrun.sim"],
        extra,
        seed_material,
        TimeScale(spec.rehearsal.time_scale),
    )
    if negatable is not None:
        engine.negatable = negatable
    return engine


class SimEngine(SGLangEngine):
    """SGLangEngine with the simulator's own arguments and time scale; each launch gets its own
    seed so a fresh server is a fresh instance (instance noise), as on real hardware."""

    name = "simulator"

    def __init__(
        self,
        prefix: list[str],
        extra: list[str],
        seed_material: str,
        time_scale: TimeScale,
    ) -> None:
        super().__init__(prefix, extra)
        self._seed_material = seed_material
        self._launches = 0
        self.time_scale = time_scale

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        self._launches += 1
        seed = int(
            hashlib.sha256(
                f"{self._seed_material}:{group.group_id}:{self._launches}".encode()
            ).hexdigest()[:8],
            16,
        )
        launch = super().launch(group, host, port)
        launch.argv.extend(["--seed", str(seed)])
        return launch
