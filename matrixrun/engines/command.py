"""Any OpenAI-compatible server started from an argument list: `engine.kind: command`.

For engines matrixrun has no module for — `transformers serve`, TGI's `text-generation-launcher`,
llama.cpp's `llama-server`, TensorRT-LLM's `trtllm-serve` — the spec gives the server's argv
with placeholders, and the harness fills them in per launch:

    engine:
      kind: command
      launch: [transformers, serve, "{model}", --host, "{host}", --port, "{port}"]
      ready_path: /health
      version_command: [python3, -c, "import transformers; print(transformers.__version__)"]

`{model}` is the model's path, `{tokenizer}` its tokenizer (the path when none is given),
`{host}`/`{port}` where to listen (the harness picks a free port per launch). A placeholder may
sit inside an argument (`--port={port}`). Per-arm flags append after the argv exactly as for
SGLang (`engines/sglang.py`: snake_case -> `--kebab-case`, `true` -> bare flag), so
`continuous_batching: true` becomes `--continuous-batching`; an arm's own `launch` replaces the
argv (another build). The request API is OpenAI completions; readiness is GET `ready_path`
answering 200; the cache is flushed only where `flush_path` names an endpoint.

The version is the first line that `version_command` prints (run once, no shell, 30 s at
most), else what the server says at `version_path` (its JSON `version`): a version that cannot
be read is recorded as unknown, never guessed.
"""

from __future__ import annotations

import subprocess
from typing import Any

from matrixrun.core.errors import EngineError
from matrixrun.engines.base import Api, Launch, LaunchedEngine
from matrixrun.engines.sglang import Negatable, render_flags, with_container_env
from matrixrun.plan import ServerGroup
from matrixrun.spec import EngineSpec

PLACEHOLDERS = ("{model}", "{tokenizer}", "{host}", "{port}")


def fill(argv: list[str], values: dict[str, str]) -> list[str]:
    """Replace each `{name}` in every argument (no format-string parsing: a literal `{` in an
    argument, as in a JSON flag, is left alone)."""
    out = []
    for arg in argv:
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        out.append(arg)
    return out


class CommandEngine(LaunchedEngine):
    """A server started from the spec's argv; see the module docstring. Serving (a local
    process, real time, no key, nothing extra per cell) is `LaunchedEngine`'s."""

    name = "command"
    api: Api = "openai"

    def __init__(self, spec: EngineSpec, negatable: Negatable | None = None) -> None:
        self.spec = spec
        self.negatable = negatable
        self.health_path = spec.ready_path
        # SGLang's /server_info too: a simulator behind this engine says `simulated` there, and
        # its numbers must be labelled SIMULATED (a 404 elsewhere costs one request).
        self.info_paths: tuple[str, ...] = (
            (spec.version_path,) if spec.version_path else ("/server_info",)
        )
        self.flush_path: str | None = spec.flush_path
        self._version: str | None = None
        self._version_read = False

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        template = group.launch or self.spec.launch
        if not template:
            raise EngineError(
                "engine.kind command needs engine.launch (the server's argv with {port}); "
                "add it to the spec"
            )
        values = {
            "model": group.model.path,
            "tokenizer": group.model.tokenizer or group.model.path,
            "host": host,
            "port": str(port),
        }
        prefix, _ = with_container_env(fill(template, values), group.env)
        negatable = self.negatable(group.launch) if self.negatable else ()
        argv = [*prefix, *render_flags(group.flags, negatable=negatable)]
        return Launch(argv=argv, env=dict(group.env), base_url=f"http://{host}:{port}", port=port)

    def version(self, info: dict[str, Any]) -> str | None:
        """`version_command`'s answer when the spec gives one (what the user asked for), else
        the server's own `version` field."""
        if self.spec.version_command:
            if not self._version_read:
                self._version_read = True
                self._version = _run_version(self.spec.version_command)
            return self._version
        value = info.get("version")
        return str(value) if value is not None else None

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]:
        """Such servers rarely report their arguments: the rendered argv (recorded anyway) is
        the record of what it was given."""
        return {k: v for k, v in info.items() if k != "version"} if info else {}


def _run_version(argv: list[str] | None) -> str | None:
    if not argv:
        return None
    try:
        done = subprocess.run(  # noqa: S603 - argv list from the spec, no shell
            argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or "").strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None
