"""End to end through the real CLI: the simulator as real server subprocesses, the real load
client, the run directory, resume after an interruption, and failing servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from matrixrun.core.measurement import Measurement

ROOT = Path(__file__).resolve().parent.parent
TINY = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()

pytestmark = pytest.mark.slow


def mr(
    *args: str,
    cwd: Path = ROOT,
    timeout: float = 240,
    gpus: str | None = "NVIDIA H200, 550.54.15, 143771 MiB",
) -> subprocess.CompletedProcess[str]:
    """Run the CLI; `gpus` is what a fake nvidia-smi on PATH prints (None: no nvidia-smi)."""
    env = dict(os.environ)
    if gpus is not None:
        bin_dir = Path(os.environ.get("PYTEST_TMP", "/tmp")) / f"fake-smi-{abs(hash(gpus))}"
        bin_dir.mkdir(parents=True, exist_ok=True)
        smi = bin_dir / "nvidia-smi"
        smi.write_text(
            "#!/bin/sh\necho 'name, driver_version, memory.total [MiB]'\n"
            + "".join(f"echo '{line}'\n" for line in gpus.split("\n"))
        )
        smi.chmod(0o755)
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def read_results(run_dir: Path) -> list[Measurement]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [Measurement.model_validate_json(line) for line in lines if line.strip()]


def no_live_servers(run_dir: Path) -> bool:
    return not list((run_dir / "pids").glob("*.pid"))


def test_rehearsal_writes_a_complete_run_directory(tmp_path: Path) -> None:
    run_dir, report = tmp_path / "run", tmp_path / "tiny.md"
    res = mr(
        "run", "tests/specs/tiny.yaml", "--rehearse", "--out", str(run_dir), "--report", str(report)
    )
    assert res.returncode == 0, res.stderr[-3000:]
    for name in (
        "spec.yaml",
        "spec.sha256",
        "plan.json",
        "env.json",
        "results.jsonl",
        "events.jsonl",
        "verdict.json",
        "report.md",
    ):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "spec.yaml").read_text() == TINY
    ms = read_results(run_dir)
    # a busy host may make the simulator fall behind: that cell is measured again on a slower
    # relaunch (issue 44, core/keeping.py), so count each cell's first attempt
    firsts = [m for m in ms if m.reason == "first" and m.attempt == 1]
    assert len(firsts) == 4 and {m.arm for m in firsts} == {"slow", "fast"}
    assert all(m.ok and m.simulated and m.time_scale in (2, 1, 0.5) for m in ms)
    # the fast arm's modelled step is half the slow one's: about twice the throughput
    by = {(m.arm, m.point["concurrency"]): m.metrics.output_throughput for m in firsts if m.metrics}
    for c in (1, 4):
        assert 1.6 < by[("fast", c)] / by[("slow", c)] < 2.4
    # every measurement's per-request records are there and parse back
    from matrixrun.load.records import read_jsonl

    for m in ms:
        assert m.requests_file is not None
        records = read_jsonl(run_dir / m.requests_file)
        assert len(records) == 8 and all(r.output_tokens == 8 for r in records)
    env = json.loads((run_dir / "env.json").read_text())
    assert env["simulated"] is True and env["time_scale"] == 2
    servers = env["servers"]
    assert len(servers) >= 2
    assert all("sim" in (s["version"] or "") for s in servers.values())
    backends = {s["args"].get("moe_runner_backend") for s in servers.values()}
    assert backends == {"flashinfer_cutlass", "flashinfer_cutedsl"}
    assert no_live_servers(run_dir)
    logs = list((run_dir / "logs").glob("*.log"))
    assert len(logs) == len(servers)
    events = [json.loads(x)["event"] for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events.count("launch") == events.count("stop") == len(servers)
    assert "flush_cache" in events
    text = report.read_text()
    assert text == (run_dir / "report.md").read_text()
    assert "SIMULATED" in text.split("\n\n", 2)[0] + text.split("\n\n", 2)[1]
    n = len(ms)
    assert f"flushed before every cell ({n} flushes)" in text


def _wait_for_lines(
    path: Path, n: int, proc: subprocess.Popen[str], timeout: float, containing: str = ""
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if len(text.splitlines()) >= n and containing in text.replace(" ", ""):
            return
        if proc.poll() is not None:
            raise AssertionError(f"run ended early: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)
    raise AssertionError("no measurement appeared in time")


def test_interrupt_then_resume_measures_only_what_is_missing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matrixrun",
            "run",
            "tests/specs/tiny.yaml",
            "--rehearse",
            "--out",
            str(run_dir),
            "--report",
            str(tmp_path / "r.md"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for_lines(run_dir / "results.jsonl", 1, proc, 120)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err
    assert no_live_servers(run_dir)
    before = read_results(run_dir)
    assert 1 <= len(before) < 4 + 2

    res = mr(
        "run",
        "tests/specs/tiny.yaml",
        "--rehearse",
        "--resume",
        str(run_dir),
        "--report",
        str(tmp_path / "r.md"),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    after = read_results(run_dir)
    assert after[: len(before)] == before  # nothing measured is lost or rewritten
    # a run measures a cell's first run again only where the simulator (or client) fell behind
    # on a busy host, after a `slowed` event naming that attempt (issue 44, core/keeping.py)
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    again = {(e["cell"], e["attempt"]) for e in events if e["event"] == "slowed"}
    firsts = [m for m in after if m.reason == "first" and (m.cell_id, m.attempt) not in again]
    assert sorted(m.cell_id for m in firsts) == sorted({m.cell_id for m in firsts})
    assert len(firsts) == 4
    # instance names continue: a resumed launch never reuses an earlier instance's name
    inst_before = {m.instance for m in before}
    assert not inst_before & {m.instance for m in after[len(before) :]}
    assert "skipped" in res.stdout

    edited = tmp_path / "edited.yaml"
    edited.write_text(TINY.replace("output_len: 8", "output_len: 9"))
    res = mr("run", str(edited), "--rehearse", "--resume", str(run_dir))
    assert res.returncode == 2 and "differs from the spec this run started with" in res.stderr
    assert read_results(run_dir) == after


def _spec_with(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(TINY.replace(old, new))
    return path


def test_server_that_cannot_start_fails_its_cells_with_the_log_tail(tmp_path: Path) -> None:
    launch = json.dumps(
        [sys.executable, "-c", "import sys; print('CUDA out of memory: boom'); sys.exit(3)"]
    )
    spec = _spec_with(
        tmp_path,
        "engine: {kind: sglang, args: {tp: 1}}",
        f"engine: {{kind: sglang, args: {{tp: 1}}, launch: {launch}}}",
    )
    run_dir = tmp_path / "run"
    res = mr("run", str(spec), "--out", str(run_dir), "--report", str(tmp_path / "r.md"))
    assert res.returncode == 1, res.stderr[-2000:]
    ms = read_results(run_dir)
    assert len(ms) == 4, "a cell that never measured is reported, not retried"
    assert not any(m.ok for m in ms)
    assert all("exited with code 3" in (m.error or "") for m in ms)
    assert all("CUDA out of memory: boom" in (m.error or "") for m in ms)
    report = (tmp_path / "r.md").read_text()
    assert "CUDA out of memory" in report


def test_sglang_engine_path_against_the_simulator(tmp_path: Path) -> None:
    """No rehearsal: the sglang engine's own launch (engine.launch pointing at the simulator),
    flag rendering, /health_generate, server info and /flush_cache."""
    launch = json.dumps([sys.executable, "-m", "matrixrun.sim"])
    spec = _spec_with(
        tmp_path,
        "engine: {kind: sglang, args: {tp: 1}}",
        f"engine: {{kind: sglang, args: {{tp: 1, enable_mixed_chunk: true, "
        f"disable_radix_cache: false}}, launch: {launch}}}",
    )
    run_dir = tmp_path / "run"
    res = mr("run", str(spec), "--out", str(run_dir), "--report", str(tmp_path / "r.md"))
    assert res.returncode == 0, res.stderr[-2000:]
    ms = read_results(run_dir)
    # not a rehearsal, but the server says it is the simulator: still labelled simulated
    assert all(m.ok and m.simulated and m.time_scale == 1 for m in ms)
    env = json.loads((run_dir / "env.json").read_text())
    args = next(iter(env["servers"].values()))["args"]
    assert args["enable_mixed_chunk"] is True and "disable_radix_cache" not in args
    assert args.get("tp_size", args.get("tp")) == 1
    assert "SIMULATED" in (tmp_path / "r.md").read_text()


def test_server_dying_mid_run_is_relaunched_and_recorded(tmp_path: Path) -> None:
    """The fast arm's server crashes 2 s (wall) after it starts, always inside its first cell
    (it is healthy well before; a decode step takes 0.5 s wall, so the warmup alone outlasts
    the crash): every fast cell fails as a death on its own launch."""
    spec = _spec_with(
        tmp_path,
        "    rules:\n",
        "    effect_rules:\n      - when: {moe_runner_backend: flashinfer_cutedsl}\n"
        "        set: {crash_after_s: 4}\n    rules:\n",
    )
    spec.write_text(spec.read_text().replace("[[1, 10], [8, 12]]", "[[1, 1000], [8, 1000]]"))
    run_dir = tmp_path / "run"
    res = mr(
        "run", str(spec), "--rehearse", "--out", str(run_dir), "--report", str(tmp_path / "r.md")
    )
    assert res.returncode == 1
    ms = read_results(run_dir)
    failed = [m for m in ms if not m.ok]
    assert {m.arm for m in failed} == {"fast"} and all(not m.ok for m in ms if m.arm == "fast")
    for m in failed:
        assert (m.error or "").startswith(f"server {m.instance} died (exit code 1) during the cell")
    assert len({m.instance for m in failed}) == len(failed), "each death is followed by a relaunch"
    slow = [m for m in ms if m.arm == "slow" and m.reason == "first" and m.attempt == 1]
    assert len(slow) == 2 and all(m.ok for m in slow)
    assert no_live_servers(run_dir)
    assert (tmp_path / "r.md").exists()


def test_hardware_mismatch_stops_before_any_launch(tmp_path: Path) -> None:
    launch = json.dumps([sys.executable, "-m", "matrixrun.sim"])
    spec = _spec_with(
        tmp_path,
        "engine: {kind: sglang, args: {tp: 1}}",
        f"engine: {{kind: sglang, args: {{tp: 1}}, launch: {launch}}}",
    )
    run_dir = tmp_path / "run"
    res = mr(
        "run",
        str(spec),
        "--out",
        str(run_dir),
        "--report",
        str(tmp_path / "r.md"),
        gpus="NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB",
    )
    assert res.returncode == 2
    assert "H100" in res.stderr and "--ignore-hardware" in res.stderr
    assert not run_dir.exists()  # nothing launched, nothing written

    res = mr(
        "run",
        str(spec),
        "--out",
        str(run_dir),
        "--report",
        str(tmp_path / "r.md"),
        "--ignore-hardware",
        gpus="NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    env = json.loads((run_dir / "env.json").read_text())
    assert env["hardware_check"]["overridden"] is True
    assert env["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    report = (tmp_path / "r.md").read_text()
    assert "**overridden**: spec asks for 1x NVIDIA H200" in report


def test_correctness_gate_marks_a_diverging_arm_suspect(tmp_path: Path) -> None:
    spec = _spec_with(
        tmp_path,
        "correctness: {enabled: false}",
        "correctness: {enabled: true, prompts: 3, input_len: 8, max_new_tokens: 12, floor: 90%}",
    )
    spec.write_text(
        spec.read_text().replace(
            "    rules:\n",
            "    effect_rules:\n      - when: {moe_runner_backend: flashinfer_cutedsl}\n"
            "        set: {diverge_after_tokens: 4}\n    rules:\n",
        )
    )
    run_dir = tmp_path / "run"
    res = mr(
        "run", str(spec), "--rehearse", "--out", str(run_dir), "--report", str(tmp_path / "r.md")
    )
    assert res.returncode == 0, res.stderr[-2000:]
    # the gate's outcome travels in settings.json (what the analysis reads), not env.json
    assert "correctness" not in json.loads((run_dir / "env.json").read_text())
    settings = json.loads((run_dir / "settings.json").read_text())["analysis"]
    assert settings["correctness"] == {"fast": pytest.approx(4 / 12)}
    from matrixrun.run.correctness import agreement_by_arm

    records = [json.loads(p.read_text()) for p in sorted((run_dir / "correctness").glob("*.json"))]
    assert agreement_by_arm(records, settings["baseline"])["fast"]["first_divergence"] == 4
    verdict = json.loads((run_dir / "verdict.json").read_text())
    cand = verdict["slices"][0]["candidates"][0]
    assert cand["candidate"] == "fast" and cand["suspect"] is True
    assert "suspect" in (tmp_path / "r.md").read_text().lower()


def test_a_run_cut_short_keeps_the_correctness_gates_outcome(tmp_path: Path) -> None:
    """settings.json carries each gate's outcome as soon as it is known, so `analyse` on a run
    interrupted after both arms' gates does not say "outputs not checked" (seen on the H200:
    a run stopped at the device's time limit)."""
    spec = _spec_with(
        tmp_path,
        "correctness: {enabled: false}",
        "correctness: {enabled: true, prompts: 3, input_len: 8, max_new_tokens: 12, floor: 90%}",
    )
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "matrixrun", "run", str(spec), "--rehearse", "--out",
           str(run_dir), "--report", str(tmp_path / "r.md")]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    # the second arm has measured (a busy host may add re-measures of the first arm's cells
    # before it: issue 44, core/keeping.py)
    _wait_for_lines(run_dir / "results.jsonl", 3, proc, 180, containing='"arm":"fast"')
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert len(read_results(run_dir)) < 8  # cut short, not finished
    settings = json.loads((run_dir / "settings.json").read_text())["analysis"]
    assert settings["correctness"] == {"fast": pytest.approx(1.0)}
    # its report says it stopped early and how to continue; a finished run's does not
    assert mr("analyse", str(run_dir)).returncode == 0
    text = mr("report", str(run_dir), "-o", "-").stdout
    assert "This run did not finish" in text
    assert "spec.yaml --rehearse --resume " in text, text[-2000:]  # paths as the report words them
    again = mr(
        "run", str(spec), "--rehearse", "--resume", str(run_dir), "--report", str(tmp_path / "r.md")
    )
    assert again.returncode == 0
    assert "did not finish" not in (run_dir / "report.md").read_text()


def test_missing_sglang_says_which_python_to_point_at(tmp_path: Path) -> None:
    """The default launch (this Python, no SGLang here) fails once, before any launch, with
    what to do (issue 33: it used to fail every cell in turn, "measured 10", exit 1)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(TINY)
    run_dir = tmp_path / "run"
    res = mr("run", str(spec), "--out", str(run_dir), "--report", str(tmp_path / "r.md"))
    assert res.returncode == 2, res.stderr
    assert "has no module 'sglang' (`-m sglang.launch_server`)" in res.stderr
    assert "MATRIXRUN_SGLANG_PYTHON" in res.stderr and "measured" not in res.stdout
    assert not run_dir.exists()  # nothing launched, nothing written
