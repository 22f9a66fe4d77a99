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
from matrixrun.engines.sglang import ALIASES as SGLANG_ALIASES
from matrixrun.engines.sglang import Negatable, SGLangEngine, render_flags
from matrixrun.engines.vllm import ALIASES as VLLM
from matrixrun.plan import ServerGroup
from matrixrun.plan.rehearsal import rehearsal_setup
from matrixrun.spec import Spec


def rehearsal_engine(
    spec: Spec, seed_material: str, negatable: Negatable | None = None
) -> SimEngine:
    """The sglang engine pointed at the built-in simulator with the rehearsal's profile, time
    scale and stream interval (`rehearsal_setup`)."""
    setup = rehearsal_setup(spec)
    if spec.rehearsal.seed is not None:
        seed_material = str(spec.rehearsal.seed)
    extra = [
        "--profile-json",
        setup.profile.model_dump_json(),
        "--time-scale",
        str(setup.time_scale),
    ]
    if setup.stream_interval:
        extra += ["--stream-interval", str(setup.stream_interval)]
    engine = SimEngine(
        [sys.executable, "-m", "matrixrun.sim"],
        extra,
        seed_material,
        TimeScale(setup.time_scale),
        aliases=flag_aliases(spec.engine.kind),
    )
    if negatable is not None:
        engine.negatable = negatable
    return engine


def flag_aliases(kind: str) -> dict[str, str]:
    """How the spec's engine renders its flag keys (`tp` is `--tensor-parallel-size` for vLLM,
    `--tp-size` for SGLang): a rehearsal renders them the same way, so its report's Setup shows
    the flags `plan` shows and a GPU node would get (the simulator reads either spelling)."""
    if kind == "vllm":
        return VLLM
    return SGLANG_ALIASES


class SimEngine(SGLangEngine):
    """SGLangEngine with the simulator's own arguments and time scale; each launch gets its own
    seed so a fresh server is a fresh instance (instance noise), as on real hardware."""

    name = "simulator"
    death_grace_s = 1.0  # the simulator dies at once: no diagnostics sleep to wait out

    def __init__(
        self,
        prefix: list[str],
        extra: list[str],
        seed_material: str,
        time_scale: TimeScale,
        aliases: dict[str, str] | None = None,
    ) -> None:
        super().__init__(prefix, extra)
        self._seed_material = seed_material
        self._launches = 0
        self.time_scale = time_scale
        self.aliases = SGLANG_ALIASES if aliases is None else aliases

    def slow_down(self) -> TimeScale:
        """Halve the speed-up for every later launch (`engines.base.SlowsDown`): the simulator's
        `--time-scale` argument and the factor the runner converts through change together, so
        a server and the numbers read from it always agree on its speed."""
        self.time_scale = TimeScale(self.time_scale.factor / 2)
        at = self.extra_args.index("--time-scale") + 1
        self.extra_args[at] = str(self.time_scale.factor)
        return self.time_scale

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        self._launches += 1
        seed = launch_seed(self._seed_material, group.group_id, self._launches)
        launch = super().launch(group, host, port)
        if self.aliases is not SGLANG_ALIASES:  # the spec's engine's spelling of its flags
            negatable = self.negatable(group.launch)
            given = render_flags(group.flags, SGLANG_ALIASES, negatable)
            at = len(launch.argv) - len(self.extra_args) - len(given)
            launch.argv[at : at + len(given)] = render_flags(group.flags, self.aliases, negatable)
        launch.argv.extend(["--seed", str(seed)])
        return launch


def launch_seed(material: str, group_id: str, launch: int) -> int:
    """The simulator's seed for the n-th launch of a rehearsal (1-based, counted across the
    run): every noise draw of that server follows from it, so the same spec and seed draw
    the same noise (`rehearsal.seed`, recorded in settings.json)."""
    digest = hashlib.sha256(f"{material}:{group_id}:{launch}".encode()).hexdigest()
    return int(digest[:8], 16)
