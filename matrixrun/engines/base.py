"""What every engine shares: the `Engine` protocol the runner talks to, a server process in its
own process group (log captured, a health wait that fails fast, a teardown that cannot leave
orphans), and `LaunchedEngine`, the defaults of an engine whose servers are local processes.

An `Engine` knows its own conventions (command line, ready URL, info URL, API) and owns every
serving detail the runner must not know: how a launch becomes a server handle (`serve`), the
key requests carry (`api_key`), how fast its servers run against modelled time (`time_scale`:
the simulator's dilation), and what to record with each cell (`cell_extras`: the simulator's
lateness). The runner never asks which engine it has. `ServerProcess` does the process work
for all launched engines. Mirrors nox's shutdown_process (wait, terminate, kill) and vLLM
sweep's start_new_session + kill the whole group.

Protocol change of issue 11 (for engine authors): besides `launch`, `version` and
`effective_args`, an engine now has `time_scale`, `serve(launch, name, log_path, pid_path)`,
`api_key()` and `cell_extras(base_url, info)`. An engine whose servers are local processes
inherits all four from `LaunchedEngine` and needs no code for them.
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
from typing import Any, Literal, Protocol, runtime_checkable

import httpx
from pydantic import SecretStr

from matrixrun.core.errors import EngineError, StartupTimeout
from matrixrun.core.redact import redact_argv as redact_argv  # re-exported (runner, proposal)
from matrixrun.core.redact import redact_file, redact_text
from matrixrun.core.timescale import REAL, TimeScale
from matrixrun.engines.logcause import first_error
from matrixrun.engines.procs import record_for
from matrixrun.plan import ServerGroup

Api = Literal["sglang", "openai"]


@dataclass(frozen=True)
class Launch:
    """A fully rendered launch: argv (no shell), extra environment, where to reach it."""

    argv: list[str]
    env: dict[str, str]
    base_url: str
    port: int


class ServerHandle(Protocol):
    """A server the runner measures: one it launched (`ServerProcess`) or one already running
    (`openai.RemoteServer`). The runner reaches servers only through this surface."""

    name: str

    def start(self) -> ServerHandle: ...

    def alive(self) -> bool: ...

    def exit_code(self) -> int | None:
        """The process's exit code once it has exited; None while it runs (or if not ours)."""
        ...

    def log_tail(self, lines: int = 20) -> str: ...

    def death_cause(self) -> str:
        """Why the process died, in a few lines of its log: the first error it printed
        (`logcause.first_error`), else its last lines; "" when there is no log."""
        ...

    def wait_healthy(self, health_path: str, timeout_s: float) -> float:
        """Block until ready; the startup time in seconds. Raises EngineError/StartupTimeout."""
        ...

    def stop(self) -> int | None: ...


class Engine(Protocol):
    """One serving engine's conventions, and every serving detail the runner must not know."""

    name: str
    api: Api
    health_path: str
    info_paths: tuple[str, ...]
    #: False for an endpoint that is already running (nothing to start or stop).
    launches: bool
    #: Path that empties the prefix cache between cells; None when the engine has none.
    flush_path: str | None
    #: The query parameter that makes the flush wait for idle (SGLang's `timeout`), or None.
    flush_timeout_param: str | None
    #: How long a server whose requests just failed may take to be seen exiting (the runner
    #: waits this long before it calls a cell a load failure on a live server).
    death_grace_s: float
    #: How much faster than modelled time its servers run: 1 for real engines, the
    #: simulator's `rehearsal.time_scale` in a rehearsal. The runner converts every timeout,
    #: rate and metric through it and never scales a number by itself.
    time_scale: TimeScale

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch: ...

    def serve(
        self, launch: Launch, name: str, log_path: Path, pid_path: Path | None
    ) -> ServerHandle:
        """The (not yet started) server for `launch`: `name` labels it in messages; a launched
        server logs to `log_path` and keeps its pid in `pid_path` while it lives."""
        ...

    def api_key(self) -> SecretStr | None:
        """The key every request carries; None when the server needs none."""
        ...

    def version(self, info: dict[str, Any]) -> str | None: ...

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]: ...

    def cell_extras(self, base_url: str, info: dict[str, Any]) -> dict[str, Any]:
        """Engine-specific facts recorded with a cell's measurement (`Measurement.extra`),
        read right after the cell from a server that is still alive; `info` is what the
        server said about itself when it became healthy. {} when there is nothing to add."""
        ...


@runtime_checkable
class SlowsDown(Protocol):
    """An engine whose servers can run slower than they were asked to: the simulator, which
    halves its time scale for the launches after one whose measurement fell behind its model
    (`core.keeping`; issue 44). A real engine cannot, so the runner asks with isinstance."""

    time_scale: TimeScale

    def slow_down(self) -> TimeScale:
        """Halve the speed-up for every later launch (the running server keeps its own); the
        new time scale."""
        ...


class LaunchedEngine:
    """Defaults for an engine whose servers are local processes started from an argv: real
    time, no API key, a `ServerProcess` per launch, nothing extra per cell. Subclasses set the
    protocol's attributes and write `launch`, `version` and `effective_args`."""

    launches = True
    time_scale: TimeScale = REAL
    flush_timeout_param: str | None = None
    death_grace_s: float = 1.0

    def serve(
        self, launch: Launch, name: str, log_path: Path, pid_path: Path | None
    ) -> ServerProcess:
        return ServerProcess(launch, log_path, pid_path, name=name)

    def api_key(self) -> SecretStr | None:
        return None

    def cell_extras(self, base_url: str, info: dict[str, Any]) -> dict[str, Any]:
        return {}


def free_port(host: str = "127.0.0.1") -> int:
    """An unused TCP port (the server binds it moments later; collisions show as a fast exit)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_cause(path: Path, lines: int = 5) -> str:
    """The first error block of a server log (`logcause.first_error`), else its last `lines`
    lines; redacted like `tail`, as it goes into error messages the same way."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    found = first_error(text)
    if found is None:
        return tail(path, lines)
    return redact_text(found)


def tail(path: Path, lines: int = 20) -> str:
    """The last lines of a server log, secrets redacted: tails go into error messages, and
    from there into results.jsonl and the report (servers print their arguments, keys too)."""
    try:
        with path.open(errors="replace") as fh:
            return redact_text("".join(deque(fh, maxlen=lines)).rstrip())
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
            # pid and start time: a resumed run stops this server if the runner is killed,
            # and only if that pid is still this process (matrixrun.engines.procs)
            self.pid_path.parent.mkdir(parents=True, exist_ok=True)
            self.pid_path.write_text(record_for(self.proc.pid).to_text())
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def log_tail(self, lines: int = 20) -> str:
        return tail(self.log_path, lines)

    def death_cause(self) -> str:
        return log_cause(self.log_path)

    def wait_healthy(self, health_path: str, timeout_s: float, poll_s: float = 0.2) -> float:
        """Block until GET health_path answers 200; return the startup time in seconds.
        A process that exits fails at once, with the last 20 lines of its log."""
        url = self.launch.base_url + health_path
        deadline = self.started_at + timeout_s
        only_refused, last = True, "no check ran"  # for the timeout's sentence
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
                        f"healthy on port {self.launch.port}; its first error: "
                        f"{self.death_cause()} (see {self.log_path})",
                        self.log_tail(),
                    )
                try:
                    # counted to when the successful check was sent: SGLang's handler sleeps
                    # 1 s before it looks, which is no part of the server's startup
                    sent = time.monotonic()
                    code = client.get(url).status_code
                    if code == 200:
                        self.startup_s = sent - self.started_at
                        return self.startup_s
                    only_refused, last = False, f"it answered HTTP {code}"
                except httpx.ConnectError:
                    which = "every" if only_refused else "the last"
                    last = (
                        f"{which} check was refused (connection refused: nothing listened on "
                        f"port {self.launch.port}; does its command line pass the port?)"
                    )
                except httpx.HTTPError as exc:
                    only_refused = False
                    last = f"the last check failed ({type(exc).__name__})"
                if time.monotonic() > deadline:
                    raise StartupTimeout(
                        f"{self.name} was not healthy at {url} within "
                        f"{timeout_s:.0f}s (limits.startup_timeout): {last}; see "
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
        with contextlib.suppress(OSError):
            redact_file(self.log_path)  # the server wrote it: its echo of secrets goes now
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


#: How long a flush may wait for the server to go idle (bench_serving's own default, 60 s):
#: right after a time-capped cell the cut requests are still being aborted.
FLUSH_WAIT_S = 60.0


def flush_cache(
    base_url: str,
    path: str,
    wait_s: float = FLUSH_WAIT_S,
    *,
    timeout_param: str | None = None,
    retry_s: float = 0.5,
) -> str | None:
    """Empty the server's prefix cache; None when it did, else why not (one sentence).

    SGLang refuses a flush (HTTP 400) while requests are running or queued. With
    `timeout_param` the request asks the server to wait for idle itself (0.5.23's
    `/flush_cache?timeout=S`); an older server ignores the query and answers 400 at once, so a
    400 is retried every `retry_s` until `wait_s` is over. Whatever the last answer was is
    the reason given: a flush that did not happen is never silent.
    """
    url = base_url + path
    params = {timeout_param: f"{wait_s:g}"} if timeout_param else None
    deadline = time.monotonic() + wait_s
    last = "no answer"
    with httpx.Client(timeout=httpx.Timeout(wait_s + 30.0, connect=10.0)) as client:
        while True:
            try:
                response = client.post(url, params=params)
            except httpx.HTTPError as exc:
                return f"POST {path} failed ({type(exc).__name__}: {exc})"
            if response.status_code == 200:
                return None
            text = " ".join(response.text.split())[:200]
            last = f"POST {path} answered HTTP {response.status_code}" + (
                f": {text}" if text else ""
            )
            if response.status_code != 400 or time.monotonic() + retry_s > deadline:
                break
            time.sleep(retry_s)
    return f"{last} (after waiting up to {wait_s:g} s for the server to go idle)"


def flush_before_cell(engine: Engine, enabled: bool, base_url: str) -> tuple[bool, str | None]:
    """Empty the prefix cache before a cell: (whether a flush was tried, why none happened or
    None). Every arm sends the same prompts, so a warm cache would flatter whoever runs later;
    `enabled` is the spec's `engine.flush_cache`."""
    if not enabled:
        return False, "engine.flush_cache is false in the spec"
    if engine.flush_path is None:
        return False, f"{engine.name} has no cache-flush endpoint"
    wait_s = engine.time_scale.server_seconds(FLUSH_WAIT_S)
    return True, flush_cache(
        base_url, engine.flush_path, wait_s, timeout_param=engine.flush_timeout_param
    )
