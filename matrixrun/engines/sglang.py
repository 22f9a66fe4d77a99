"""SGLang: `python -m sglang.launch_server --model-path M --host H --port P` plus flags.

Flags come from the spec as snake_case keys and render the way SGLang's argparse reads them
(`python/sglang/srt/server_args.py`): `moe_runner_backend: x` -> `--moe-runner-backend x`,
`true` -> bare flag, `false`/None -> omitted, lists -> one flag followed by the values, dicts ->
JSON. Ready when `/health_generate` answers 200 (it runs a one-token generation, so a server
that accepts connections but cannot generate is not "ready"); `/get_server_info` (older and
newer builds also `/server_info`) reports the version and effective server args.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from matrixrun.engines.base import Api, Launch
from matrixrun.plan import ServerGroup

DEFAULT_LAUNCH = [sys.executable, "-m", "sglang.launch_server"]

#: Keys of /get_server_info that are state, not configuration.
_NOT_ARGS = {"version", "internal_states", "status", "simulated", "sim_stats", "profile",
             "time_scale", "max_total_num_tokens", "max_req_input_len"}


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def render_flags(flags: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for key, value in flags.items():
        if value is None or value is False:
            continue
        name = flag_name(key)
        if value is True:
            argv.append(name)
        elif isinstance(value, list):
            argv += [name, *(json.dumps(v) if isinstance(v, dict) else str(v) for v in value)]
        elif isinstance(value, dict):
            argv += [name, json.dumps(value, separators=(",", ":"))]
        else:
            argv += [name, str(value)]
    return argv


class SGLangEngine:
    name = "sglang"
    api: Api = "sglang"
    health_path = "/health_generate"
    info_paths = ("/get_server_info", "/server_info")

    def __init__(self, launch_prefix: list[str] | None = None,
                 extra_args: list[str] | None = None) -> None:
        self.launch_prefix = launch_prefix
        self.extra_args = extra_args or []

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        prefix = self.launch_prefix or group.launch or DEFAULT_LAUNCH
        argv = [*prefix, "--model-path", group.model.path, "--host", host, "--port", str(port),
                *render_flags(group.flags), *self.extra_args]
        return Launch(argv=argv, env=dict(group.env), base_url=f"http://{host}:{port}",
                      port=port)

    def version(self, info: dict[str, Any]) -> str | None:
        value = info.get("version")
        return str(value) if value is not None else None

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in info.items() if k not in _NOT_ARGS}
