"""Launch a server group, flush, measure its cells: one launch of work at a time, in the order
it is given, written through a recorder.

The measurer knows how a launch is measured; it decides nothing about statistics, and not
where its files go. What to rerun comes from `verify` (the policy over the measurements so far,
in the order of `verify.Schedule`), which an executor hands it launch by launch
(`measure_launch`); the files go through the recorder it is given (`run/record.py`: the run
directory's own, or a Slurm job's shard of it); the run's start and end (fixed files,
analysis, report) are `run/session.py`'s, shared by every executor. Everything it needs is
given when it is made (`RunOptions` is frozen), and nothing outside sets its state afterwards.
Every measurement is appended the moment it completes, so an interrupted run loses at most the
cell in flight, and `--resume` continues from what is there (a resumed run replays the same
policy over the same measurements, so it asks for the same reruns).

Ctrl-C: during a run (`session.run`), SIGINT is `core/interrupt.py`'s. It stops the load in
flight (that cell is not kept), never the recording of a load that has ended (the run stops
once it is on file), and is checked at each measurement's end and each launch's start, so an
interrupt can neither be lost (a finalizer swallowing the KeyboardInterrupt, a load that
absorbed the cancellation) nor cost a measurement. The CLI exits 130 with the resume sentence.

Failure handling: a failing cell is recorded as a failed measurement with its reason and the
run goes on; a server that died (`run/deaths.py`) is relaunched for the group's remaining
cells; a server that will not start marks the group's cells failed."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from matrixrun.core import interrupt
from matrixrun.core.errors import EngineError
from matrixrun.core.keeping import client_flagged, fell_behind, sim_late_share
from matrixrun.core.measurement import (
    Failure,
    Measurement,
    Reason,
    failed_cells,
)
from matrixrun.core.redact import redact_json, redact_text
from matrixrun.core.rerun_reason import RerunWhy
from matrixrun.core.tuning import SIM_MAX_SLOWDOWNS
from matrixrun.core.words import reason as reason_words
from matrixrun.engines.base import (
    Api,
    Engine,
    ServerHandle,
    SlowsDown,
    flush_before_cell,
    free_port,
    get_json,
    redact_argv,
)
from matrixrun.load.cell import BenchServing, CellRun, measure_cell
from matrixrun.load.client import LoadConfig
from matrixrun.load.datasets import DatasetConfig
from matrixrun.load.datasets.resolve import dataset_for
from matrixrun.load.records import write_jsonl
from matrixrun.plan import Cell, Plan, ServerGroup
from matrixrun.run.deaths import died, died_message, exits
from matrixrun.run.gates import correctness_done, correctness_gate, gate_outcome
from matrixrun.run.progress import NullObserver, Observer
from matrixrun.run.record import Recorder
from matrixrun.run.resume import launch_counts
from matrixrun.rundir.environment import HardwareGate, ServerRecord, capture_environment
from matrixrun.rundir.hardware import gpu_serials
from matrixrun.rundir.results import RunDir, now_iso
from matrixrun.rundir.settings import run_settings, write_settings
from matrixrun.spec import Spec, SpecFile
from matrixrun.verify import Launch

HOST = "127.0.0.1"


@dataclass(frozen=True)
class RunOptions:
    """How a run is made, fixed when it starts."""

    #: Measure on the simulator: every number is labelled simulated, and the built-in client
    #: is used even when the spec asks for bench_serving (which needs SGLang installed).
    rehearse: bool = False
    observer: Observer = field(default_factory=NullObserver)
    #: With --resume: measure again, once, the cells whose every attempt failed.
    retry_failed: bool = False
    #: The spec as given on the command line (settings.json; what Reproduce prints).
    spec_path: str | None = None


@dataclass
class Instance:
    """A live server of one group: which launch of the group it is, its handle, and what it
    said about itself when it became healthy."""

    group: ServerGroup
    name: str
    server: ServerHandle
    base_url: str
    info: dict[str, Any] = field(default_factory=dict)


class Measurer:
    """Measures one plan's launches against one engine, writing through one recorder as it
    goes; the order of work is the executor's (`verify.Schedule`), the start and end the
    session's. How a server is started, how fast it runs and what it reports per cell are the
    engine's (`engines/base.Engine`), how a cell is measured the load client's
    (`load/cell.py`), what to rerun the verify policy's, where the files go the recorder's.

    `source` is the spec file as read once (its spec the run's, with the noise prior decided);
    `plan` its expansion, with the cells a resumed run or earlier jobs added; `hardware` the
    hardware gate's result where one ran in this process; `retry` the cells to measure again
    although tried (None: with `options.retry_failed`, those whose every attempt failed)."""

    def __init__(
        self,
        source: SpecFile,
        plan: Plan,
        engine: Engine,
        recorder: Recorder,
        options: RunOptions,
        *,
        hardware: HardwareGate | None = None,
        retry: Collection[str] | None = None,
    ) -> None:
        self.source = source
        self.spec: Spec = source.spec
        self.plan = plan
        self.engine = engine
        self.recorder = recorder
        self.run_dir: RunDir = recorder.run_dir
        self.options = options
        self._hardware = hardware
        self._measurements: list[Measurement] = self.run_dir.measurements()
        # instance names continue after a resume: count earlier launches, measured or not
        self._launch_counts = launch_counts(self.run_dir.events(), self._measurements)
        #: this process's measurements so far, and how many of them failed
        self.new_measurements = 0
        self.new_failed = 0
        self._servers: dict[str, ServerRecord] = {}
        #: Instances whose server info says they are a simulator: their numbers are labelled
        #: simulated even outside --rehearse (e.g. engine.launch pointed at matrixrun.sim).
        self._simulated_instances: set[str] = set()
        #: cell ids measured again although tried: the next run of each is tagged extra.retry
        if retry is None:
            retry = failed_cells(self._measurements) if options.retry_failed else ()
        self._retry: set[str] = set(retry)
        #: cell ids the plan file holds: an added cell not among them is written first
        self._on_file: set[str] = {c.cell_id for c in self.plan.cells()}
        #: the GPUs this process's servers run on, recorded with each: a run resumed on
        #: another machine (a lent GPU node is often a fresh one) shows it in env.json
        self._serials: list[str] = [] if options.rehearse else gpu_serials()
        #: times this run halved the simulator's speed (`slowed`), and the speed it was asked
        #: for (settings.json and env.json keep that; each measurement the one it ran at)
        self._slowdowns = 0
        self._asked_scale = engine.time_scale.factor

    # -- bookkeeping --------------------------------------------------------------------
    @property
    def measurements(self) -> list[Measurement]:
        """Every measurement as this process knows them: on file when it started (or last
        `reload`ed), then its own as it records them."""
        return self._measurements

    @property
    def retry(self) -> frozenset[str]:
        """The cells `--retry-failed` still measures again (each leaves once it has)."""
        return frozenset(self._retry)

    def reload(self) -> list[Measurement]:
        """Every measurement as the run directory holds them now, others' included (a Slurm
        job's groups, or the controller after its jobs), and the launches they count."""
        self._measurements[:] = self.run_dir.measurements()
        self._launch_counts = launch_counts(self.run_dir.events(), self._measurements)
        return self._measurements

    def refreshed(self) -> list[Measurement]:
        """Every group's measurements as the shared run directory holds them now (a job's
        stage-1 schedule reads them this way: its warm reruns see the baseline's numbers as
        they land from another node)."""
        self._measurements[:] = self.run_dir.measurements()
        return self._measurements

    def attempts(self, cell: Cell) -> list[Measurement]:
        return [m for m in self._measurements if m.cell_id == cell.cell_id]

    def record(self, m: Measurement, note: str = "", round_no: int | None = None) -> None:
        """Append a measurement (a stage-2 one tagged with its round, which a resumed run
        reads back) and tell the observer."""
        if round_no is not None:
            m = m.model_copy(update={"extra": {**m.extra, "round": round_no}})
        if m.cell_id in self._retry:  # it replaces the failed attempts before it in the counts
            self._retry.discard(m.cell_id)
            m = m.model_copy(update={"extra": {**m.extra, "retry": True}})
        if m.error:  # errors quote log tails and command lines
            m = m.model_copy(update={"error": redact_text(m.error)})
        self.recorder.measurement(m)
        self._measurements.append(m)
        self.new_measurements += 1
        self.new_failed += 0 if m.ok else 1
        self.options.observer.measured(m, note)

    def fail_unmeasured(self, group: ServerGroup, error: str) -> list[Measurement]:
        """The cells of `group` never tried, as the run directory holds it now, each recorded
        as a failed first run with `error` (a Slurm job that failed before measuring them);
        what was recorded."""
        self.reload()
        failed = []
        for cell in group.cells:
            if not self.attempts(cell):
                failed.append(self.failed_measurement(group, cell, "first", error))
                self.record(failed[-1])
        return failed

    @property
    def _api(self) -> Api:
        """The request API: the spec's choice, else the engine's own."""
        return self.spec.engine.api or self.engine.api

    # -- servers ------------------------------------------------------------------------
    @contextlib.contextmanager
    def launched(self, group: ServerGroup) -> Iterator[Instance]:
        """One launch of `group`, healthy and gated; stopped on the way out, whatever happens."""
        number = self._launch_counts.get(group.group_id, 0) + 1
        self._launch_counts[group.group_id] = number
        name = f"{group.group_id}#{number}"
        launch = self.engine.launch(group, HOST, free_port(HOST))
        label = f"{self.engine.name} server {name} ({group.arm})"
        server = self.engine.serve(
            launch, label, self.run_dir.log_file(name), self.run_dir.pid_file(name)
        )
        self.options.observer.status(f"launching {group.arm} ({name})")
        self.run_dir.event(
            "launch",
            instance=name,
            group=group.group_id,
            arm=group.arm,
            argv=redact_argv(launch.argv),
            port=launch.port,
        )
        with interrupt.held():  # a Ctrl-C now waits for the pid file and the try that stops it
            server.start()
        try:
            interrupt.check()
            startup = server.wait_healthy(
                self.engine.health_path,
                self.engine.time_scale.server_seconds(self.spec.limits.startup_timeout),
            )
            info = get_json(launch.base_url, self.engine.info_paths)
            if info.get("simulated"):
                self._simulated_instances.add(name)
            self._servers[name] = ServerRecord(
                group=group.group_id,
                arm=group.arm,
                slice=group.slice,
                startup_s=round(startup, 3),
                version=self.engine.version(info),
                args=redact_json(self.engine.effective_args(info)),
                argv=redact_argv(launch.argv),
                gpu_serials=self._serials,
                env=redact_json(launch.env),
            )
            self.run_dir.event("healthy", instance=name, startup_s=round(startup, 3))
            self.write_environment()
            gate_error = self._correctness(group, launch.base_url)
            inst = Instance(group, name, server, launch.base_url, info)
            if gate_error is not None and exits(server, self.engine.death_grace_s):
                # it died answering the gate: no cell is to blame, and none is measured on it
                raise EngineError(died_message(server, name, "the correctness gate"))
            yield inst
        finally:
            code = server.stop()
            self.run_dir.event("stop", instance=name, returncode=code)

    def _correctness(self, group: ServerGroup, base_url: str) -> str | None:
        """Once per group: the arm answers the fixed greedy prompts (the correctness gate).
        Returns why the gate could not collect its answers (None: answered, or not asked)."""
        if correctness_done(self.spec, self.run_dir, group):
            return None
        self.options.observer.status(f"correctness gate: {group.arm}")
        error = correctness_gate(
            self.spec,
            self.run_dir,
            group,
            base_url,
            self._api,
            self.engine.api_key(),
            self.engine.time_scale.server_seconds(self.spec.limits.request_timeout),
            tokenizer=self._tokenizer(group),
            ids=self._dataset(group).ids,
        )
        self.write_environment()
        self.write_settings()  # the gate's outcome on file now: a run cut short keeps it
        return error

    def _flush(self, inst: Instance, cell: Cell) -> str | None:
        """Empty the prefix cache before a cell (`flush_before_cell`), recorded either way;
        why a flush that was tried did not happen (the measurement keeps it), else None."""
        tried, why = flush_before_cell(self.engine, self.spec.engine.flush_cache, inst.base_url)
        if tried and why is not None:  # the cell runs on a warm cache: said now, and reported
            self.options.observer.status(f"cache flush failed on {inst.name}: {why}")
        extra = {"why": why} if why else {}
        ok = tried and why is None
        self.run_dir.event("flush_cache", instance=inst.name, cell=cell.cell_id, ok=ok, **extra)
        return why if tried else None

    def _dataset(self, group: ServerGroup) -> DatasetConfig:
        """What the group's cells send (the same for every arm of its model; load/datasets)."""
        return dataset_for(self.spec, group.model)

    def _tokenizer(self, group: ServerGroup) -> str | None:
        """Where text prompts get their tokenizer (None: prompts go as token ids)."""
        if self.spec.engine.prompt_format != "text":
            return None
        return group.model.tokenizer or group.model.path

    # -- measuring ----------------------------------------------------------------------
    def measure(self, inst: Instance, cell: Cell, reason: Reason) -> Measurement:
        """Measure `cell` once on `inst`: flush, run the load (`load.cell.measure_cell` maps
        its failures to one error), keep the per-request records, notice a dead server."""
        attempt = len(self.attempts(cell)) + 1
        flush_failed = self._flush(inst, cell)
        self.options.observer.status(
            f"{inst.group.arm} {self.plan.axis}={cell.x} "
            f"attempt {attempt} ({reason_words(reason)}) on {inst.name}"
        )
        started_at = now_iso()
        bench = self._bench_serving(inst, cell, attempt)
        run = measure_cell(
            self._load_config(inst, cell),
            self.engine.time_scale,
            self.spec.limits.cell_timeout,
            bench,
        )
        requests_file = self._keep_records(cell, attempt, run)
        error, failure = run.error, run.failure
        extra: dict[str, Any] = dict(run.extra)
        if flush_failed:
            extra["flush_failed"] = flush_failed
        if run.argv:
            extra["argv"] = redact_argv(run.argv)
        if not died(inst.server, run, self.engine.death_grace_s):
            extra.update(self.engine.cell_extras(inst.base_url, inst.info))
        else:
            error = died_message(inst.server, inst.name, "the cell")
            failure = Failure.SERVER_DIED
        return Measurement(
            **self._identity(inst.group, cell, attempt, inst.name, reason),
            started_at=started_at,
            client="bench_serving" if bench is not None else "builtin",
            simulated=self.options.rehearse or inst.name in self._simulated_instances,
            metrics=run.metrics,
            error=error,
            failure=failure,
            finished_at=now_iso(),
            requests_file=requests_file,
            extra=extra,
        )

    def _load_config(self, inst: Instance, cell: Cell) -> LoadConfig:
        """The cell's workload in modelled time (the spec's units; `measure_cell` converts)."""
        w = self.spec.workload
        output_len = int(cell.point["output_len"])
        copy = w.warmup_requests == "cell"  # an unmeasured copy of the cell first
        return LoadConfig(
            base_url=inst.base_url,
            api=self._api,
            model=inst.group.model.path,
            num_prompts=cell.num_prompts,
            input_len=int(cell.point["input_len"]),
            output_len=output_len,
            concurrency=int(cell.point["concurrency"]),
            request_rate=float(cell.point["request_rate"]),
            burstiness=w.burstiness,
            warmup_requests=cell.num_prompts if copy else int(w.warmup_requests),
            warmup_output_len=output_len if copy else None,
            seed=w.seed,
            request_timeout_s=self.spec.limits.request_timeout,
            duration_s=w.duration,
            api_key=self.engine.api_key(),
            prompt_format=self.spec.engine.prompt_format,
            tokenizer=self._tokenizer(inst.group),
            strict_openai=self.spec.engine.strict_openai,
            time_cap_s=self.spec.limits.cell_timeout,
            processes=w.processes,
            dataset=self._dataset(inst.group),
        )

    def _bench_serving(self, inst: Instance, cell: Cell, attempt: int) -> BenchServing | None:
        if self.spec.engine.client != "bench_serving" or self.options.rehearse:
            return None
        return BenchServing(
            self.run_dir.path / "bench_serving" / f"{cell.cell_id}-{attempt}",
            self.spec.engine.client_launch,
            inst.group.model.tokenizer,
        )

    def _keep_records(self, cell: Cell, attempt: int, run: CellRun) -> str | None:
        """Write the cell's per-request records; their path relative to the run directory."""
        if run.metrics is None:
            return None
        path = self.run_dir.requests_file(cell.cell_id, attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(path, run.records)
        return str(path.relative_to(self.run_dir.path))

    def _identity(
        self, group: ServerGroup, cell: Cell, attempt: int, instance: str, reason: Reason
    ) -> dict[str, Any]:
        """The fields that say which run of which cell on which server a measurement is."""
        return dict(
            cell_id=cell.cell_id,
            point_id=cell.point_id,
            arm=cell.arm,
            group_id=group.group_id,
            slice=cell.slice,
            point=cell.point,
            attempt=attempt,
            instance=instance,
            reason=reason,
            time_scale=self.engine.time_scale.factor,
        )

    def measure_launch(self, launch: Launch, **event: Any) -> None:
        """Measure a launch's work items on one launch of its group (a new one if the server
        dies, for the rest), asking for more while the server is up; a rerun the policy chose
        is written to the audit log first (`verify_event`, with `event`'s extra fields). No
        server starts for a launch with nothing to do."""
        queue = launch.next()
        while queue:
            interrupt.check()
            try:
                with self.launched(launch.group) as inst:
                    while queue:
                        w = queue.pop(0)
                        # a Ctrl-C once the load has ended waits for the record (then raises)
                        with interrupt.measurement():
                            if w.why is not None:
                                self.verify_event(
                                    w.stage, w.round_no, w.cell, w.reason, w.why, **event
                                )
                            m = self.measure(inst, w.cell, w.reason)
                            round_no = w.round_no if w.stage == 2 else None
                            self.record(m, round_no=round_no)
                        if self.slowed(m, round_no):
                            # measure it again on a slower relaunch, in the same round
                            queue.insert(0, dataclasses.replace(w, why=None))
                            break
                        if not inst.server.alive():
                            break  # relaunch for the rest
                        if not queue:
                            queue.extend(launch.next())
            except EngineError as exc:
                with interrupt.held():
                    for w in queue:
                        self.record(
                            self.failed_measurement(launch.group, w.cell, w.reason, str(exc))
                        )
                queue.clear()
                interrupt.check()

    def slowed(self, m: Measurement, round_no: int | None = None) -> bool:
        """Whether `m` fell behind (`core.keeping`: the simulator its model, or the client the
        server on the primary metric; the analysis reads no value from it) and the engine could
        halve its speed for the launches after this one (at most `SIM_MAX_SLOWDOWNS` times a
        run: a slower simulator is slower for the client too); if so it has, and events.jsonl
        says why, with the stage-2 round and reason the run is measured again in (a resume
        whose torn record was that run owes it to the round: `resume.unfinished_round`)."""
        if not fell_behind(m, self.spec.metrics.primary) or self._slowdowns >= SIM_MAX_SLOWDOWNS:
            return False
        if not isinstance(self.engine, SlowsDown):
            return False
        before = self.engine.time_scale.factor
        after = self.engine.slow_down().factor
        self._slowdowns += 1
        share = sim_late_share(m)
        self.run_dir.event(
            "slowed",
            cell=m.cell_id,
            attempt=m.attempt,
            reason=m.reason,
            round=round_no,
            instance=m.instance,
            late_share=None if share is None else round(share, 4),
            client_flagged=client_flagged(m, self.spec.metrics.primary),
            time_scale=before,
            new_time_scale=after,
        )
        self.options.observer.status(
            f"the simulator fell behind its model in {m.arm} "
            f"{self.plan.axis}={m.point.get(self.plan.axis)} "
            f"attempt {m.attempt}: relaunching at {after:g}× (was {before:g}×) to measure it again"
        )
        return True

    def verify_event(
        self, stage: int, round_no: int, cell: Cell, reason: str, why: RerunWhy, **extra: Any
    ) -> None:
        """The audit line of a rerun the verify policy chose, with the attempt it will be (the
        report matches the reason to that measurement by it). A cell the policy added
        (bisection) goes on file first (`write_plan`), before it is measured."""
        if cell.added_by is not None and cell.cell_id not in self._on_file:
            self.write_plan()
        self.run_dir.event(
            "verify",
            stage=stage,
            round=round_no,
            cell=cell.cell_id,
            attempt=len(self.attempts(cell)) + 1,
            arm=cell.arm,
            x=cell.x,
            reason=reason,
            why=why.model_dump(mode="json", exclude_none=True),
            **extra,
        )

    def failed_measurement(
        self, group: ServerGroup, cell: Cell, reason: Reason, error: str
    ) -> Measurement:
        """A cell that never measured because its server would not start (or stay up)."""
        number = self._launch_counts.get(group.group_id, 0)
        attempt = len(self.attempts(cell)) + 1
        return Measurement(
            **self._identity(group, cell, attempt, f"{group.group_id}#{number}", reason),
            error=error,
            failure=Failure.LAUNCH,
            simulated=self.options.rehearse,
            started_at=now_iso(),
            finished_at=now_iso(),
        )

    # -- the run directory's files ------------------------------------------------------
    def write_plan(self) -> None:
        """The plan with the cells the verify policy added (bisection), through the recorder
        (plan.json, or a job's plan.d/ shard), which may first adopt cells others added."""
        self.recorder.plan(self.plan)
        self._on_file = {c.cell_id for c in self.plan.cells()}

    def write_settings(self) -> None:
        """settings.json: what the analysis and the report need, with the correctness gate's
        outcome so far (each candidate's agreement with the baseline, from correctness/)."""
        agreement, gate_errors = gate_outcome(self.run_dir, self.plan.baseline)
        settings = run_settings(
            self.spec,
            self.plan,
            rehearsal=self.options.rehearse,
            time_scale=self._asked_scale,
            spec_sha256=self.source.sha256,
            correctness=agreement,
            spec_path=self.options.spec_path,
        )
        if gate_errors:  # a gate that could not run is said as a failure (the Checks line)
            analysis = settings.analysis.model_copy(update={"correctness_errors": gate_errors})
            settings = settings.model_copy(update={"analysis": analysis})
        # engine.launch and flags can carry a key: the same redaction as plan.json
        redacted = type(settings).model_validate(redact_json(settings.model_dump(mode="json")))
        write_settings(self.run_dir, redacted)

    def write_environment(self) -> None:
        """This process's facts, its servers so far and the hardware gate's result, through
        the recorder (env.json with every server before them, or a job's env.d/ shard)."""
        env = capture_environment(
            self.spec, simulated=self.options.rehearse, time_scale=self._asked_scale
        )
        env.servers = dict(self._servers)
        if self._hardware is not None:
            env.hardware_check = self._hardware
            env.gpus = list(self._hardware.gpus)
        self.recorder.environment(env)
