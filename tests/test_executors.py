"""The parts of `--executor slurm` that need no cluster: the run directory's per-group files and
their merge, jobs.json's node summary, the progress line, option checking, time limits, and
the node's GPU serials. (The real cluster runs are in test_slurm.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from matrixrun.cli.main import main
from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.run.executors import make_executor
from matrixrun.run.executors.slurm import parse_slurm_args, progress_line, time_limit_minutes
from matrixrun.rundir.hardware import gpu_serials
from matrixrun.rundir.jobs import JobRecord, node_sharing
from matrixrun.rundir.results import RunDir

ROOT = Path(__file__).resolve().parent.parent


def meas(cell: str, group: str, started: str, attempt: int = 1) -> Measurement:
    return Measurement(
        cell_id=cell,
        point_id="p" + cell,
        arm="a",
        group_id=group,
        slice="",
        point={"concurrency": 1},
        attempt=attempt,
        instance=f"{group}#1",
        reason="first",
        started_at=started,
        error="x",
    )


def test_shards_append_to_their_own_files_and_reading_merges_them_in_time_order(
    tmp_path: Path,
) -> None:
    a, b, main_rd = RunDir(tmp_path, shard="gA"), RunDir(tmp_path, shard="gB"), RunDir(tmp_path)
    a.append(meas("c1", "gA", "2026-01-01T00:00:03.000Z"))
    b.append(meas("c2", "gB", "2026-01-01T00:00:01.000Z"))
    main_rd.append(meas("c3", "gC", "2026-01-01T00:00:02.000Z"))
    a.event("launch", instance="gA#1", group="gA")
    b.event("launch", instance="gB#1", group="gB")
    assert (tmp_path / "results.d" / "gA.jsonl").read_text().count("\n") == 1
    assert (tmp_path / "results.d" / "gB.jsonl").read_text().count("\n") == 1
    assert main_rd.results_file.read_text().count("\n") == 1
    for reader in (main_rd, a, b):  # every process sees the whole run
        assert [m.cell_id for m in reader.measurements()] == ["c2", "c3", "c1"]
        assert {e["group"] for e in reader.events()} == {"gA", "gB"}


def test_a_torn_tail_in_one_shard_is_skipped_and_mended_by_its_next_append(tmp_path: Path) -> None:
    a = RunDir(tmp_path, shard="gA")
    a.append(meas("c1", "gA", "2026-01-01T00:00:01.000Z"))
    shard = tmp_path / "results.d" / "gA.jsonl"
    with shard.open("a") as fh:
        fh.write('{"cell_id": "c2", "poi')  # the job was killed mid-write
    RunDir(tmp_path, shard="gB").append(meas("c9", "gB", "2026-01-01T00:00:02.000Z"))
    assert [m.cell_id for m in RunDir(tmp_path).measurements()] == ["c1", "c9"]
    a.append(meas("c2", "gA", "2026-01-01T00:00:03.000Z"))
    assert [m.cell_id for m in RunDir(tmp_path).measurements()] == ["c1", "c9", "c2"]
    assert shard.read_text().count("\n") == 2


def test_a_bad_line_inside_a_shard_names_the_shard_file(tmp_path: Path) -> None:
    shard = tmp_path / "results.d" / "gA.jsonl"
    shard.parent.mkdir(parents=True)
    shard.write_text("not json\n" + meas("c1", "gA", "t").model_dump_json() + "\n")
    with pytest.raises(
        InputError, match=r"results\.d/gA\.jsonl:1: not a (measurement|JSON record)"
    ):
        RunDir(tmp_path).measurements()


def test_node_sharing_names_candidates_that_never_met_the_baseline() -> None:
    shared, never = node_sharing(
        {"base": {"n1", "n2"}, "c1": {"n2"}, "c2": {"n3"}, "c3": set()},
        "base",
        ["c1", "c2", "c3", "c4"],
    )
    assert shared == {"c1": ["n2"], "c2": [], "c3": [], "c4": []}
    assert never == ["c2"]  # c3/c4 never ran: nothing to say about their node


def record(key: str, state: str, **kw: object) -> JobRecord:
    group, rnd = key.split(".r")
    return JobRecord(
        key=key,
        group=group,
        arm="a",
        round=int(rnd),
        job_id="1",
        state=state,
        submitted_at="t",
        time_limit_min=5,
        **kw,  # type: ignore[arg-type]
    )


def test_progress_line_counts_the_latest_job_of_each_group_and_stage() -> None:
    jobs = [
        record("g1.r0", "FAILED"),
        record("g1.r0", "RUNNING", node="n1"),  # resubmitted after the failure
        record("g2.r0", "PENDING"),
        record("g3.r0", "COMPLETED", node="n2"),
        record("g4.r0", "CANCELLED", cancelled_by_matrixrun=True),
        record("g5.r0", "TIMEOUT"),
    ]
    line = progress_line(jobs)
    assert line.startswith("slurm: 1 queued, 1 running, 2 done, 1 failed | ")
    assert "g1 a r0 RUNNING n1" in line and "g2 a r0 PENDING |" in line


def test_slurm_args_and_executor_options_are_checked_with_one_sentence() -> None:
    assert parse_slurm_args(["account=lab", "--cpus_per_task=16"]) == {
        "account": "lab",
        "cpus-per-task": "16",
    }
    with pytest.raises(InputError, match="give an sbatch option as KEY=VALUE"):
        parse_slurm_args(["account"])
    with pytest.raises(InputError, match="--partition only applies with --executor slurm"):
        make_executor("local", "s.yaml", partition="gpu")
    with pytest.raises(InputError, match="at least 1"):
        make_executor("slurm", "s.yaml", max_parallel=0)


def test_cli_refuses_slurm_options_without_the_slurm_executor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", str(ROOT / "tests/specs/tiny.yaml"), "--max-parallel", "2"])
    assert code == 2
    assert "--max-parallel only applies with --executor slurm" in capsys.readouterr().err


def test_time_limit_comes_from_the_estimate_in_server_time() -> None:
    from matrixrun.engines.sim import rehearsal_engine
    from matrixrun.plan import expand
    from matrixrun.spec import load_spec

    spec = load_spec(ROOT / "tests/specs/multi.yaml")  # estimate: launch 10m, cell 2m
    time_scale = rehearsal_engine(spec, "x").time_scale
    group = expand(spec).groups[0]
    n = len(group.cells)
    stage1 = (600 + 2 * n * 120) / time_scale.factor * 1.5 + 300
    assert time_limit_minutes(spec, time_scale, group, 0) == max(5, -(-stage1 // 60))
    assert time_limit_minutes(spec, time_scale, group, 1) < time_limit_minutes(
        spec, time_scale, group, 0
    )


def test_gpu_serials_are_those_slurm_allocated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho '0, 1650123, GPU-aaa'\necho '1, [N/A], GPU-bbb'\n"
        "echo '2, 1650125, GPU-c'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_GPUS", "1,2")
    assert gpu_serials() == ["GPU-bbb", "1650125"]
    monkeypatch.delenv("SLURM_JOB_GPUS")
    assert gpu_serials() == ["1650123", "GPU-bbb", "1650125"]


def test_a_local_resume_of_a_run_with_live_slurm_jobs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from matrixrun.rundir.jobs import JobsFile

    book = JobsFile(jobs=[record("g1.r0", "COMPLETED"), record("g2.r0", "RUNNING")])
    book.jobs[1].job_id = "42"
    (tmp_path / "jobs.json").write_text(book.model_dump_json())
    (tmp_path / "plan.json").write_text("{}")  # a run directory (`--resume` refuses others)
    code = main(["run", str(ROOT / "tests/specs/tiny.yaml"), "--resume", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "Slurm jobs that may still be queued or running (42)" in err
    assert "--executor slurm" in err
