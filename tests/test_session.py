"""One start and one end for every executor (`run/session.py`, issue 43): a run on one node and
a run through Slurm write the same files before and after measuring. conftest.py rehearses one
spec both ways (the Slurm one on the local cluster; skipped without one); this compares what
they wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import Rehearsal

from matrixrun.run import outputs
from matrixrun.rundir.results import RunDir

pytestmark = pytest.mark.slow


def head(report: Path) -> list[str]:
    """The report's lines before its first section: title, verdict, checks, hypothesis, why,
    the charts."""
    lines = report.read_text().splitlines()
    return lines[: next(i for i, line in enumerate(lines) if line.startswith("## "))]


def run_start(run_dir: Path) -> dict[str, object]:
    (event,) = [e for e in RunDir(run_dir).events() if e["event"] == "run_start"]
    return event


def test_one_node_and_slurm_write_the_same_settings_and_report_head(
    rehearsed_here: Rehearsal, rehearsed_on_slurm: Rehearsal, tmp_path: Path
) -> None:
    """settings.json and plan.json byte for byte (the spec path is the same file's; nothing
    else in them depends on where the run measured), run_start apart from its time and the
    executor's name, and, fed the same measurements, the same report head and sections. The
    measurements themselves differ (two runs of a noisy simulator), so the Slurm run's
    directory gets the local run's results.jsonl and per-request records, and both are
    analysed and rendered again by the end both paths share."""
    here, slurm = rehearsed_here.run_dir, rehearsed_on_slurm.run_dir
    for run in (rehearsed_here, rehearsed_on_slurm):
        assert run.code == 0, run.output[-3000:]
    assert (slurm / "jobs.json").exists() and not (here / "jobs.json").exists()
    for name in ("settings.json", "plan.json"):
        assert (here / name).read_bytes() == (slurm / name).read_bytes(), name
    starts = [run_start(d) for d in (here, slurm)]
    assert [s.pop("executor") for s in starts] == ["local", "slurm"]
    assert [{k: v for k, v in s.items() if k != "t"} for s in starts] == [
        {"event": "run_start", "resumed": False, "rehearse": True}
    ] * 2

    same_here, same_slurm = tmp_path / "here", tmp_path / "slurm"
    shutil.copytree(here, same_here)
    shutil.copytree(slurm, same_slurm)
    shutil.rmtree(same_slurm / "results.d")
    shutil.rmtree(same_slurm / "requests")
    shutil.copy(here / "results.jsonl", same_slurm / "results.jsonl")
    shutil.copytree(here / "requests", same_slurm / "requests")
    for d in (same_here, same_slurm):
        outputs.analyse_run(d)
        outputs.render_run(d)
    report_here, report_slurm = same_here / "report.md", same_slurm / "report.md"
    assert head(report_here) == head(report_slurm)
    assert "**Verdict on `output_throughput`" in "\n".join(head(report_here))
    sections = [
        [line for line in r.read_text().splitlines() if line.startswith("## ")]
        for r in (report_here, report_slurm)
    ]
    assert sections[0] == sections[1]
