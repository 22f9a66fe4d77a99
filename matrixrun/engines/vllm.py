"""vLLM: `vllm serve MODEL --host H --port P` plus flags, rendered as for SGLang.

vLLM's CLI is argparse too, so the same rules apply (`engines/sglang.py`): snake_case keys ->
`--kebab-case`, `true` -> bare flag, `false`/None -> omitted, lists -> one flag then the values,
dicts -> JSON. One difference matters: many vLLM booleans are `BooleanOptionalAction`s that are
on by default (e.g. prefix caching), and omitting a flag keeps the default, so a spec turns one
off with the negative flag spelled as a key, `no_enable_prefix_caching: true`, or with `false`
on a flag the checked flag list shows as `--x/--no-x` (it renders `--no-x`). The parallelism
shorthands map to vLLM's names (`tp` -> `--tensor-parallel-size`; vLLM's own short form is
`-tp`, single dash), so `hardware.args: {tp: 8}` works for either engine.

The model is positional right after the prefix, so a prefix may be a venv's binary
(`[/opt/vllm/bin/vllm, serve]`) or a container whose entrypoint ends in `vllm serve`. Ready when
GET `/health` answers 200; the version comes from GET `/version` (`{"version": ...}`). vLLM has
no endpoint for its effective arguments outside dev mode, so `effective_args` is empty (the
rendered argv is recorded anyway). Its cache reset, POST `/reset_prefix_cache`, exists only with
`VLLM_SERVER_DEV_MODE=1` in the server's environment; without it the flush answers 404 and is
recorded as not done.
"""

from __future__ import annotations

from typing import Any

from matrixrun.core import aliases
from matrixrun.engines.base import Api, Launch, LaunchedEngine
from matrixrun.engines.sglang import Negatable, render_flags, with_container_env
from matrixrun.plan import ServerGroup

DEFAULT_LAUNCH = ["vllm", "serve"]

ALIASES = aliases.VLLM  # `core.aliases`: the report reads the table too


class VLLMEngine(LaunchedEngine):
    name = "vllm"
    api: Api = "openai"
    health_path = "/health"
    info_paths: tuple[str, ...] = ("/version",)
    flush_path: str | None = "/reset_prefix_cache"

    def __init__(
        self, launch_prefix: list[str] | None = None, negatable: Negatable | None = None
    ) -> None:
        self.launch_prefix = launch_prefix
        self.negatable = negatable

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        prefix, _ = with_container_env(
            self.launch_prefix or group.launch or DEFAULT_LAUNCH, group.env
        )
        argv = [*prefix, group.model.path, "--host", host, "--port", str(port)]
        if group.model.tokenizer:
            argv += ["--tokenizer", group.model.tokenizer]
        negatable = self.negatable(group.launch) if self.negatable else ()
        argv += render_flags(group.flags, ALIASES, negatable)
        return Launch(argv=argv, env=dict(group.env), base_url=f"http://{host}:{port}", port=port)

    def version(self, info: dict[str, Any]) -> str | None:
        value = info.get("version")
        return str(value) if value is not None else None

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]:
        return {}
