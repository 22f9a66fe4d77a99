"""`verify.design: fixed` (a calibration run): every cell max_runs times, each run on its own
launch, nothing chosen by the data; a later run's `verify.noise_from` pools its launch noise
too (analysis/prior.py), which an adaptive run's stopping makes unsafe (docs/benchmarks.md).
Unit checks of the pooling and the spec's rules, and the whole path on the simulator."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from matrixrun.analysis.prior import with_history
from matrixrun.core.errors import SpecError
from matrixrun.core.verdict import Sigma, SigmaSource
from matrixrun.spec import parse_spec

ROOT = Path(__file__).resolve().parent.parent
TINY = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()
ADAPTIVE = "verify: {threshold: 3%, surprise: 10%, max_runs: 2, noise: 2%}"


def sigma(**kw: object) -> Sigma:
    base: dict[str, object] = dict(metric="output_throughput", value=None, df=None,
                                   source=SigmaSource.FRESH_SERVER)  # fmt: skip
    return Sigma.model_validate(base | kw)


def test_a_fixed_designs_launch_variance_is_pooled_by_df() -> None:
    own = sigma(value=0.05, df=3, run=0.03, run_df=4.0, launch=0.04, launch_df=1,
                launch_var_sd=0.004)  # fmt: skip
    past = sigma(value=0.03, df=6, run=0.02, run_df=8.0, launch=0.02, launch_df=3,
                 launch_var_sd=0.0005, fixed_design=True)  # fmt: skip
    got = with_history(own, past, "runs/calibration")
    assert got.launch is not None
    assert got.launch**2 == pytest.approx((1 * 0.04**2 + 3 * 0.02**2) / 4) and got.launch_df == 4
    # weights df/Σdf: the pooled estimate's variance is Σ(dfᵢ/Σdf)²·Varᵢ
    want_sd = math.sqrt((1 * 0.004**2 + 9 * 0.0005**2) / 16)
    assert got.launch_var_sd == pytest.approx(want_sd)
    assert got.history_fixed and got.history_df == 8.0 + 3
    assert got.value == pytest.approx(math.sqrt(got.launch**2 + (got.run or 0) ** 2))
    # the same record from an adaptive run: its launch part is not pooled (its stopping)
    adaptive = with_history(own, past.model_copy(update={"fixed_design": False}), "runs/a")
    assert (adaptive.launch, adaptive.launch_df) == (0.04, 1) and not adaptive.history_fixed
    assert adaptive.history_df == 8.0


def test_the_spec_says_what_a_fixed_design_cannot_do() -> None:
    fixed = parse_spec(TINY.replace(ADAPTIVE, "verify: {design: fixed, max_runs: 3}"))
    v = fixed.verify
    assert (v.bisect, v.aa, v.warm_rerun, v.fresh_server) == (0, False, False, True)
    bad = {
        "verify: {design: fixed, max_runs: 1}": "needs max_runs of at least 2",
        "verify: {design: fixed, bisect: 1}": "so bisect: 1 cannot apply; remove it",
        "verify: {design: fixed, warm_rerun: true, aa: true}": "aa: true and warm_rerun: true",
    }
    for block, words in bad.items():
        with pytest.raises(SpecError) as err:
            parse_spec(TINY.replace(ADAPTIVE, block), "spec.yaml")
        assert words in str(err.value) and "spec.yaml:13: verify:" in str(err.value)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "matrixrun", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


@pytest.mark.slow
def test_a_calibration_run_measures_every_cell_on_its_own_launches_and_lends_its_launch_noise(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "calibrate.yaml"
    spec.write_text(TINY.replace(ADAPTIVE, "verify: {design: fixed, max_runs: 3}"))
    plan = _run("plan", str(spec))
    assert "fixed design: 6 launches, 12 cell runs" in plan.stdout, plan.stdout
    # the premise: no group's launches flagged odd (the odd-group test fires at 1% family-wise,
    # more often on a loaded machine, where the simulator's timing adds spread to one launch;
    # an odd group keeps its launch df to itself, which is another test's subject): one retry
    for attempt in range(2):
        cal = tmp_path / f"cal{attempt}"
        res = _run(
            "run", str(spec), "--rehearse", "--out", str(cal), "--report", str(tmp_path / "c.md")
        )
        assert res.returncode == 0, res.stderr[-2000:]
        first = json.loads((cal / "verdict.json").read_text())["sigma"][0]
        if not first["odd_groups"]:
            break
    assert not first["odd_groups"], f"two calibration runs flagged an odd group: {first}"
    assert "12/12:" in res.stdout + res.stderr  # the progress counts the whole design
    # a run that fell behind is measured again on a slower relaunch (issue 44's keeping rule):
    # a busy host's extra launch, not the design's; the design is judged on what was kept
    events = [json.loads(x) for x in (cal / "events.jsonl").read_text().splitlines()]
    again = {(e["cell"], e["attempt"]) for e in events if e["event"] == "slowed"}
    ms = [json.loads(line) for line in (cal / "results.jsonl").read_text().splitlines()]
    ms = [m for m in ms if (m["cell_id"], m["attempt"]) not in again]
    by_cell: dict[str, list[dict[str, object]]] = {}
    for m in ms:
        by_cell.setdefault(str(m["cell_id"]), []).append(m)
    assert len(by_cell) == 4
    for runs in by_cell.values():  # exactly max_runs, each on its own launch, nothing else
        assert [m["reason"] for m in runs] == ["first", "fixed", "fixed"]
        assert len({m["instance"] for m in runs}) == 3
    # 2 groups × 3 launches, shared by their cells (and one more per slower relaunch)
    launches = len({m["instance"] for m in ms})
    assert launches == 6 + len(again)
    settings = json.loads((cal / "settings.json").read_text())["analysis"]
    assert settings["looks"] == 1 and settings["design"] == "fixed"
    sig = {s["metric"]: s for s in json.loads((cal / "verdict.json").read_text())["sigma"]}
    past = sig["output_throughput"]
    assert past["fixed_design"] and past["launch_df"] == launches - 2  # launches − groups
    report = (tmp_path / "c.md").read_text()
    assert "one look: a fixed design" in report and "fixed design (calibration)" in report
    assert "a fixed design tests no explanation; every cell ran on 3 launches" in report
    # all 8 in one line on a quiet host; a run measured again after falling behind is told
    # apart from them (the rerun log's own lines), so only the wording is fixed then
    n = "8" if not again else r"\d+"
    assert re.search(n + r" replicates of the fixed design, each on its own launch", report)
    assert "pools all of it, the launch part included" in report

    later = tmp_path / "later.yaml"
    later.write_text(TINY.replace("noise: 2%}", f"noise: 2%, noise_from: {cal.name}}}"))
    assert "pooled by df too (a fixed design" in _run("plan", str(later)).stdout
    second = tmp_path / "second"
    res = _run("run", str(later), "--rehearse", "--out", str(second),
               "--report", str(tmp_path / "s.md"))  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    now = {s["metric"]: s for s in json.loads((second / "verdict.json").read_text())["sigma"]}
    s = now["output_throughput"]
    own_launches = len({json.loads(x)["instance"] for x in
                        (second / "results.jsonl").read_text().splitlines()})  # fmt: skip
    # the launch df are this run's own (launches − groups, if it relaunched) plus the calibration's
    assert s["launch_df"] == past["launch_df"] + max(own_launches - 2, 0)
    # the calibration's launch df lent (4, or 5 where a busy host had a slowed run relaunched)
    assert s["history_fixed"] and s["history_df"] == pytest.approx(
        past["run_df"] + past["launch_df"]
    )
    assert "a calibration run (verify.design: fixed) measured" in (tmp_path / "s.md").read_text()


def test_a_fixed_designs_checks_line_says_how_many_launches_each_cell_had() -> None:
    """The launches named are the fewest a cell actually ran on, not max_runs: a cell that one
    launch alone measured (its other runs failed) cannot carry an odd launch in its noise."""
    from matrixrun.report.sections.checks import Checks, checks_line

    c = Checks(explanations=[], agreement={}, suspect=[], failed_measurements=0,
               failed_requests=0, total_requests=10)  # fmt: skip
    assert "every cell ran on 3 launches" in checks_line(c, True, False, "concurrency", fixed=3)
    one = checks_line(c, True, False, "concurrency", fixed=1)
    assert "some cell ran on one launch only" in one and "launch noise" not in one
    assert "no rerun tested it" in checks_line(c, True, False, "concurrency")
