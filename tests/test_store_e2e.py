"""`verify.noise_from: auto` end to end: two real runs (the command engine launching
tests/fixedserver.py, a real streaming HTTP server, not the simulator) of one spec; the first
is recorded in the results store, the second borrows its noise, and `plan`, prior.json and the
report all name it. A rehearsal of the same spec borrows nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_runner import mr

ROOT = Path(__file__).resolve().parents[1]


def spec_text(model: Path) -> str:
    server = [sys.executable, str(ROOT / "tests/fixedserver.py"), "--port", "{port}"]
    version = [sys.executable, "-c", "print('fixedserver 1.0')"]
    return f"""
experiment: store-e2e
title: the results store lends one run's noise to the next
model: {{path: {model}, vocab_size: 32000}}
hardware: {{gpu: NVIDIA H200, count: 1}}
engine:
  kind: command
  launch: {json.dumps([*server, "--ttft-ms", "20"])}
  ready_path: /health
  version_command: {json.dumps(version)}
arms:
  slow: {{itl_ms: 8}}
  fast: {{itl_ms: 4}}
sweep: {{concurrency: [1, 4]}}
workload: {{input_len: 8, output_len: 16, num_prompts: 8, seed: 3}}
metrics: {{primary: output_throughput}}
verify: {{threshold: 5%, max_runs: 2}}
limits: {{startup_timeout: 60s, cell_timeout: 60s, request_timeout: 30s}}
correctness: {{enabled: false}}
"""


@pytest.mark.slow
def test_a_second_real_run_borrows_the_first_runs_noise_from_the_store(tmp_path: Path) -> None:
    spec = tmp_path / "store-e2e.yaml"
    spec.write_text(spec_text(tmp_path / "model"))
    first, second = tmp_path / "run1", tmp_path / "run2"
    res = mr("run", str(spec), "--out", str(first), "--report", str(tmp_path / "r1.md"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert not (first / "prior.json").exists()  # nothing earlier in this test's store
    plan = mr("plan", str(spec))
    assert f"noise from the results store (fixedserver 1.0): {first}" in plan.stdout

    res = mr("run", str(spec), "--out", str(second), "--report", str(tmp_path / "r2.md"))
    assert res.returncode == 0, res.stderr[-3000:]
    prior = json.loads((second / "prior.json").read_text())
    assert prior["runs"] == [str(first)] and prior["versions"] == ["fixedserver 1.0"]
    settings = json.loads((second / "settings.json").read_text())["analysis"]
    assert settings["noise_from"] == f"the results store (fixedserver 1.0): {first}"
    verdict = json.loads((second / "verdict.json").read_text())
    primary = next(s for s in verdict["sigma"] if s["metric"] == "output_throughput")
    assert primary["history"] == settings["noise_from"]
    # what was lent is the first run's own noise (it borrowed nothing itself)
    lent = {s["metric"]: s for s in json.loads((first / "verdict.json").read_text())["sigma"]}
    assert prior["sigmas"]["output_throughput"] == lent["output_throughput"]
    report = (second / "report.md").read_text()
    assert "earlier runs of this engine, model and hardware measured" in report
    assert "verify.noise_from: auto" in report

    history = mr("history", "--spec", str(spec))
    assert "slow: measured before in 2 run(s) (2 real)" in history.stdout
    rehearsal = mr(
        "run", str(spec), "--rehearse", "--out", str(tmp_path / "reh"),
        "--report", str(tmp_path / "reh.md"),
    )  # fmt: skip
    assert rehearsal.returncode == 0, rehearsal.stderr[-3000:]
    assert not (tmp_path / "reh" / "prior.json").exists()


@pytest.mark.slow
def test_a_real_run_with_the_store_down_completes_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MATRIXRUN_STORE", "postgresql://nobody@127.0.0.1:1/none")
    spec = tmp_path / "store-e2e.yaml"
    spec.write_text(spec_text(tmp_path / "model"))
    run = tmp_path / "run"
    res = mr("run", str(spec), "--out", str(run), "--report", str(tmp_path / "r.md"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert (run / "report.md").is_file()
    assert len((run / "results.jsonl").read_text().splitlines()) >= 4  # every cell measured
    said = [line for line in res.stderr.splitlines() if "results store" in line]
    assert len(said) == 1, said
    assert "could not be reached" in said[0] and "is not recorded" in said[0]
    assert f"matrixrun store rebuild {run}" in said[0]
