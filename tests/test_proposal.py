"""`matrixrun plan --markdown`: the proposal a reviewer reads on the PR."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from matrixrun.core.measurement import Measurement
from matrixrun.engines import for_spec
from matrixrun.plan import expand
from matrixrun.publish.proposal import (
    HOST_PLACEHOLDER,
    PORT_PLACEHOLDER,
    Validation,
    command_line,
    history_estimate,
    proposal_markdown,
    render_proposal,
)
from matrixrun.rundir.results import RunDir
from matrixrun.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
GLM5 = ROOT / "spec" / "glm5_cutedsl.yaml"
TINY = ROOT / "tests" / "specs" / "tiny.yaml"


def mr(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", **env}, check=False,
    )  # fmt: skip


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", text, flags=re.S)


def test_each_launch_shows_the_command_line_the_engine_renders() -> None:
    spec = load_spec(GLM5)
    plan = expand(spec)
    text, validation, key = render_proposal(GLM5)
    assert validation.ok and key == "glm5-cutedsl"
    assert "is valid (2 arms, 1 slice, 10 cells, 2 launches)" in text
    blocks = sh_blocks(text)
    assert len(blocks) == len(plan.groups) == 2
    engine = for_spec(spec.engine)
    for group, block in zip(plan.groups, blocks, strict=True):
        argv = engine.launch(group, HOST_PLACEHOLDER, PORT_PLACEHOLDER).argv
        # the same words as the engine's own launch, the interpreter aside
        assert block.split()[1:] == argv[1:]
        assert block.split()[0] == "python"
        assert f"--moe-runner-backend {group.flags['moe_runner_backend']}" in block
        assert "--port {port}" in block and "--host {host}" in block
    assert sys.executable not in text
    # the arms table lists only what differs; the rest is named once
    table = text.split("### Arms", 1)[1].split("###", 1)[0]
    assert "| `moe_runner_backend` | `flashinfer_cutlass` | `flashinfer_cutedsl` |" in table
    assert "| `tp`" not in table and "Same in every arm: `tp` = `8`" in table
    assert "flashinfer_cutedsl JIT-compiles kernels" in text  # the hypothesis
    assert "**10 cells**" in text and "| first pass | 2 | 10 |" in text
    assert "| verify worst case | 6 | 30 |" in text
    # 2 launches × 12m + 10 cells × 4m on 8 GPUs each
    assert "≈ 64m | ≈ 8.5 GPU-h" in text


def test_secrets_are_redacted_and_placeholders_inside_arguments_survive() -> None:
    spec = parse_spec(
        """
experiment: cmd
title: t
model: {path: /m}
hardware: {gpu: NVIDIA H200, count: 2}
engine:
  kind: command
  launch: [server, "--port={port}", --bind, "{host}", --model, "{model}"]
  env: {HF_TOKEN: hf_s3cr3t, OMP_NUM_THREADS: "4"}
arms:
  a: {flags: {api_key: k3y-value, batch: 1}}
  b: {flags: {api_key: k3y-value, batch: 8}, env: {EXTRA: "1"}}
"""
    )
    plan = expand(spec)
    lines = [command_line(spec, g) for g in plan.groups]
    assert lines[0] == (
        "HF_TOKEN=*** OMP_NUM_THREADS=4 server --port={port} --bind {host} --model /m "
        "--api-key *** --batch 1"
    )
    assert "EXTRA=1" in lines[1] and lines[1].endswith("--batch 8")
    text = proposal_markdown(spec, plan, Validation("cmd.yaml"))
    assert "hf_s3cr3t" not in text and "k3y-value" not in text
    assert "| `batch` | `1` | `8` |" in text and "| env |" in text


def test_invalid_spec_gets_a_proposal_that_shows_why_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.read_text().replace("experiment: tiny", "experiment: broken-one")
                   .replace("max_runs: 2", "max_runz: 2"))  # fmt: skip
    res = mr("plan", str(bad), "--markdown")
    assert res.returncode == 2
    assert res.stdout.startswith("## Proposal: broken-one")
    assert "Validation failed" in res.stdout
    assert re.search(r"bad\.yaml:\d+: verify.*max_runz", res.stdout)
    assert "Traceback" not in res.stderr and "max_runz" in res.stderr
    _, validation, key = render_proposal(bad)
    assert not validation.ok and key == "broken-one"
    unreadable = tmp_path / "junk.yaml"
    unreadable.write_text(": : :\n\t-")
    assert render_proposal(unreadable)[2] == "junk"


def _past_run(root: Path, spec_text: str, *, startups: list[float], cells: list[float],
              simulated: bool = False) -> Path:  # fmt: skip
    """A run directory as `matrixrun run` writes it, with these launch and cell times."""
    spec = parse_spec(spec_text)
    plan = expand(spec)
    rd = RunDir(root).create()
    rd.write_text("spec.yaml", spec_text)
    rd.write_json("plan.json", plan.model_dump(mode="json"))
    group = plan.groups[0]
    servers = {
        f"{group.group_id}#{i}": {"group": group.group_id, "startup_s": s}
        for i, s in enumerate(startups, 1)
    }
    rd.write_json("env.json", {"simulated": simulated, "servers": servers})
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i, seconds in enumerate(cells):
        cell = group.cells[0]
        start = t0 + timedelta(hours=i)
        rd.append(
            Measurement(
                cell_id=cell.cell_id, point_id=cell.point_id, arm=cell.arm,
                group_id=group.group_id, point=cell.point, attempt=i + 1,
                instance=f"{group.group_id}#1", error="x", simulated=simulated,
                started_at=start.isoformat(),
                finished_at=(start + timedelta(seconds=seconds)).isoformat(),
            )
        )  # fmt: skip
    return rd.path


@pytest.mark.slow
def test_history_estimates_from_real_runs_of_the_same_engine_model_and_hardware(
    tmp_path: Path,
) -> None:
    tiny = TINY.read_text()
    runs = tmp_path / "runs"
    _past_run(runs / "a" / "1", tiny, startups=[100.0, 300.0], cells=[60.0, 180.0])
    _past_run(runs / "b" / "2", tiny, startups=[], cells=[120.0])
    # not counted: a rehearsal, other hardware, another engine
    _past_run(runs / "sim", tiny, startups=[1.0], cells=[1.0], simulated=True)
    _past_run(runs / "h100", tiny.replace("NVIDIA H200", "NVIDIA H100"), startups=[9.0],
              cells=[9.0])  # fmt: skip
    _past_run(runs / "vllm", tiny.replace("kind: sglang", "kind: vllm"), startups=[9.0],
              cells=[9.0])  # fmt: skip
    spec = load_spec(TINY)
    est = history_estimate(spec, expand(spec), [runs])
    assert (est.launch_s, est.launches, est.cell_s, est.cells) == (200.0, 2, 120.0, 3)
    assert len(est.run_dirs) == 2

    res = mr("plan", str(TINY), "--markdown", "--history", str(runs))
    assert res.returncode == 0, res.stderr
    # tiny: 2 launches and 4 cells in the first pass, one GPU: 2×200 s + 4×120 s = 880 s
    assert "| first pass | 2 | 4 | ≈ 15m | ≈ 15 GPU-min |" in res.stdout
    assert "2 earlier run directories of the same engine, model and hardware" in res.stdout
    assert "launch 3m (median of 2), cell 2m (median of 3)" in res.stdout
    none = mr("plan", str(TINY), "--markdown", "--history", str(runs / "sim"))
    assert "No time estimate: earlier real runs in --history" in none.stdout
    assert "gave 0 launch and 0 cell times" in none.stdout
    missing = mr("plan", str(TINY), "--markdown", "--history", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "--history" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.slow
def test_plan_and_report_write_the_job_summary_when_asked(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    res = mr("plan", str(TINY), GITHUB_STEP_SUMMARY=str(summary))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("tiny: ")  # the text plan on stdout, as before
    written = summary.read_text()
    assert written.startswith("earlier step\n## Proposal: tiny")  # appended, not replaced
    md = mr("plan", str(TINY), "--markdown", GITHUB_STEP_SUMMARY=str(summary))
    assert summary.read_text() == written + md.stdout + "\n"
    assert not (tmp_path / "other").exists()
    plain = mr("plan", str(TINY))
    assert plain.returncode == 0 and "Proposal" not in plain.stdout
    blocked = mr("plan", str(TINY), GITHUB_STEP_SUMMARY=str(tmp_path / "no" / "dir" / "f"))
    assert blocked.returncode == 0 and "warning: could not append to GITHUB_STEP_SUMMARY" in (
        blocked.stderr
    )


@pytest.mark.slow
def test_report_writes_the_job_summary(tmp_path: Path) -> None:
    golden = ROOT / "tests" / "golden" / "bench_serving"
    out = tmp_path / "run"
    ing = mr("ingest", str(golden / "fast_prefill.jsonl"), str(golden / "fast_decode.jsonl"),
             "--baseline", "fast_prefill", "--out", str(out))  # fmt: skip
    assert ing.returncode == 0, ing.stderr
    summary = tmp_path / "summary.md"
    res = mr("report", str(out), GITHUB_STEP_SUMMARY=str(summary))
    assert res.returncode == 0, res.stderr
    assert summary.read_text() == (out / "report.md").read_text() + "\n"
    assert json.loads((out / "verdict.json").read_text())["overall"]


@pytest.mark.slow
def test_a_proposal_too_long_for_one_comment_shows_fewer_command_lines() -> None:
    from matrixrun.publish.github import COMMENT_LIMIT

    sizes = ", ".join(str(1024 * i) for i in range(1, 41))
    spec = parse_spec(
        f"""
experiment: big
title: t
model: {{path: /m}}
hardware: {{gpu: NVIDIA H200}}
engine: {{args: {{json_model_override_args: {{pad: "{"x" * 3000}"}}}}}}
arms: {{a: {{k: 1}}, b: {{k: 2}}}}
sweep: {{server: {{chunked_prefill_size: [{sizes}]}}}}
"""
    )
    plan = expand(spec)
    assert len(plan.groups) == 80
    full = "\n".join(command_line(spec, g) for g in plan.groups)
    assert len(full) > COMMENT_LIMIT  # every command line would not fit
    text = proposal_markdown(spec, plan, Validation("big.yaml"))
    assert len(text) < COMMENT_LIMIT - 200
    shown = sh_blocks(text)
    assert 0 < len(shown) < 24 and shown[0] == command_line(spec, plan.groups[0])
    assert f"{80 - len(shown)} more launches, left out to keep the comment short" in text
