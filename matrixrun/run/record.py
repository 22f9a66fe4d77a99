"""Where a measurer's files go: the run directory's own files (a run on this machine, and the
Slurm controller), or a Slurm job's shard of them (a job on another node, which shares the
directory with other jobs and writes only files no other process writes).

The measurer (`run/measurer.py`) writes through one of these and does not know which: the same
launches, measurements, audit lines and correctness answers go to the same places either way
(`RunDir(shard=...)` already sends a job's measurements and events to results.d/ and events.d/);
the two differ only in the files that several nodes would otherwise rewrite at once:

                 RunDirRecorder (here, controller)        ShardRecorder (a Slurm job)
    plan         plan.json, with the cells plan.json      plan.d/<group>.json (the controller
                 and every job's plan.d/ already hold     merges it into plan.json)
    environment  env.json, with every server env.json     env.d/<group>.json, each server tagged
                 and the jobs' env.d/ already hold        with the node it ran on
"""

from __future__ import annotations

import contextlib
import socket
from typing import Protocol

from matrixrun.core.measurement import Measurement
from matrixrun.core.redact import redact_json
from matrixrun.plan import Plan
from matrixrun.rundir.environment import Environment, read_environment
from matrixrun.rundir.results import RunDir


class Recorder(Protocol):
    """What a measurer writes through; the rest of the run directory (logs, pid files,
    per-request records, correctness answers, settings.json) it writes at paths of its own."""

    @property
    def run_dir(self) -> RunDir:
        """The run directory (sharded for a job: its measurements and events to files of its
        own)."""
        ...

    def measurement(self, m: Measurement) -> None:
        """Append one measurement, durable before returning."""
        ...

    def plan(self, plan: Plan) -> None:
        """The plan with the cells the verify policy added, before any is measured; the
        recorder may first adopt cells others wrote (a resumed run's, a job's)."""
        ...

    def environment(self, env: Environment) -> None:
        """This process's facts and the servers it launched so far."""
        ...


class RunDirRecorder:
    """The run directory's own files: what a run on one machine writes, and what the Slurm
    controller (the only writer of plan.json and env.json there) merges its jobs' shards into."""

    def __init__(self, run_dir: RunDir) -> None:
        self._run_dir = run_dir

    @property
    def run_dir(self) -> RunDir:
        return self._run_dir

    def measurement(self, m: Measurement) -> None:
        self._run_dir.append(m)

    def plan(self, plan: Plan) -> None:
        """plan.json: the plan plus the cells added so far, those an earlier session of this
        run wrote (plan.json) and those the Slurm jobs wrote (plan.d/<group>.json) first, so a
        resume neither loses nor re-adds them. Adopted into `plan` itself: the policy over it
        knows them."""
        rd = self._run_dir
        for path in sorted((rd.path / "plan.d").glob("*.json")):
            with contextlib.suppress(ValueError, OSError):  # torn or unreadable: adds nothing
                plan.adopt_added(Plan.model_validate_json(path.read_text(encoding="utf-8")))
        if (rd.path / "plan.json").exists():
            with contextlib.suppress(ValueError):  # an unreadable old plan adds nothing
                plan.adopt_added(Plan.model_validate(rd.read_json("plan.json")))
        rd.write_json("plan.json", redact_json(plan.model_dump(mode="json")))

    def environment(self, env: Environment) -> None:
        """env.json: `env`, after every server env.json and the jobs' env.d/<group>.json hold
        (a resumed run keeps an earlier session's; the report and a resume see every
        instance); a job's hardware gate stands for the run's when none ran here."""
        rd = self._run_dir
        previous = read_environment(rd.path / "env.json")
        servers = dict(previous.servers) if previous else {}
        gate = env.hardware_check
        for path in sorted((rd.path / "env.d").glob("*.json")):
            shard = read_environment(path)
            if shard is None:
                continue
            servers.update(shard.servers)
            if gate is None and shard.hardware_check is not None:
                gate = shard.hardware_check
        servers.update(env.servers)
        env = env.model_copy(update={"servers": servers})
        if gate is not None:
            env = env.model_copy(update={"hardware_check": gate, "gpus": list(gate.gpus)})
        rd.write_json("env.json", redact_json(env.model_dump(mode="json")))


class ShardRecorder:
    """A Slurm job's files: measurements and events to its group's shards (`RunDir(shard=)`),
    the cells it added to plan.d/<group>.json and its servers to env.d/<group>.json, each
    tagged with this node (several nodes rewriting one env.json would lose each other's)."""

    def __init__(self, run_dir: RunDir) -> None:
        if run_dir.shard is None:
            raise ValueError("a job's recorder writes to a shard: give RunDir(path, shard=group)")
        self._run_dir = run_dir
        #: The node this job runs on, recorded with each of its servers.
        self.node = socket.gethostname()

    @property
    def run_dir(self) -> RunDir:
        return self._run_dir

    def measurement(self, m: Measurement) -> None:
        self._run_dir.append(m)

    def plan(self, plan: Plan) -> None:
        """plan.d/<group>.json, not plan.json: the controller is plan.json's only writer and
        merges each job's added cells into it (`RunDirRecorder.plan`). Written before the
        added cell is measured, so a job killed while measuring it loses nothing."""
        rd = self._run_dir
        rd.write_json(f"plan.d/{rd.shard}.json", redact_json(plan.model_dump(mode="json")))

    def environment(self, env: Environment) -> None:
        """env.d/<group>.json, in env.json's format: the servers this job and an earlier
        job of its group launched, on which node; the hardware gate of the first job that ran
        one when this one did not."""
        rd = self._run_dir
        name = f"env.d/{rd.shard}.json"
        previous = read_environment(rd.path / name)
        here = {n: r.model_copy(update={"node": self.node}) for n, r in env.servers.items()}
        servers = {**(previous.servers if previous else {}), **here}
        env = env.model_copy(update={"servers": servers})
        if env.hardware_check is None and previous is not None:
            env = env.model_copy(
                update={"hardware_check": previous.hardware_check, "gpus": previous.gpus}
            )
        rd.write_json(name, redact_json(env.model_dump(mode="json")))
