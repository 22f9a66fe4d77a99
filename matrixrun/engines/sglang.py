"""SGLang: `python -m sglang.launch_server --model-path M --host H --port P` plus flags.

Flags come from the spec as snake_case keys and render the way SGLang's argparse reads them.
Checked against `python/sglang/srt/server_args.py` and `arg_groups/arg_utils.py`, where every
`ServerArgs` field becomes `--field-name`:

* `moe_runner_backend: x` -> `--moe-runner-backend x`;
* `true` -> the bare flag (bool fields are `store_true`); `false`/None -> omitted, i.e. the
  engine default (a default-on feature is turned off with its own `disable_*` flag), except
  for a `--x/--no-x` switch (argparse's BooleanOptionalAction, twelve of them in 0.5.23, and
  most of vLLM's booleans), where `false` renders `--no-x`: omitting it would leave a
  default-on feature on. Which switches have a `--no-` twin comes from the flag list the spec
  is checked against (`flags.negatable_options`);
* a list -> one flag followed by every value (`List[...]` fields are `nargs="+"`, and argparse
  keeps only the last occurrence of a repeated flag, so repeating the flag would silently drop
  values); an empty list is omitted (`nargs="+"` needs a value);
* a dict -> compact JSON (e.g. `--json-model-override-args`), as are dicts inside a list.

Short parallelism keys are rewritten to the declared flag: `tp`/`dp`/`pp`/`ep` -> `--tp-size`
etc. SGLang declares `--tp-size` (alias `--tensor-parallel-size`), `--dp-size`, `--pp-size`
and `--ep-size` (alias `--ep`); `--tp` only works through argparse's prefix matching, which
turns into "ambiguous option" as soon as another `tp_*` field appears (`--pp` already is
ambiguous: `pp_size`, `pp_max_micro_batch_size`, `pp_async_batch_depth`).

Endpoints (`srt/entrypoints/http_server.py`): ready when GET `/health_generate` answers 200 (503
while the server is starting; otherwise it runs a one-token generation, so a server that accepts
connections but cannot generate is not ready). Server info: GET `/server_info` in current builds
(server args + scheduler info + `internal_states` + `version`); `/get_server_info` is the older
name, deprecated with a warning in new builds, so it is the fallback. Its per-launch fields
(`launch_command` with the port, `startup_time`, `kv_events`, the scheduler's `status`, ...) are
not arguments and are left out of `effective_args`, so they never read as "differs between
arms". Cache: GET|POST `/flush_cache` answers 400 while requests are running or queued; with
`?timeout=S` (0.5.23, `flush_wrapper.py`) the scheduler waits up to S seconds for idle before
flushing, and older builds ignore the query, so the runner asks with a timeout and retries a
400 until its own wait is over (`base.flush_cache`).

Arms that differ by build set their own launch prefix (`ServerGroup.launch`): a venv's python
(`[/opt/sgl-b/bin/python, -m, sglang.launch_server]`) or a container (`[docker, run, --rm,
--gpus, all, --network, host, IMAGE, python3, -m, sglang.launch_server]`); the model, host,
port and flags append after the prefix. The group's environment reaches a container through
`-e NAME` options inserted after `run` (the value travels in the docker client's environment,
never on the command line or in the log).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Collection
from pathlib import PurePath
from typing import Any

from matrixrun.core import aliases
from matrixrun.engines.base import Api, Launch, LaunchedEngine, get_json
from matrixrun.plan import ServerGroup

#: The Python that has SGLang, when the spec gives no `engine.launch`: $MATRIXRUN_SGLANG_PYTHON,
#: else the harness's own (which works only when both share an environment; not under nox).
ENGINE_PYTHON = os.environ.get("MATRIXRUN_SGLANG_PYTHON", sys.executable)
DEFAULT_LAUNCH = [ENGINE_PYTHON, "-m", "sglang.launch_server"]

#: Spec shorthands -> the flag SGLang declares (see the module docstring; the table is
#: `core.aliases`, which the report reads too).
ALIASES = aliases.SGLANG

#: Keys of the server-info response that are state, not configuration.
_NOT_ARGS = {
    "version",
    "internal_states",
    "status",
    "simulated",
    "sim_stats",
    "profile",
    "sim_profile",
    "sim_seed",
    "time_scale",
    "max_total_num_tokens",
    "max_req_input_len",
    # per launch in 0.5.23's build_server_info / server_info: never the same twice
    "launch_command",
    "startup_time",
    "kv_events",
    "kv_event_sources",
    "hicache_object_layout",
    "frontend",
}

#: The `--x` options of a launch (an arm's prefix, or None) that have a `--no-x` twin.
Negatable = Callable[[list[str] | None], Collection[str]]


def _none_negatable(launch: list[str] | None) -> Collection[str]:
    return ()


#: Container CLIs whose `run` needs `-e NAME` to pass environment variables into the container.
_CONTAINER_CLIS = {"docker", "podman", "nerdctl"}


def flag_name(key: str, aliases: dict[str, str] | None = None) -> str:
    """`moe_runner_backend` -> `--moe-runner-backend` (after resolving a shorthand alias)."""
    key = (aliases or {}).get(key, key)
    return "--" + key.replace("_", "-")


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def render_flags(
    flags: dict[str, Any],
    aliases: dict[str, str] | None = None,
    negatable: Collection[str] = (),
) -> list[str]:
    """Spec flags -> argv, by the rules in the module docstring (shared by argparse engines).
    `negatable`: the option names that have a `--no-` twin (`false` renders it)."""
    argv: list[str] = []
    for key, value in flags.items():
        name = flag_name(key, aliases)
        if value is False and name in negatable:
            argv.append("--no-" + name.removeprefix("--"))
            continue
        if value is None or value is False or (isinstance(value, list) and not value):
            continue
        if value is True:
            argv.append(name)
        elif isinstance(value, list):
            argv += [name, *(_value(v) for v in value)]
        else:
            argv += [name, _value(value)]
    return argv


def with_container_env(prefix: list[str], env: dict[str, str]) -> tuple[list[str], bool]:
    """Insert `-e NAME` after `run` when `prefix` starts a container; (argv, inserted?).

    Variables set only on the docker client would never reach the server inside the container,
    so a per-arm `env` would silently do nothing; `-e NAME` (without `=value`) makes docker copy
    the value from its own environment, keeping secrets out of argv and the log.
    """
    if not prefix or not env or PurePath(prefix[0]).name not in _CONTAINER_CLIS:
        return list(prefix), False
    try:
        at = prefix.index("run") + 1
    except ValueError:
        return list(prefix), False
    opts = [x for name in env for x in ("-e", name)]
    return [*prefix[:at], *opts, *prefix[at:]], True


class SGLangEngine(LaunchedEngine):
    """SGLang's conventions; `launch_prefix` (e.g. the simulator) overrides the group's."""

    name = "sglang"
    api: Api = "sglang"
    health_path = "/health_generate"
    info_paths: tuple[str, ...] = ("/server_info", "/get_server_info")
    flush_path: str | None = "/flush_cache"
    flush_timeout_param: str | None = "timeout"
    #: A dying SGLang (0.5.23) drops its connections at once, then sleeps 5 s "before crash
    #: diagnostics" before it kills its process tree (../shared/sglang-cpu/NOTES.md).
    death_grace_s: float = 10.0

    def __init__(
        self,
        launch_prefix: list[str] | None = None,
        extra_args: list[str] | None = None,
        negatable: Negatable | None = None,
    ) -> None:
        self.launch_prefix = launch_prefix
        self.extra_args = extra_args or []
        self.negatable = negatable or _none_negatable

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        prefix, _ = with_container_env(
            self.launch_prefix or group.launch or DEFAULT_LAUNCH, group.env
        )
        argv = [*prefix, "--model-path", group.model.path, "--host", host, "--port", str(port)]
        if group.model.tokenizer:
            argv += ["--tokenizer-path", group.model.tokenizer]
        negatable = self.negatable(group.launch)
        argv += [*render_flags(group.flags, ALIASES, negatable), *self.extra_args]
        return Launch(argv=argv, env=dict(group.env), base_url=f"http://{host}:{port}", port=port)

    def version(self, info: dict[str, Any]) -> str | None:
        value = info.get("version")
        return str(value) if value is not None else None

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in info.items() if k not in _NOT_ARGS}

    def cell_extras(self, base_url: str, info: dict[str, Any]) -> dict[str, Any]:
        """A server that says `simulated: true` is matrixrun's simulator speaking SGLang's API
        (a rehearsal, or engine.launch pointed at `python -m matrixrun.sim`): record how late
        it wrote tokens during the cell. Real SGLang is not asked (nothing to read)."""
        return simulator_lateness(base_url, self.info_paths) if info.get("simulated") else {}


def simulator_lateness(base_url: str, info_paths: tuple[str, ...]) -> dict[str, Any]:
    """How late the simulator wrote tokens during the cell (its window restarts at each
    flush): if it fell behind, the numbers do not reflect its model, and the report says so."""
    stats = get_json(base_url, info_paths).get("sim_stats", {})
    if not isinstance(stats, dict):
        return {}
    return {
        f"sim_{kind}_lateness_ms": stats[f"{kind}_lateness_ms"]
        for kind in ("write", "engine")
        if isinstance(stats.get(f"{kind}_lateness_ms"), dict)
    }
