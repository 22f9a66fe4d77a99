"""Engines: how to start a serving engine's server, know it is ready, read what it runs, and
which request API to speak. One small module per engine; `for_spec` picks one.

Adding an engine is one module with a class that has the `Engine` attributes (`base.Engine`:
name, api, launches, health_path, info_paths, flush_path, time_scale, launch, serve, api_key,
version, effective_args, cell_extras; a launched engine inherits the serving ones from
`base.LaunchedEngine`) and one branch here.
"""

from __future__ import annotations

from matrixrun.core.errors import EngineError
from matrixrun.engines.base import Engine
from matrixrun.engines.command import CommandEngine
from matrixrun.engines.openai import OpenAIEngine
from matrixrun.engines.sglang import Negatable, SGLangEngine
from matrixrun.engines.vllm import VLLMEngine
from matrixrun.spec import EngineSpec


def for_spec(engine: EngineSpec | str, negatable: Negatable | None = None) -> Engine:
    """The engine for a spec's `engine:` section (or just its kind, for the launched engines).

    Rehearsals wrap the sglang engine around the simulator instead (`engines.sim.rehearsal_engine`).
    `negatable` gives a launch's `--x/--no-x` switches (`flags.negatable_for`, from the flag
    list `validate` checks against), so that `false` renders `--no-x`; without it `false` is
    omitted.
    """
    spec = engine if isinstance(engine, EngineSpec) else EngineSpec(kind=engine)
    if spec.kind == "sglang":
        return SGLangEngine(negatable=negatable)
    if spec.kind == "vllm":
        return VLLMEngine(negatable=negatable)
    if spec.kind == "command":
        return CommandEngine(spec, negatable)
    if spec.kind == "openai":
        if not spec.base_url:
            raise EngineError(
                "engine.kind openai needs engine.base_url (the running endpoint, "
                "e.g. http://10.0.0.5:8000); add it to the spec"
            )
        return OpenAIEngine(spec.base_url, spec.api_key_env)
    raise KeyError(spec.kind)
