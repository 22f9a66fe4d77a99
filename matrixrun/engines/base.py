"""What every engine shares: a server process in its own process group, with its log captured,
a health wait that fails fast, and a teardown that cannot leave orphans.

An `Engine` only knows its own conventions (command line, ready URL, info URL, API); the
`ServerProcess` here does the process work for all of them. Mirrors nox's shutdown_process
(wait, terminate, kill) and vLLM sweep's start_new_session + kill the whole group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx

from matrixrun.errors import EngineError, StartupTimeout
from matrixrun.plan import ServerGroup

Api = Literal["sglang", "openai"]


@dataclass(frozen=True)
class Launch:
    """A fully rendered launch: argv (no shell), extra environment, where to reach it."""

    argv: list[str]
    env: dict[str, str]
    base_url: str
    port: int


class Engine(Protocol):
    """One serving engine's conventions."""

    name: str
    api: Api
    health_path: str
    info_paths: tuple[str, ...]
    #: False for an endpoint that is already running (nothing to start or stop).
    launches: bool
    #: Path that empties the prefix cache between cells; None when the engine has none.
    flush_path: str | None

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch: ...

    def version(self, info: dict[str, Any]) -> str | None: ...

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]: ...


def redact_argv(argv: list[str]) -> list[str]:
    """Hide values of flags that look secret (api keys, tokens) before they reach a log."""
    out: list[str] = []
    hide = False
    for arg in argv:
        if hide:
            out.append("***")
            hide = False
            continue
        lowered = arg.lower()
        if lowered.startswith("--") and any(
            s in lowered for s in ("key", "token", "secret", "password")
        ):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=***")
            else:
                out.append(arg)
                hide = True
            continue
        out.append(arg)
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """An unused TCP port (the server binds it moments later; collisions show as a fast exit)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 20) -> str:
    try:
        with path.open(errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines)).rstrip()
    except OSError:
        return ""


@dataclass
class ServerProcess:
    """A launched server. Use as a context manager: it is always stopped on the way out."""

    launch: Launch
    log_path: Path
    pid_path: Path | None = None
    name: str = "server"
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    started_at: float = field(default=0.0, init=False)
    startup_s: float | None = field(default=None, init=False)

    def start(self) -> ServerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.launch.env}
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(redact_argv(self.launch.argv))}\n".encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
                    self.launch.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise EngineError(
                    f"could not start {self.name}: {self.launch.argv[0]}: "
                    f"{exc.strerror}; check engine.launch in the spec"
                ) from exc
        self.started_at = time.monotonic()
        if self.pid_path is not None:
            self.pid_path.parent.mkdir(parents=True, exist_ok=True)
            self.pid_path.write_text(f"{self.proc.pid}\n")
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        return tail(self.log_path, lines)

    def wait_healthy(self, health_path: str, timeout_s: float, poll_s: float = 0.2) -> float:
        """Block until GET health_path answers 200; return the startup time in seconds.
        A process that exits fails at once, with the last 20 lines of its log."""
        url = self.launch.base_url + health_path
        deadline = self.started_at + timeout_s
        with httpx.Client(timeout=httpx.Timeout(10.0, connect=2.0)) as client:
            while True:
                if not self.alive():
                    code = self.proc.returncode if self.proc else None
                    if "No module named 'sglang'" in self.log_tail().replace('"', "'"):
                        raise EngineError(
                            f"{self.name}: its Python ({self.launch.argv[0]}) has no SGLang; set "
                            "engine.launch to the Python (or container) that has it, or export "
                            "MATRIXRUN_SGLANG_PYTHON=/path/to/python",
                            self.log_tail(),
                        )
                    raise EngineError(
                        f"{self.name} exited with code {code} before it became "
                        f"healthy on port {self.launch.port}; see {self.log_path}",
                        self.log_tail(),
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        self.startup_s = time.monotonic() - self.started_at
                        return self.startup_s
                if time.monotonic() > deadline:
                    raise StartupTimeout(
                        f"{self.name} was not healthy at {url} within "
                        f"{timeout_s:.0f}s (limits.startup_timeout); see "
                        f"{self.log_path}",
                        self.log_tail(),
                    )
                time.sleep(poll_s)

    def stop(self, grace_s: float = 20.0) -> int | None:
        """Terminate the whole process group, wait, then kill it. Idempotent."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                proc.wait(10)
        self._signal(signal.SIGKILL)  # children that outlived their parent
        if self.pid_path is not None:
            self.pid_path.unlink(missing_ok=True)
        return proc.returncode

    def _signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def __enter__(self) -> ServerProcess:
        return self if self.proc else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def get_json(base_url: str, paths: tuple[str, ...], timeout_s: float = 10.0) -> dict[str, Any]:
    """The first of `paths` that answers JSON (servers differ in which they have)."""
    with httpx.Client(timeout=timeout_s) as client:
        for path in paths:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                response = client.get(base_url + path)
                if response.status_code == 200:
                    data = response.json()
                    return data if isinstance(data, dict) else {"value": data}
    return {}


def post_ok(base_url: str, path: str, timeout_s: float = 30.0) -> bool:
    try:
        with httpx.Client(timeout=timeout_s) as client:
            return client.post(base_url + path).status_code == 200
    except httpx.HTTPError:
        return False
