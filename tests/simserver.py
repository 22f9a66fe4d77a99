"""Start the simulator as a real subprocess for tests: `with start_sim([...]) as (proc, url):`.

Reusable by any test that needs a live server (engines, load client, runner): it picks a free
port, starts `python -m matrixrun.sim` in its own process group with its output in a log file,
waits until `wait_path` answers 200, and on exit terminates (then kills) the whole group.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


class SimProcess(subprocess.Popen[bytes]):
    """A simulator process; `log_path` holds its stdout+stderr."""

    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it lingers."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)
        except ProcessLookupError:
            pass
    else:  # the leader died (crash tests); reap anything left in its group
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


@contextmanager
def start_sim(
    args: list[str],
    *,
    wait_path: str | None = "/health",
    timeout: float = 20.0,
) -> Iterator[tuple[SimProcess, str]]:
    """Run `python -m matrixrun.sim ARGS --port <free>`; yield (process, base URL).

    Returns once `wait_path` answers at all (the process serves HTTP; like SGLang, the
    simulator's /health says 503 until it is ready). `wait_path=None` returns as soon as the
    process is spawned (for startup-behaviour tests).
    """
    port = free_port()
    fd, log_name = tempfile.mkstemp(prefix="matrixrun-sim-", suffix=".log")
    cmd = [sys.executable, "-m", "matrixrun.sim", "--host", "127.0.0.1", "--port", str(port), *args]
    with os.fdopen(fd, "wb") as log:
        proc = SimProcess(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True
        )
    proc.log_path = Path(log_name)
    base = f"http://127.0.0.1:{port}"
    try:
        if wait_path is not None:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"simulator exited with {proc.returncode}:\n{proc.log()}")
                try:  # any answer: the process serves (/health says 503 while starting)
                    httpx.get(base + wait_path, timeout=1.0)
                    break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"simulator not healthy in {timeout}s:\n{proc.log()}")
                time.sleep(0.05)
        yield proc, base
    finally:
        stop(proc)
        proc.log_path.unlink(missing_ok=True)
