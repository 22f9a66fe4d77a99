"""Orchestration: launch each server group, measure its cells, verify, analyse, report.

The runner owns the order of work and the run directory; it decides nothing about statistics.
What to rerun comes from `verify.py` (a pure policy over the measurements so far), verdicts
from `analysis.py`, the document from `report.py`. Every measurement is appended to
results.jsonl the moment it completes, so an interrupted run loses at most the cell in flight,
and `--resume` continues from what is there (a resumed run replays the same policy over the
same measurements, so it asks for the same reruns).

Failure handling: a failing cell (timeout, errors, a server that died under it) is recorded as
a failed measurement with its reason and the run goes on; a server that died is relaunched for
the group's remaining cells; a server that will not start marks the group's cells failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from matrixrun import stages
from matrixrun.engines.base import (
    Engine,
    ServerProcess,
    free_port,
    get_json,
    post_ok,
    redact_argv,
)
from matrixrun.environment import capture_environment
from matrixrun.errors import EngineError, InputError, LoadError, MatrixError
from matrixrun.load.client import LoadConfig, run_load
from matrixrun.load.records import write_jsonl
from matrixrun.measurement import Measurement, Reason
from matrixrun.plan import Cell, Plan, ServerGroup, expand
from matrixrun.rerun_reason import RerunWhy
from matrixrun.results import RunDir, now_iso
from matrixrun.spec import Spec, spec_hash

HOST = "127.0.0.1"
T = TypeVar("T")


class Observer(Protocol):
    """Progress sink (the CLI's rich display, or nothing). Never affects what is measured."""

    def start(self, total_runs: int) -> None: ...

    def status(self, text: str) -> None: ...

    def measured(self, m: Measurement, note: str) -> None: ...

    def finish(self) -> None: ...


class NullObserver:
    def start(self, total_runs: int) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def measured(self, m: Measurement, note: str) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass
class RunOptions:
    rehearse: bool = False
    time_scale: float = 1.0
    observer: Observer = field(default_factory=NullObserver)


@dataclass
class RunSummary:
    run_dir: Path
    measured: int
    failed: int
    skipped: int
    report: Path | None


@dataclass
class Instance:
    """A live server of one group: which launch of the group it is and its process."""

    group: ServerGroup
    name: str
    server: ServerProcess
    base_url: str


class Runner:
    def __init__(
        self, spec: Spec, spec_text: str, run_dir: RunDir, engine: Engine, options: RunOptions
    ) -> None:
        self.spec = spec
        self.spec_text = spec_text
        self.run_dir = run_dir
        self.engine = engine
        self.options = options
        self.plan: Plan = expand(spec, spec_hash(spec_text))
        self.measurements: list[Measurement] = run_dir.measurements()
        self.launch_counts: dict[str, int] = {}
        # instance names continue after a resume: count earlier launches, measured or not
        launched = [
            (str(e.get("group")), str(e.get("instance")))
            for e in run_dir.events()
            if e.get("event") == "launch"
        ]
        launched += [(m.group_id, m.instance) for m in self.measurements]
        for group_id, instance in launched:
            tail = instance.rsplit("#", 1)[-1]
            number = int(tail) if tail.isdigit() else 0
            self.launch_counts[group_id] = max(self.launch_counts.get(group_id, 0), number)
        self.new_measurements = 0
        self.hardware: dict[str, Any] | None = None
        self.skipped = 0
        self.servers: dict[str, dict[str, Any]] = {}
        #: Instances whose server info says they are a simulator: their numbers are labelled
        #: simulated even outside --rehearse (e.g. engine.launch pointed at matrixrun.sim).
        self.simulated_instances: set[str] = set()

    # -- bookkeeping --------------------------------------------------------------------
    def attempts(self, cell: Cell) -> list[Measurement]:
        return [m for m in self.measurements if m.cell_id == cell.cell_id]

    def record(self, m: Measurement, note: str = "") -> None:
        self.run_dir.append(m)
        self.measurements.append(m)
        self.new_measurements += 1
        self.options.observer.measured(m, note)

    # -- servers ------------------------------------------------------------------------
    @contextlib.contextmanager
    def launched(self, group: ServerGroup) -> Iterator[Instance]:
        number = self.launch_counts.get(group.group_id, 0) + 1
        self.launch_counts[group.group_id] = number
        name = f"{group.group_id}#{number}"
        launch = self.engine.launch(group, HOST, free_port(HOST))
        label = f"{self.engine.name} server {name} ({group.arm})"
        server: Any
        if self.engine.launches:
            server = ServerProcess(
                launch, self.run_dir.log_file(name), self.run_dir.pid_file(name), name=label
            )
        else:  # an endpoint that is already running: not ours to start or stop
            server = self.engine.serve(launch, name=label)  # type: ignore[attr-defined]
        self.options.observer.status(f"launching {group.arm} ({name})")
        self.run_dir.event(
            "launch",
            instance=name,
            group=group.group_id,
            arm=group.arm,
            argv=redact_argv(launch.argv),
            port=launch.port,
        )
        server.start()
        try:
            startup = server.wait_healthy(
                self.engine.health_path, self.spec.limits.startup_timeout / self._scale
            )
            info = get_json(launch.base_url, self.engine.info_paths)
            if info.get("simulated"):
                self.simulated_instances.add(name)
            self.servers[name] = {
                "group": group.group_id,
                "arm": group.arm,
                "slice": group.slice,
                "startup_s": round(startup, 3),
                "version": self.engine.version(info),
                "args": self.engine.effective_args(info),
                "argv": redact_argv(launch.argv),
            }
            self.run_dir.event("healthy", instance=name, startup_s=round(startup, 3))
            self._write_env()
            self._correctness(group, launch.base_url)
            yield Instance(group, name, server, launch.base_url)
        finally:
            code = server.stop()
            self.run_dir.event("stop", instance=name, returncode=code)

    def _correctness(self, group: ServerGroup, base_url: str) -> None:
        """Once per group: the arm answers the fixed greedy prompts (the correctness gate).
        A failure is recorded for the report; it does not stop the measurements."""
        c = self.spec.correctness
        target = self.run_dir.path / "correctness" / f"{group.group_id}.json"
        if not c.enabled or target.exists():
            return
        from matrixrun.correctness import collect

        record: dict[str, Any] = {
            "arm": group.arm,
            "slice": group.slice,
            "answers": None,
            "error": None,
        }
        self.options.observer.status(f"correctness gate: {group.arm}")
        try:
            record["answers"] = asyncio.run(
                collect(
                    base_url,
                    self.spec.engine.api or self.engine.api,
                    c,
                    group.model.path,
                    api_key=self._api_key(),
                    timeout_s=self.spec.limits.request_timeout / self._scale,
                )
            )
        except MatrixError as exc:
            record["error"] = str(exc)
        self.run_dir.write_json(f"correctness/{group.group_id}.json", record)
        self._write_env()

    def _flush(self, inst: Instance, cell: Cell) -> None:
        """Empty the prefix cache before a cell (every arm sends the same prompts, so a warm
        cache would flatter whoever runs later); recorded either way."""
        why = None
        if not self.spec.engine.flush_cache:
            why = "engine.flush_cache is false in the spec"
        elif self.engine.flush_path is None:
            why = f"{self.engine.name} has no cache-flush endpoint"
        ok = why is None and post_ok(inst.base_url, str(self.engine.flush_path))
        extra = {"why": why} if why else {}
        self.run_dir.event("flush_cache", instance=inst.name, cell=cell.cell_id, ok=ok, **extra)

    def _api_key(self) -> Any:
        getter = getattr(self.engine, "api_key", None)
        return getter() if callable(getter) else None

    @property
    def _scale(self) -> float:
        return self.options.time_scale

    # -- measuring ----------------------------------------------------------------------
    def measure(self, inst: Instance, cell: Cell, reason: Reason) -> Measurement:
        attempt = len(self.attempts(cell)) + 1
        s, w = self._scale, self.spec.workload
        self._flush(inst, cell)
        self.options.observer.status(
            f"{inst.group.arm} {self.plan.axis}={cell.x} "
            f"attempt {attempt} ({reason}) on {inst.name}"
        )
        rate = float(cell.point["request_rate"])
        config = LoadConfig(
            base_url=inst.base_url,
            api=self.spec.engine.api or self.engine.api,
            model=inst.group.model.path,
            num_prompts=cell.num_prompts,
            input_len=int(cell.point["input_len"]),
            output_len=int(cell.point["output_len"]),
            concurrency=int(cell.point["concurrency"]),
            request_rate=rate if math.isinf(rate) else rate * s,
            warmup_requests=w.warmup_requests,
            seed=w.seed,
            request_timeout_s=self.spec.limits.request_timeout / s,
            duration_s=w.duration / s if w.duration is not None else None,
            api_key=self._api_key(),
        )
        use_bench_serving = self.spec.engine.client == "bench_serving" and not self.options.rehearse
        base = dict(
            cell_id=cell.cell_id,
            point_id=cell.point_id,
            arm=cell.arm,
            group_id=inst.group.group_id,
            slice=cell.slice,
            point=cell.point,
            attempt=attempt,
            instance=inst.name,
            reason=reason,
            simulated=self.options.rehearse or inst.name in self.simulated_instances,
            time_scale=s,
            started_at=now_iso(),
            client="bench_serving" if use_bench_serving else "builtin",
        )
        extra: dict[str, Any] = {}
        error: str | None = None
        metrics = None
        requests_file = None
        try:
            if use_bench_serving:
                from matrixrun.load.bench_serving_client import run_bench_serving

                metrics, records, argv = run_bench_serving(
                    config,
                    self.run_dir.path / "bench_serving" / f"{cell.cell_id}-{attempt}",
                    self.spec.engine.client_launch,
                    self.spec.limits.cell_timeout,
                    tokenizer=inst.group.model.tokenizer,
                )
                extra["argv"] = redact_argv(argv)
            else:
                result = asyncio.run(_bounded(run_load(config), self.spec.limits.cell_timeout / s))
                metrics, records = result.metrics.undilated(s), result.records
            path = self.run_dir.requests_file(cell.cell_id, attempt)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_jsonl(path, records)
            requests_file = str(path.relative_to(self.run_dir.path))
            if metrics.completed == 0:
                first = next((r.error for r in records if r.error), "no request completed")
                error = f"every request failed: {first}"
        except TimeoutError:
            error = (
                f"cell timed out after {self.spec.limits.cell_timeout:.0f}s (limits.cell_timeout)"
            )
        except LoadError as exc:
            error = str(exc)
        if not inst.server.alive():
            code = inst.server.proc.returncode if inst.server.proc else None
            error = (
                f"server {inst.name} died (exit code {code}) during the cell; last log "
                f"lines: {inst.server.log_tail(5)}"
            )
        if inst.name in self.simulated_instances and inst.server.alive():
            extra.update(self._sim_lateness(inst.base_url))
        return Measurement(
            **base,
            metrics=metrics,
            error=error,
            finished_at=now_iso(),
            requests_file=requests_file,
            extra=extra,
        )

    def _sim_lateness(self, base_url: str) -> dict[str, Any]:
        """How late the simulator wrote tokens during the cell (its window restarts at each
        flush): if it fell behind, the numbers do not reflect its model, and the report says so."""
        stats = get_json(base_url, self.engine.info_paths).get("sim_stats", {})
        if not isinstance(stats, dict):
            return {}
        return {
            f"sim_{kind}_lateness_ms": stats[f"{kind}_lateness_ms"]
            for kind in ("write", "engine")
            if isinstance(stats.get(f"{kind}_lateness_ms"), dict)
        }

    def run_cells(
        self, group: ServerGroup, cells: list[tuple[Cell, Reason]], after: Any = None
    ) -> None:
        """Measure `cells` on one launch of `group`, relaunching if the server dies. `after`
        (instance -> list of (cell, reason)) may add warm reruns while the server is up."""
        queue = list(cells)
        while queue:
            try:
                with self.launched(group) as inst:
                    while queue:
                        cell, reason = queue.pop(0)
                        m = self.measure(inst, cell, reason)
                        self.record(m)
                        if not inst.server.alive():
                            break  # relaunch for the rest
                        if not queue and after is not None:
                            queue.extend(after(inst))
            except EngineError as exc:
                for cell, reason in queue:
                    self.record(self._failed(group, cell, reason, str(exc)))
                queue.clear()

    def _failed(self, group: ServerGroup, cell: Cell, reason: Reason, error: str) -> Measurement:
        number = self.launch_counts.get(group.group_id, 0)
        return Measurement(
            cell_id=cell.cell_id,
            point_id=cell.point_id,
            arm=cell.arm,
            group_id=group.group_id,
            slice=cell.slice,
            point=cell.point,
            attempt=len(self.attempts(cell)) + 1,
            instance=f"{group.group_id}#{number}",
            reason=reason,
            error=error,
            simulated=self.options.rehearse,
            time_scale=self._scale,
            started_at=now_iso(),
            finished_at=now_iso(),
        )

    # -- the whole run ------------------------------------------------------------------
    def run(self) -> RunSummary:
        from matrixrun import verify

        rd = self.run_dir.create()
        rd.write_text("spec.yaml", self.spec_text)
        rd.write_text("spec.sha256", hashlib.sha256(self.spec_text.encode()).hexdigest() + "\n")
        rd.write_json("plan.json", self.plan.model_dump(mode="json"))
        self._write_settings()
        self._write_env()
        policy = verify.Policy(self.spec, self.plan)
        obs = self.options.observer
        obs.start(policy.expected_runs())
        rd.event("run_start", resumed=bool(self.measurements), rehearse=self.options.rehearse)

        self.skipped = sum(1 for c in self.plan.cells() if self.attempts(c))

        def run_cells(group: ServerGroup, cells: list[tuple[Cell, Reason]], warm: Any) -> None:
            after = None if warm is None else (lambda inst: warm())
            self.run_cells(group, cells, after=after)

        def note(stage: int, round_no: int, cell: Cell, reason: str, why: RerunWhy) -> None:
            rd.event(
                "verify",
                stage=stage,
                round=round_no,
                cell=cell.cell_id,
                attempt=len(self.attempts(cell)) + 1,
                arm=cell.arm,
                x=cell.x,
                reason=reason,
                why=why.model_dump(mode="json", exclude_none=True),
            )

        # Stage 1 (every cell once; surprising cells rerun while their server is warm), then
        # the planned stage-2 rounds: the order of work is verify.drive's, the same code the
        # policy's scoring benchmark runs.
        verify.drive(policy, self.measurements, run_cells, note)

        obs.status("analysing")
        self._write_settings()  # now with the correctness gate's outcome
        stages.analyse_run(rd)
        report = stages.render_run(rd)
        rd.event("run_end", measured=self.new_measurements)
        obs.finish()
        failed = sum(1 for m in self.measurements if not m.ok)
        return RunSummary(rd.path, self.new_measurements, failed, self.skipped, report)

    def _write_settings(self) -> None:
        """settings.json: what the analysis and the report need, with the correctness gate's
        outcome so far (each candidate's agreement with the baseline, from correctness/)."""
        from matrixrun.correctness import agreement_by_arm
        from matrixrun.settings import run_settings

        answers = [
            json.loads(p.read_text())
            for p in sorted((self.run_dir.path / "correctness").glob("*.json"))
        ]
        agreement = {
            arm: float(entry["agreement"])
            for arm, entry in agreement_by_arm(answers, self.plan.baseline).items()
        }
        settings = run_settings(
            self.spec,
            self.plan,
            rehearsal=self.options.rehearse,
            time_scale=self._scale,
            spec_sha256=hashlib.sha256(self.spec_text.encode()).hexdigest(),
            correctness=agreement,
        )
        stages.write_settings(self.run_dir, settings)

    def _write_env(self) -> None:
        env = capture_environment(self.spec, rehearse=self.options.rehearse, time_scale=self._scale)
        env["servers"] = self.servers
        if self.hardware is not None:
            env["hardware_check"] = self.hardware
            env["gpus"] = self.hardware.get("gpus", [])
        previous = self.run_dir.path / "env.json"
        if previous.exists():  # a resumed run keeps the servers of earlier sessions
            with contextlib.suppress(ValueError, OSError):
                old = json.loads(previous.read_text()).get("servers", {})
                env["servers"] = {**old, **self.servers}
        self.run_dir.write_json("env.json", env)


def run_experiment(
    spec_path: str | Path,
    out: str | Path | None = None,
    resume: str | Path | None = None,
    rehearse: bool = False,
    observer: Observer | None = None,
    ignore_hardware: bool = False,
) -> RunSummary:
    from matrixrun.engines import for_spec
    from matrixrun.spec import load_spec

    spec_path = Path(spec_path)
    spec = load_spec(spec_path)
    text = spec_path.read_text()
    if resume is not None:
        rd = RunDir(resume)
        if not rd.exists():
            raise MatrixError(
                f"--resume {resume}: not a run directory (no plan.json); give the "
                "directory a previous run printed"
            )
        old = rd.path / "spec.yaml"
        if old.exists() and old.read_text() != text:
            raise InputError(
                f"{spec_path} differs from the spec this run started with ({old}); resume with "
                f"that file (`--resume {rd.path}` and spec {old}) or start a new run, so no "
                "measurement is mixed with cells of another spec"
            )
    else:
        stem = spec_path.stem + (".rehearsal" if rehearse else "")
        rd = RunDir(Path(out) if out else Path("runs") / stem / time.strftime("%Y%m%d-%H%M%S"))
        if rd.exists():
            raise MatrixError(
                f"{rd.path} already holds a run; use --resume {rd.path} to "
                "continue it or --out for a new directory"
            )
    hardware = None
    engine: Engine
    if rehearse:
        from matrixrun.engines.sim import rehearsal_engine

        engine, scale = rehearsal_engine(spec, spec.experiment)
    else:
        engine, scale = for_spec(spec.engine), 1.0
        if engine.launches:
            hardware = _hardware_gate(spec, ignore_hardware)
    options = RunOptions(rehearse=rehearse, time_scale=scale, observer=observer or NullObserver())
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    runner = Runner(spec, text, rd, engine, options)
    runner.hardware = hardware
    return runner.run()


async def _bounded(work: Coroutine[Any, Any, T], seconds: float) -> T:
    """`work` within a time limit. (asyncio.timeout, not wait_for: on Python 3.11 wait_for can
    swallow the cancellation that Ctrl-C sends, and the run would not stop.)"""
    async with asyncio.timeout(seconds):
        return await work


def _hardware_gate(spec: Spec, ignore: bool) -> dict[str, Any]:
    """Compare nvidia-smi with the spec before any launch; stop on a mismatch unless the user
    overrode it (the override is recorded and the report says so)."""
    from matrixrun.hardware import check_hardware

    check = check_hardware(spec)
    overridden = not check.ok and (ignore or not spec.engine.check_hardware)
    if not check.ok and not overridden:
        raise InputError(check.message)
    return {**check.model_dump(mode="json"), "overridden": overridden}
