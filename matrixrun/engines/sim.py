"""The built-in simulator as an engine, for `--rehearse`.

It is the sglang engine with its launch command pointed at `python -m matrixrun.sim` (which
accepts SGLang's launch_server command line) plus the simulator's own options, so a rehearsal
runs the same flag rendering, launch, health, server-info, flush and teardown code as a GPU
node. Each launch gets its own seed: a fresh server is a fresh instance, as on real hardware.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from matrixrun.engines.base import Launch
from matrixrun.plan import ServerGroup
from matrixrun.spec import Spec


def rehearsal_engine(spec: Spec, seed_material: str) -> tuple[SimEngine, float]:
    """The sglang engine pointed at the built-in simulator: the same flag rendering, launch,
    health, server info, flush and teardown code path as on a GPU node."""
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
    engine = SimEngine([sys.executable, "-m", "matrixrun.sim"], extra, seed_material)
    return engine, spec.rehearsal.time_scale


class SimEngine:
    """SGLangEngine with the simulator's own arguments; each launch gets its own seed so a
    fresh server is a fresh instance (instance noise), as on real hardware."""

    name = "simulator"

    def __init__(self, prefix: list[str], extra: list[str], seed_material: str) -> None:
        from matrixrun.engines.sglang import SGLangEngine

        self._inner = SGLangEngine(prefix, extra)
        self._seed_material = seed_material
        self._launches = 0
        self.api = self._inner.api
        self.health_path = self._inner.health_path
        self.info_paths = self._inner.info_paths
        self.launches = True
        self.flush_path = self._inner.flush_path

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        self._launches += 1
        seed = int(
            hashlib.sha256(
                f"{self._seed_material}:{group.group_id}:{self._launches}".encode()
            ).hexdigest()[:8],
            16,
        )
        launch = self._inner.launch(group, host, port)
        launch.argv.extend(["--seed", str(seed)])
        return launch

    def version(self, info: dict[str, Any]) -> str | None:
        return self._inner.version(info)

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]:
        return self._inner.effective_args(info)
