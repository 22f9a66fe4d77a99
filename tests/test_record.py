"""The recorders a measurer writes through (`run/record.py`): the run directory's own files, or a
Slurm job's shards of them. On real run directories: what each writes where, what the run
directory's recorder folds in from the shards, and that a job's recorder never touches the
controller's files. The measurer's options are frozen: nothing sets them after the start."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest

from matrixrun.plan import Plan, expand
from matrixrun.run.measurer import RunOptions
from matrixrun.run.record import RunDirRecorder, ShardRecorder
from matrixrun.rundir.environment import Environment, HardwareGate, ServerRecord, read_environment
from matrixrun.rundir.hardware import Gpu
from matrixrun.rundir.results import RunDir
from matrixrun.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
H200 = Gpu(name="NVIDIA H200", driver_version="550", memory_total="143771 MiB")


def _gate(message: str) -> HardwareGate:
    return HardwareGate(ok=True, gpus=[H200], message=message)


def _env(servers: dict[str, ServerRecord], gate: HardwareGate | None = None) -> Environment:
    return Environment(host="here", servers=servers, hardware_check=gate)


def test_a_job_writes_its_servers_with_its_node_to_its_own_shard(tmp_path: Path) -> None:
    job = ShardRecorder(RunDir(tmp_path, shard="g1"))
    job.environment(_env({"g1#1": ServerRecord(arm="slow")}, _gate("job's gate")))
    job.environment(_env({"g1#2": ServerRecord(arm="slow")}))  # a relaunch, no gate this time
    shard = read_environment(tmp_path / "env.d" / "g1.json")
    assert shard is not None
    assert sorted(shard.servers) == ["g1#1", "g1#2"]  # the earlier launch kept
    assert {r.node for r in shard.servers.values()} == {socket.gethostname()}
    assert shard.hardware_check is not None and shard.hardware_check.message == "job's gate"
    assert not (tmp_path / "env.json").exists()  # the controller's file


def test_the_run_directory_folds_in_every_jobs_servers_and_a_jobs_gate(tmp_path: Path) -> None:
    for group, arm in (("g1", "slow"), ("g2", "fast")):
        gate = _gate(f"{group}'s gate")
        ShardRecorder(RunDir(tmp_path, shard=group)).environment(
            _env({f"{group}#1": ServerRecord(arm=arm)}, gate)
        )
    here = RunDirRecorder(RunDir(tmp_path))
    here.environment(_env({"earlier#1": ServerRecord(arm="slow")}))
    here.environment(_env({}))  # the controller launches nothing: the servers stay
    env = read_environment(tmp_path / "env.json")
    assert env is not None
    assert sorted(env.servers) == ["earlier#1", "g1#1", "g2#1"]
    assert env.servers["g2#1"].node == socket.gethostname()
    # no gate ran here: the first job's stands for the run's, with its GPUs
    assert env.hardware_check is not None and env.hardware_check.message == "g1's gate"
    assert env.gpus == [H200]
    # a gate that ran here is the run's own
    here.environment(_env({}, _gate("here")))
    env = read_environment(tmp_path / "env.json")
    assert env is not None and env.hardware_check is not None
    assert env.hardware_check.message == "here"


def _with_added_cell(plan: Plan, group: int) -> Plan:
    """`plan` with one cell added to a group, as bisection adds it (`added_by`)."""
    g = plan.groups[group]
    cell = g.cells[0].model_copy(
        update={"cell_id": g.cells[0].cell_id + "-mid", "added_by": "bisection"}
    )
    g.cells.append(cell)
    return plan


def test_the_plan_goes_to_a_jobs_shard_and_the_run_directory_adopts_it(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "tests" / "specs" / "tiny.yaml")
    job_plan = _with_added_cell(expand(spec), 0)
    ShardRecorder(RunDir(tmp_path, shard="g1")).plan(job_plan)
    assert (tmp_path / "plan.d" / "g1.json").is_file()
    assert not (tmp_path / "plan.json").exists()  # the controller is its only writer

    controller = expand(spec)
    RunDirRecorder(RunDir(tmp_path)).plan(controller)
    added = [c.cell_id for c in controller.cells() if c.added_by]
    assert added == [job_plan.groups[0].cells[-1].cell_id]  # adopted into the plan itself
    on_file = Plan.model_validate_json((tmp_path / "plan.json").read_text())
    assert [c.cell_id for c in on_file.cells() if c.added_by] == added
    # a resumed run's fresh expansion gets it back from plan.json, once
    again = expand(spec)
    RunDirRecorder(RunDir(tmp_path)).plan(again)
    assert [c.cell_id for c in again.cells() if c.added_by] == added


def test_a_jobs_recorder_needs_a_shard(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shard"):
        ShardRecorder(RunDir(tmp_path))


def test_run_options_are_frozen() -> None:
    options = RunOptions(rehearse=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.rehearse = False  # type: ignore[misc]
