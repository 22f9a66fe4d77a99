"""`matrixrun run --executor slurm` against a real Slurm cluster: the local single-node one that
`.ci/run` starts (shared/slurm/start_local_slurm.sh: slurmctld, slurmd, slurmdbd, munge, eight
fake GPUs). The matrix runs on the simulator inside real Slurm jobs submitted by submitit; the
tests kill one job, cancel another, interrupt the controller and resume it, and read the run
directory and the report. Where no cluster answers they skip, saying why; with
MATRIXRUN_SLURM_TESTS=require (CI, once the cluster started) they fail instead (the `slurm`
fixture, conftest.py, which test_session.py and test_redact.py share).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from matrixrun.core.measurement import Measurement
from matrixrun.rundir.results import RunDir

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

#: Four server groups (two arms × a server axis), three cells each; cells slow enough (about
#: 1-5 s) that a job can be killed between its measurements. No reruns: one job per group.
SPEC = """\
experiment: slurm-e2e
title: Slurm end-to-end
model: {path: /models/tiny, vocab_size: 32000}
hardware: {gpu: NVIDIA H200, count: 1}
engine: {kind: sglang, args: {tp: 1}}
arms:
  slow: {moe_runner_backend: flashinfer_cutlass}
  fast: {moe_runner_backend: flashinfer_cutedsl}
sweep: {concurrency: [1, 2, 4], server.chunked_prefill_size: [4096, 8192]}
workload: {input_len: 16, output_len: 64, num_prompts: 16, warmup_requests: 1, seed: 3}
metrics: {primary: output_throughput}
verify: {threshold: 3%, surprise: 50%, max_runs: 1, noise: 2%}
limits: {startup_timeout: 60s, cell_timeout: 60s, request_timeout: 30s}
estimate: {launch: 5s, cell: 10s}
correctness: {enabled: false}
rehearsal:
  time_scale: 1
  profile:
    name: slurm-e2e
    base: {step_ms: [[1, 25], [8, 30]], prefill_ms_per_token: 0.1}
    rules:
      - when: {moe_runner_backend: flashinfer_cutedsl}
        set: {step_ms: [[1, 12], [8, 15]]}
"""


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "matrixrun", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(
    what: str, check: Callable[[], Any], proc: subprocess.Popen[str], timeout: float
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"matrixrun exited before {what}: {proc.stdout.read()}")  # type: ignore[union-attr]
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def jobs_of(run_dir: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads((run_dir / "jobs.json").read_text())["jobs"])
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def squeue_ids(env: dict[str, str]) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True)
    return set(out.stdout.split())


def kill_job_step(env: dict[str, str], job_id: str) -> int:
    """SIGKILL every process of the job's step 0 (the Python job and its server): a crash,
    not a cancel, so Slurm records FAILED."""
    out = subprocess.run(
        ["scontrol", "listpids", job_id], env=env, capture_output=True, text=True, check=True
    )
    pids = [int(p[0]) for p in (ln.split() for ln in out.stdout.splitlines()[1:]) if p[2] == "0"]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def run_to_end(env: dict[str, str], run_dir: Path, *args: str) -> tuple[int, str]:
    """`matrixrun` with `args`, waited for; what it left queued or running is cleaned up."""
    proc = start(env, *args)
    try:
        return finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        cleanup(env, run_dir)


def rehearse_on_slurm(env: dict[str, str], spec: Path, run_dir: Path) -> tuple[int, str]:
    """A rehearsal of `spec` through the Slurm executor into `run_dir`, waited for (its
    report beside it)."""
    return run_to_end(
        env, run_dir, "run", str(spec), "--rehearse", "--executor", "slurm",
        "--out", str(run_dir), "--report", str(run_dir.parent / "r.md"),
    )  # fmt: skip


def cleanup(env: dict[str, str], run_dir: Path) -> None:
    """Cancel what a failed test left queued; stop servers a killed job left (their pid files)."""
    ids = [j["job_id"] for j in jobs_of(run_dir) if j["job_id"] in squeue_ids(env)]
    if ids:
        subprocess.run(["scancel", *ids], env=env, check=False)
    for pid_file in (run_dir / "pids").glob("*.pid"):
        with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)


def first_measurement(run_dir: Path, group: str) -> Callable[[], bool]:
    own = run_dir / "results.d" / f"{group}.jsonl"
    return lambda: own.exists() and own.read_text().count("\n") >= 1


def test_a_matrix_on_slurm_survives_a_killed_a_timed_out_and_a_cancelled_job(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    spec = tmp_path / "slurm-e2e.yaml"
    spec.write_text(SPEC)
    run_dir = tmp_path / "run"
    report = tmp_path / "report.md"
    proc = start(
        slurm, "run", str(spec), "--rehearse", "--executor", "slurm",
        "--out", str(run_dir), "--report", str(report),
    )  # fmt: skip
    try:
        # four jobs, two at a time on the node's two CPUs: the last ones wait in the queue.
        # Each group's cells take long enough (16 prompts of 64 tokens) that the second running
        # job cannot finish before the test warns it: with 8 × 48 its fast arm once finished
        # while the four jobs were still being submitted, and ended COMPLETED (CI, loaded)
        wait_for("four submitted jobs", lambda: len(jobs_of(run_dir)) == 4, proc, 60)
        jobs = jobs_of(run_dir)
        victim, late, done, cancelled = jobs
        subprocess.run(["scancel", cancelled["job_id"]], env=slurm, check=True)
        # kill one running job, and send the other Slurm's warning before the time limit
        # (what --signal sends), each as soon as it has measured its first cell
        pending = {victim["group"]: "kill", late["group"]: "warn"}

        def act() -> bool:
            for group, action in list(pending.items()):
                if first_measurement(run_dir, group)():
                    job = victim if group == victim["group"] else late
                    if action == "kill":
                        assert kill_job_step(slurm, job["job_id"]) > 0
                    else:
                        subprocess.run(
                            ["scancel", "--signal=USR2", job["job_id"]], env=slurm, check=True
                        )
                    del pending[group]
            return not pending

        wait_for("both running jobs' first measurements", act, proc, 120)
        code, out = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        cleanup(slurm, run_dir)

    assert code == 1, out  # ran, but cells failed
    book = json.loads((run_dir / "jobs.json").read_text())
    by_group = {j["group"]: j for j in book["jobs"]}
    assert len(book["jobs"]) == 4  # one job per group: nothing submitted twice
    killed, timed_out, gone = (by_group[j["group"]] for j in (victim, late, cancelled))
    assert killed["state"] == "FAILED", killed
    assert f"Slurm job {victim['job_id']}" in killed["reason"]
    assert "exit code" in killed["reason"]
    assert timed_out["state"] == "TIMEOUT", timed_out
    assert "reached its time limit" in timed_out["reason"]
    assert gone["state"] == "CANCELLED", gone
    assert "cancelled" in gone["reason"]
    assert by_group[done["group"]]["state"] == "COMPLETED"

    ms = RunDir(run_dir).measurements()
    per_cell: dict[str, list[Measurement]] = {}
    for m in ms:
        per_cell.setdefault(m.cell_id, []).append(m)
    plan = json.loads((run_dir / "plan.json").read_text())
    assert len(per_cell) == sum(len(g["cells"]) for g in plan["groups"])  # every cell, once
    assert all(len(v) == 1 for v in per_cell.values())
    for job, record in ((victim, killed), (late, timed_out)):
        group_ms = [m for m in ms if m.group_id == job["group"]]
        assert any(m.ok for m in group_ms), "measurements before the job died are kept"
        lost = [m for m in group_ms if not m.ok]
        assert lost and all(f"Slurm job {job['job_id']}" in (m.error or "") for m in lost)
        assert record["cells_failed"] == len(lost)
    cancelled_ms = [m for m in ms if m.group_id == cancelled["group"]]
    assert cancelled_ms and all("cancelled" in (m.error or "") for m in cancelled_ms)
    assert all(m.ok for m in ms if m.group_id == done["group"])
    # the timed-out job stopped its server on the way out (no pid file left behind)
    assert not list((run_dir / "pids").glob(f"{late['group']}*.pid"))

    # the node is part of every server instance, and the arms shared it
    env = json.loads((run_dir / "env.json").read_text())
    nodes = {s["node"] for s in env["servers"].values()}
    assert nodes == {socket.gethostname().split(".")[0]}, env["servers"]
    assert set(book["nodes_by_arm"]) == {"slow", "fast"}
    assert book["never_shared_node"] == []

    text = report.read_text()
    assert f"Slurm job {victim['job_id']}" in text  # the reason reaches the report's failures
    assert "SIMULATED" in text
    assert "| node |" in text  # the environment's server table says where each instance ran


def test_interrupted_controller_leaves_jobs_running_and_resume_waits_for_them(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text((ROOT / "tests" / "specs" / "tiny.yaml").read_text())
    run_dir = tmp_path / "run"
    proc = start(
        slurm, "run", str(spec), "--rehearse", "--executor", "slurm", "--max-parallel", "1",
        "--out", str(run_dir), "--report", str(tmp_path / "r.md"),
    )  # fmt: skip
    try:
        wait_for("a submitted job", lambda: jobs_of(run_dir), proc, 60)
        first = jobs_of(run_dir)[0]
        proc.send_signal(signal.SIGINT)
        code, out = finish(proc, 60)
        assert code == 130, out
        assert "no terminal to ask" in out and "left running" in out, out
        assert f"--resume {run_dir}" in out
        assert first["job_id"] in squeue_ids(slurm)  # not cancelled: still queued or running
        book = json.loads((run_dir / "jobs.json").read_text())
        assert book["jobs"][0]["left_running"] is True

        proc = start(
            slurm, "run", str(spec), "--rehearse", "--executor", "slurm",
            "--resume", str(run_dir), "--report", str(tmp_path / "r.md"),
        )  # fmt: skip
        code, out = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        cleanup(slurm, run_dir)
    assert code == 0, out
    book = json.loads((run_dir / "jobs.json").read_text())
    stage1 = [j for j in book["jobs"] if j["round"] == 0]
    # the job left running was waited for, not submitted again: one stage-1 job per group
    assert sorted(j["group"] for j in stage1) == sorted({j["group"] for j in stage1})
    assert [j["job_id"] for j in stage1 if j["group"] == first["group"]] == [first["job_id"]]
    assert all(j["state"] == "COMPLETED" for j in book["jobs"])
    ms = RunDir(run_dir).measurements()
    # a re-measure after a `slowed` event is a busy host's (issue 44), not a job run twice
    again = {(e["cell"], e["attempt"]) for e in RunDir(run_dir).events() if e["event"] == "slowed"}
    firsts = [m for m in ms if m.reason == "first" and (m.cell_id, m.attempt) not in again]
    assert len(firsts) == len({m.cell_id for m in firsts}) == 4
    assert (run_dir / "report.md").exists()


def test_stage_two_on_slurm_tags_its_round_and_too_many_failed_requests_exit_1(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """As on one node: a stage-2 measurement carries the round that asked for it (what a
    resume reads back), and a run whose requests fail beyond `verify.failure_rate` exits 1.
    Two equal arms at a 3% margin with a 2% prior cannot be decided on one run each, so
    stage 2 relaunches both; 30% malformed streams put every cell over the rule."""
    spec = tmp_path / "tie.yaml"
    text = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()
    text = text.replace(
        "fast: {moe_runner_backend: flashinfer_cutedsl}", "fast: {moe_runner_backend: triton}"
    )
    text = text.replace("    rules:", "    effects: {malformed_rate: 0.3}\n    rules:")
    text = text.replace("num_prompts: 8", "num_prompts: 16")
    spec.write_text(text)
    run_dir = tmp_path / "run"
    code, out = rehearse_on_slurm(slurm, spec, run_dir)
    assert code == 1, out
    assert "over verify.failure_rate" in out, out
    book = json.loads((run_dir / "jobs.json").read_text())
    assert any(j["round"] == 1 for j in book["jobs"]), book["jobs"]
    ms = RunDir(run_dir).measurements()
    # stage 1 is each group's first launch (#1): its first runs and warm reruns; every run on
    # a later launch is stage 2's, a warm-up partner check's warm run among them
    stage2 = [m for m in ms if not m.instance.endswith("#1")]
    assert stage2, [m.reason for m in ms]
    assert all(m.reason != "first" for m in stage2), [m.reason for m in stage2]
    assert all(m.extra.get("round") == 1 for m in stage2 if m.instance.endswith("#2")), [
        (m.instance, m.reason, m.extra.get("round")) for m in stage2
    ]
    assert all("round" not in m.extra for m in ms if m.instance.endswith("#1"))


def test_a_fixed_design_on_slurm_measures_every_cell_on_its_own_launches(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """`verify.design: fixed` through the Slurm executor: the controller and its jobs build
    the same policy as one node (`verify.policy_for`), so every cell runs exactly max_runs
    times, each on its own launch (one job per group and round), and nothing else runs."""
    spec = tmp_path / "fixed.yaml"
    text = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()
    spec.write_text(
        text.replace(
            "verify: {threshold: 3%, surprise: 10%, max_runs: 2, noise: 2%}",
            "verify: {design: fixed, max_runs: 2}",
        )
    )
    run_dir = tmp_path / "run"
    code, out = rehearse_on_slurm(slurm, spec, run_dir)
    assert code == 0, out
    # a run that fell behind on a busy host is measured again on a slower relaunch (issue
    # 44): the re-measure stands for it, so the one before it is not a run of its own
    again = {(e["cell"], e["attempt"]) for e in RunDir(run_dir).events() if e["event"] == "slowed"}
    ms = [m for m in RunDir(run_dir).measurements() if (m.cell_id, m.attempt) not in again]
    by_cell: dict[str, list[tuple[str, str]]] = {}
    for m in ms:
        by_cell.setdefault(m.cell_id, []).append((m.reason, m.instance))
    assert len(by_cell) == 4 and all(len(v) == 2 for v in by_cell.values()), by_cell
    assert all(sorted(r for r, _ in v) == ["first", "fixed"] for v in by_cell.values())
    assert all(len({i for _, i in v}) == 2 for v in by_cell.values()), by_cell
    assert all(m.extra.get("round") == 1 for m in ms if m.reason == "fixed")
    sigma = json.loads((run_dir / "verdict.json").read_text())["sigma"][0]
    # launches − groups: 2 × 2 launches, more where a busy host had a run measured again on
    # a slower relaunch (its re-measure is kept)
    launches = len({m.instance for m in ms})
    assert sigma["fixed_design"] and sigma["launch_df"] == launches - 2, (launches, again)


def test_retry_failed_on_slurm_measures_the_failed_cells_again(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """`--resume --retry-failed` through the Slurm executor: the jobs of stage 1 measure the
    cells whose every attempt failed once more, tagged `retry`, and the run exits 0."""
    from test_failures import PROFILE

    profile = tmp_path / "p.yaml"
    profile.write_text(
        PROFILE + "effect_rules:\n  - when: {moe_runner_backend: flashinfer_cutedsl}\n"
        "    set: {error_rate: 1.0}\n"
    )
    head, _ = (ROOT / "tests" / "specs" / "tiny.yaml").read_text().split("  profile:\n")
    spec = tmp_path / "retry.yaml"
    spec.write_text(head + "  profile: p.yaml\n")
    run_dir = tmp_path / "run"
    args = ("--rehearse", "--executor", "slurm", "--report", str(tmp_path / "r.md"))
    code, out = run_to_end(slurm, run_dir, "run", str(spec), "--out", str(run_dir), *args)
    assert code == 1, out
    failed = {m.cell_id for m in RunDir(run_dir).measurements() if not m.ok}
    assert failed
    profile.write_text(PROFILE)
    resume = ("--resume", str(run_dir), "--retry-failed")
    code, out = run_to_end(slurm, run_dir, "run", str(spec), *resume, *args)
    assert code == 0, out
    retries = [m for m in RunDir(run_dir).measurements() if m.extra.get("retry")]
    assert {m.cell_id for m in retries} == failed and all(m.ok for m in retries)
