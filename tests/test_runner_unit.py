"""The runner against an in-process fake engine: orchestration, time scale, per-cell extras,
relaunch after a crash and a server that will not start, in about a second per test.

Why this seam is mocked: the engine is the one part replaced. A real engine launches a server
subprocess (tests/test_runner.py runs the simulator that way, end to end through the CLI);
here `FakeEngine.serve` returns a handle whose server runs on a thread of this process, on a
real loopback port, speaking SGLang's streaming API over real HTTP (tests/fixedserver.py, with
known timing). Everything else is the real code: `Measurer`, `load.cell.measure_cell` and the
load client, the run directory, the verify driver, the analysis and the report. In process,
a failure can be staged at an exact request (crash after the 5th request) or at startup,
which with a subprocess would depend on timing; and no test could otherwise check the
runner's time-scale handling without the simulator.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fixedserver import Server, parse

from matrixrun.core.errors import EngineError
from matrixrun.core.measurement import Failure
from matrixrun.core.timescale import TimeScale
from matrixrun.engines.base import Api, Launch
from matrixrun.plan import ServerGroup, expand
from matrixrun.run import session
from matrixrun.run.executors import LocalExecutor
from matrixrun.run.measurer import Measurer, RunOptions
from matrixrun.run.record import RunDirRecorder
from matrixrun.rundir.environment import Environment
from matrixrun.rundir.results import RunDir
from matrixrun.spec import parse_spec_file

ROOT = Path(__file__).resolve().parent.parent
TINY = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()
#: No reruns: the exact list of measurements is known.
ONE_RUN = TINY.replace("max_runs: 2", "max_runs: 1")
TTFT_MS, ITL_MS = 40.0, 2.0


class CrashingServer(Server):
    """fixedserver's server, which can crash (drop every connection, stop listening) when a
    given number of generate requests have been answered."""

    def __init__(self, crash_after: int | None) -> None:
        super().__init__(parse(["--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)])[0])
        self.crash_after = crash_after
        self.generated = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.on_crash: Any = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        await super().handle(reader, writer)

    async def generate(self, native: bool, req: dict[str, Any], w: asyncio.StreamWriter) -> bool:
        self.generated += 1
        if self.crash_after is not None and self.generated > self.crash_after:
            self.on_crash()
            return False
        return await super().generate(native, req, w)


@dataclass
class InProcessServer:
    """A `ServerHandle` whose server runs on a thread of the test process."""

    launch: Launch
    name: str
    crash_after: int | None = None
    refuse_start: bool = False
    #: A crashed process is reaped (seen exited) this long after its connections drop.
    reaped_after_s: float = 0.3
    dead: bool = field(default=False, init=False)
    died_at: float = field(default=0.0, init=False)
    health_timeout_s: float | None = field(default=None, init=False)

    def start(self) -> InProcessServer:
        self.server = CrashingServer(self.crash_after)
        self.server.on_crash = self._crash
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.listener = self.loop.run_until_complete(
                asyncio.start_server(self.server.handle, "127.0.0.1", self.launch.port)
            )
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        assert ready.wait(5)
        return self

    def _crash(self) -> None:  # runs on the server's loop
        self.dead, self.died_at = True, time.monotonic()
        self.listener.close()
        for writer in self.server.writers:
            writer.transport.abort()

    def alive(self) -> bool:
        return not self.dead or time.monotonic() - self.died_at < self.reaped_after_s

    def exit_code(self) -> int | None:
        return None if self.alive() else -9

    def log_tail(self, lines: int = 20) -> str:
        return "fake server log" if self.dead else ""

    def death_cause(self) -> str:
        return "RuntimeError: fake crash" if self.dead else ""

    def wait_healthy(self, health_path: str, timeout_s: float) -> float:
        self.health_timeout_s = timeout_s
        if self.refuse_start:
            raise EngineError(f"{self.name} exited with code 3 before it became healthy")
        assert httpx.get(self.launch.base_url + health_path, timeout=5).status_code == 200
        return 0.01

    def stop(self) -> int | None:
        code = -9 if self.dead else None
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()
        return code

    async def _shutdown(self) -> None:
        if not self.dead:
            self._crash()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)


class FakeEngine:
    """An `Engine` whose servers are `InProcessServer`s; it records what the runner asked."""

    name = "fake"
    api: Api = "sglang"
    health_path = "/health"
    info_paths: tuple[str, ...] = ("/stats",)
    launches = True
    flush_path: str | None = "/reset"
    flush_timeout_param: str | None = None
    death_grace_s = 1.0

    def __init__(
        self, time_scale: float = 1.0, crash_first_after: int | None = None, refuse: bool = False
    ) -> None:
        self.time_scale = TimeScale(time_scale)
        self.crash_first_after = crash_first_after
        self.refuse = refuse
        self.handles: list[InProcessServer] = []

    def launch(self, group: ServerGroup, host: str, port: int) -> Launch:
        return Launch(["fake-server"], {}, f"http://{host}:{port}", port)

    def serve(
        self, launch: Launch, name: str, log_path: Path, pid_path: Path | None
    ) -> InProcessServer:
        crash = self.crash_first_after if not self.handles else None
        handle = InProcessServer(launch, name, crash_after=crash, refuse_start=self.refuse)
        self.handles.append(handle)
        return handle

    def api_key(self) -> None:
        return None

    def version(self, info: dict[str, Any]) -> str | None:
        return "fake-1"

    def effective_args(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"requests_at_start": info.get("requests")}

    def cell_extras(self, base_url: str, info: dict[str, Any]) -> dict[str, Any]:
        stats = httpx.get(base_url + "/stats", timeout=5).json()
        return {"fake_requests_since_flush": stats["requests"]}


def measurer(rd: RunDir, engine: FakeEngine, spec_text: str) -> Measurer:
    """The measurer `run_experiment` makes, on the fake engine."""
    source = parse_spec_file(spec_text, ROOT / "tests" / "specs" / "tiny.yaml")
    plan = expand(source.spec, source.hash)
    return Measurer(source, plan, engine, RunDirRecorder(rd), RunOptions())  # type: ignore[arg-type]


def run(tmp_path: Path, engine: FakeEngine, spec_text: str = TINY) -> tuple[Measurer, RunDir]:
    rd = RunDir(tmp_path / "run")
    runner = measurer(rd, engine, spec_text)
    session.run(runner, LocalExecutor())
    for handle in engine.handles:
        assert not handle.thread.is_alive(), "the runner left a server running"
    return runner, rd


def test_runner_measures_every_cell_in_modelled_time(tmp_path: Path) -> None:
    engine = FakeEngine(time_scale=2.0)
    runner, rd = run(tmp_path, engine)
    ms = rd.measurements()
    firsts = [m for m in ms if m.reason == "first"]
    assert sorted(m.cell_id for m in firsts) == sorted(c.cell_id for c in runner.plan.cells())
    assert all(m.ok and m.time_scale == 2.0 and not m.simulated for m in ms)
    # limits.startup_timeout is 60 s modelled: the server on a 2x scale gets 30 s of its time
    assert {h.health_timeout_s for h in engine.handles} == {30.0}
    for m in ms:
        assert m.metrics is not None and m.metrics.mean_ttft_ms is not None
        # the server answers its first token after 40 ms of its time: 80 ms modelled (a
        # runner that did not scale would see 40, one that scaled twice 160)
        assert 2 * TTFT_MS <= m.metrics.mean_ttft_ms < 2 * TTFT_MS + 60
        # per-cell extras come from the engine; the flush before the cell reset its counter
        # (8 measured prompts + 1 warmup at this cell)
        assert m.extra["fake_requests_since_flush"] == 9
        assert "client_cpu" in m.extra and "argv" not in m.extra  # the built-in client ran
    env = Environment.model_validate_json((rd.path / "env.json").read_text())
    assert env.time_scale == 2.0 and not env.simulated
    assert set(env.servers) == {m.instance for m in ms}
    assert all(s.version == "fake-1" for s in env.servers.values())
    events = [e["event"] for e in rd.events()]
    assert events.count("launch") == events.count("stop") == len(engine.handles)
    flushes = [e for e in rd.events() if e["event"] == "flush_cache"]
    assert len(flushes) == len(ms) and all(e["ok"] for e in flushes)
    assert (rd.path / "report.md").is_file()


def test_a_cell_warmup_is_an_unmeasured_copy_of_the_cell(tmp_path: Path) -> None:
    """`warmup_requests: cell`: before each cell the server gets as many unmeasured requests
    as the cell measures (the flush before the cell resets the server's counter), the cell's
    own numbers are untouched, and the report's workload table says what was done."""
    spec_text = ONE_RUN.replace("warmup_requests: 1", "warmup_requests: cell")
    _, rd = run(tmp_path, FakeEngine(), spec_text)
    ms = rd.measurements()
    assert ms and all(m.ok for m in ms)
    assert {m.extra["fake_requests_since_flush"] for m in ms} == {16}  # 8 copies + 8 measured
    assert all(m.metrics is not None and m.metrics.completed == 8 for m in ms)
    settings = json.loads((rd.path / "settings.json").read_text())
    assert settings["spec"]["workload"]["warmup_requests"] == "cell"
    assert "an unmeasured copy of each cell before it" in (rd.path / "report.md").read_text()


def test_a_server_that_crashes_mid_cell_is_relaunched(tmp_path: Path) -> None:
    """The crash drops the connections 0.3 s before the process reads as exited (as a killed
    process's are): the cell is still a death, not a load failure on a live server."""
    engine = FakeEngine(crash_first_after=5)  # dies inside the first cell
    runner, rd = run(tmp_path, engine, ONE_RUN)
    ms = rd.measurements()
    first_group = runner.plan.groups[0]
    crashed, after = ms[0], ms[1]
    assert crashed.group_id == after.group_id == first_group.group_id
    assert not crashed.ok and crashed.instance == f"{first_group.group_id}#1"
    assert crashed.failure is Failure.SERVER_DIED
    assert crashed.error is not None and crashed.error.startswith(
        f"server {crashed.instance} died (exit code -9) during the cell; its first error: "
        "RuntimeError: fake crash"
    )
    # the group's remaining cell runs on a relaunch; nothing is measured twice (max_runs 1)
    assert after.ok and after.instance == f"{first_group.group_id}#2"
    assert len(ms) == len(runner.plan.cells()) and all(m.ok for m in ms[1:])
    assert len(engine.handles) == len(runner.plan.groups) + 1


def test_a_server_that_will_not_start_fails_its_cells_once(tmp_path: Path) -> None:
    engine = FakeEngine(refuse=True)
    runner, rd = run(tmp_path, engine, ONE_RUN)
    ms = rd.measurements()
    assert len(ms) == len(runner.plan.cells()), "a cell that never measured is not retried"
    assert all(not m.ok and "exited with code 3" in (m.error or "") for m in ms)
    assert {m.failure for m in ms} == {Failure.LAUNCH}
    assert len(engine.handles) == len(runner.plan.groups)


def test_no_flush_when_the_spec_says_so(tmp_path: Path) -> None:
    text = TINY.replace("args: {tp: 1}}", "args: {tp: 1}, flush_cache: false}")
    _, rd = run(tmp_path, FakeEngine(), text)
    flushes = [e for e in rd.events() if e["event"] == "flush_cache"]
    assert flushes and not any(e["ok"] for e in flushes)
    assert {e["why"] for e in flushes} == {"engine.flush_cache is false in the spec"}
    # the server's request counter was not reset: the second cell on a server sees both
    first, second = rd.measurements()[:2]
    assert first.instance == second.instance
    counts = [m.extra["fake_requests_since_flush"] for m in (first, second)]
    assert counts == [9, 18]


def test_a_resumed_run_keeps_what_earlier_sessions_recorded(tmp_path: Path) -> None:
    _, rd = run(tmp_path, FakeEngine(), ONE_RUN)
    before = rd.measurements()
    servers = Environment.model_validate_json((rd.path / "env.json").read_text()).servers
    again = FakeEngine()
    runner = measurer(rd, again, ONE_RUN)
    summary = session.run(runner, LocalExecutor())
    assert (summary.measured, summary.skipped) == (0, len(before))
    assert again.handles == [] and rd.measurements() == before
    after = Environment.model_validate_json((rd.path / "env.json").read_text()).servers
    assert after == servers and len(after) == len(runner.plan.groups)


def test_env_json_that_is_not_one_is_named(tmp_path: Path) -> None:
    from matrixrun.core.errors import InputError
    from matrixrun.rundir.environment import read_environment

    path = tmp_path / "env.json"
    assert read_environment(path) is None
    path.write_text('{"servers": {"g#1": {"startup_s": "slow"}}}')
    with pytest.raises(InputError, match=r"env\.json: not an env\.json \(servers\.g#1\.arm"):
        read_environment(path)


def test_a_server_that_dies_in_the_correctness_gate_is_blamed_there(tmp_path: Path) -> None:
    """Issue 42: the real server died answering the gate, the first cell took the blame and
    the report said "0 failed requests". The gate's failure names its phase now, no cell is
    measured on the dead server, and the Checks line says the gate could not run."""
    spec = ONE_RUN.replace(
        "correctness: {enabled: false}",
        "correctness: {enabled: true, prompts: 4, input_len: 8, max_new_tokens: 4}",
    )
    engine = FakeEngine(crash_first_after=0)  # dies at the gate's first prompt
    runner, rd = run(tmp_path, engine, spec)
    ms = rd.measurements()
    crashed = f"{runner.plan.groups[0].group_id}#1"
    first_group = [m for m in ms if m.instance == crashed]
    assert first_group and all(not m.ok for m in first_group)
    error = first_group[0].error or ""
    assert "during the correctness gate" in error and "RuntimeError: fake crash" in error
    gates = [json.loads(p.read_text()) for p in (rd.path / "correctness").glob("*.json")]
    assert any(g["error"] for g in gates)
    settings = json.loads((rd.path / "settings.json").read_text())
    assert settings["analysis"]["correctness_errors"]
    # and the report says it: the gate failed (❌), never the quiet "outputs not checked"
    from matrixrun.report import render_run
    from matrixrun.run.outputs import analyse_run

    analyse_run(rd)
    checks = next(
        line for line in render_run(rd).read_text().splitlines() if line.startswith("**Checks")
    )
    assert "outputs not checked: the correctness gate failed ❌" in checks, checks
    assert "failed measurements" in checks and "0 failed requests ✅" not in checks, checks
