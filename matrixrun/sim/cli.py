"""`python -m matrixrun.sim`: SGLang's launch_server command line, served by the simulator.

The harness launches the simulator exactly as it would launch SGLang (same rendered flags), plus
the simulator's own options, so an arm's flags select its behaviour from the profile's rules the
same way they select kernels on a real server:

    python -m matrixrun.sim --model-path m --port 30000 --tp 8 --moe-runner-backend X \\
        --profile profiles/glm5.yaml --time-scale 20 --seed 3

Any `--some-flag [value ...]` is accepted and recorded under its snake_case name (SGLang's
server-args names; `--tp`, `--dp`, `--ep`, `--pp`, `--model` are aliases as in SGLang): a flag
followed by non-flag tokens takes them as its value (several -> a list), a bare flag is `true`,
a repeated flag collects a list, `--flag=value` works too. Integer- and float-looking values
become numbers (as SGLang's typed parser would), everything else stays a string. The flags feed
`Profile.resolve` and come back in server info as the effective server args.

Simulator options: `--profile FILE` (YAML or JSON Profile; default: the bundled
`profiles/default.yaml`), `--profile-json STRING`, `--time-scale S` (the simulator runs S times
faster than the model; default 1), `--seed N` (noise and effect draws; default 0).
"""

from __future__ import annotations

import gc
import json
import re
import signal
import socket
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from matrixrun.core.profile import ALIASES, Profile
from matrixrun.sim.clock import now
from matrixrun.sim.server import VERSION, SimConfig, SimServer

OWN_FLAGS = ("profile", "profile_json", "time_scale", "seed")
DEFAULT_ARGS: dict[str, Any] = {
    "model_path": "matrixrun-sim-model",
    "host": "127.0.0.1",
    "port": 30000,
    "tp_size": 1,
    "dp_size": 1,
}
_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")
USAGE = __doc__ or ""


class UsageError(ValueError):
    """A command line the simulator cannot run; the message says what to change."""


@dataclass(frozen=True)
class LaunchArgs:
    server_args: dict[str, Any]
    profile: Profile
    time_scale: float
    seed: int


def _coerce(token: str) -> str | int | float:
    if _INT.fullmatch(token):
        return int(token)
    if _FLOAT.fullmatch(token):
        return float(token)
    return token


def parse_flags(argv: list[str]) -> dict[str, Any]:
    """SGLang-style flags to a snake_case dict (pure; see the module docstring for the rules)."""
    flags: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("--") or tok == "--":
            raise UsageError(f"unexpected argument {tok!r}: every option is --name [value]")
        name, eq, inline = tok[2:].partition("=")
        key = name.replace("-", "_")
        key = ALIASES.get(key, key)
        i += 1
        values: list[str] = [inline] if eq else []
        if not eq:
            while i < len(argv) and not argv[i].startswith("--"):
                values.append(argv[i])
                i += 1
        value: Any
        if not values:
            value = True
        elif len(values) == 1:
            value = _coerce(values[0])
        else:
            value = [_coerce(v) for v in values]
        if key in flags:
            old = flags[key]
            value = (old if isinstance(old, list) else [old]) + (
                value if isinstance(value, list) else [value]
            )
        flags[key] = value
    return flags


def load_profile(path: str | None, inline: str | None) -> Profile:
    """The profile from a file (YAML or JSON), an inline JSON/YAML string, or the bundled one."""
    if path is not None and inline is not None:
        raise UsageError("give either --profile or --profile-json, not both")
    if inline is not None:
        text, where = inline, "--profile-json"
    elif path is not None:
        try:
            text, where = Path(path).read_text(encoding="utf-8"), path
        except OSError as e:
            raise UsageError(f"cannot read profile {path}: {e.strerror}") from e
    else:
        text = (
            resources.files("matrixrun.sim")
            .joinpath("profiles/default.yaml")
            .read_text(encoding="utf-8")
        )
        where = "the bundled default profile"
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = YAML(typ="safe").load(text)
        except YAMLError as e:
            raise UsageError(f"{where} is neither JSON nor YAML: {e}") from e
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UsageError(f"{where}: {loc}: {first['msg']} ({e.error_count()} problem(s))") from e


def parse_launch(argv: list[str]) -> LaunchArgs:
    """The whole command line: server flags plus the simulator's own options."""
    flags = parse_flags(argv)
    own = {k: flags.pop(k) for k in OWN_FLAGS if k in flags}
    for k in ("profile", "profile_json"):
        if own.get(k) is True or isinstance(own.get(k), list):
            raise UsageError(f"--{k.replace('_', '-')} needs one value")
    try:
        time_scale = float(own.get("time_scale", 1.0))
        seed = int(own.get("seed", 0))
    except (TypeError, ValueError) as e:
        raise UsageError("--time-scale needs a positive number and --seed an integer") from e
    if not time_scale > 0:
        raise UsageError("--time-scale must be positive (S > 1 runs the model S times faster)")
    path = own.get("profile")
    inline = own.get("profile_json")
    profile = load_profile(
        None if path is None else str(path), None if inline is None else str(inline)
    )
    server_args = {**DEFAULT_ARGS, **flags}
    server_args.setdefault("tokenizer_path", server_args["model_path"])
    server_args.setdefault("served_model_name", server_args["model_path"])
    return LaunchArgs(server_args, profile, time_scale, seed)


class _Server(uvicorn.Server):
    """uvicorn, plus one startup line in the spirit of SGLang's log (the port is what matters)."""

    banner = ""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            sys.stderr.write(self.banner + "\n")
            sys.stderr.flush()


def _terminated(signum: int, frame: FrameType | None) -> None:
    # uvicorn re-raises SIGTERM after its graceful shutdown; make that a clean exit 0
    raise SystemExit(0)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


def serve(launch: LaunchArgs) -> None:
    """Bind, start the engine and serve until SIGTERM/SIGINT."""
    started = now()
    args = launch.server_args
    host = str(args["host"])
    sock = _bind(host, int(args["port"]))
    args["port"] = sock.getsockname()[1]
    app = SimServer(SimConfig(launch.profile, args, launch.time_scale, launch.seed, started))
    try:
        import uvloop  # noqa: F401 - a probe: optional (fast), uvicorn uses it when present

        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    try:
        import httptools  # noqa: F401 - a probe: uvicorn falls back to h11 without it

        http = "httptools"
    except ImportError:
        http = "h11"
    config = uvicorn.Config(
        app,
        loop=loop,
        http=http,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        # uvicorn's default, as SGLang and vLLM run it: an idle kept-alive connection is
        # closed after 5 s, so a rehearsal meets closed connections where a real run does
        timeout_keep_alive=5,
        backlog=4096,
    )
    server = _Server(config)
    server.banner = (
        f"{VERSION}: Uvicorn running on http://{host}:{args['port']} (profile "
        f"{launch.profile.name!r}, time_scale {launch.time_scale:g}, seed {launch.seed}, "
        f"loop {loop}, http {http})"
    )
    signal.signal(signal.SIGTERM, _terminated)
    # Everything allocated so far (uvicorn, pydantic, the profile) lives for the whole run:
    # keep it out of the cyclic GC's full collections, which otherwise stall the loop for
    # milliseconds under load (the same reason SGLang freezes its GC).
    gc.collect()
    gc.freeze()
    server.run(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(USAGE)
        return 0
    try:
        launch = parse_launch(argv)
    except UsageError as e:
        sys.stderr.write(f"matrixrun-sim: {e}\n")
        return 2
    try:
        serve(launch)
    except OSError as e:
        sys.stderr.write(f"matrixrun-sim: cannot listen on {launch.server_args['port']}: {e}\n")
        return 1
    return 0
