"""`verify.noise_from`: an earlier run's noise pooled with this run's (analysis/prior.py),
the spec's path checks, the history's compatibility checks, and the whole path on the
simulator: one rehearsal's verdict.json feeding the next one's analysis and report."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from matrixrun.analysis.prior import with_history
from matrixrun.core.errors import InputError, SpecError
from matrixrun.core.verdict import Sigma, SigmaAt, SigmaSource
from matrixrun.plan import expand
from matrixrun.plan.history import noise_history
from matrixrun.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
TINY = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()


def sigma(**kw: object) -> Sigma:
    base: dict[str, object] = dict(metric="output_throughput", value=None, df=None,
                                   source=SigmaSource.NONE)  # fmt: skip
    return Sigma.model_validate(base | kw)


def test_components_pool_by_df_and_a_missing_launch_part_comes_from_history() -> None:
    own = sigma(
        value=0.04,
        df=2,
        source=SigmaSource.WARM,
        run=0.04,
        run_df=2.0,
        by_x=[SigmaAt(x=1, run=0.04, run_df=2.0), SigmaAt(x=8, run=0.05, run_df=1.0)],
    )
    past = sigma(value=0.036, df=5, source=SigmaSource.FRESH_SERVER, run=0.02, run_df=6.0,
                 launch=0.03, launch_df=3, by_x=[SigmaAt(x=1, run=0.01, run_df=6.0)])  # fmt: skip
    got = with_history(own, past, "runs/earlier")
    at = {a.x: a for a in got.by_x}
    assert at[1].run ** 2 == pytest.approx((2 * 0.04**2 + 6 * 0.01**2) / 8) and at[1].run_df == 8
    # no point 8 in the earlier run: its pooled run noise stands in
    assert at[8].run ** 2 == pytest.approx((1 * 0.05**2 + 6 * 0.02**2) / 7) and at[8].run_df == 7
    assert got.run is not None and got.run**2 == pytest.approx((2 * 0.04**2 + 6 * 0.02**2) / 8)
    # warm repeats alone cannot show a launch part; the earlier run's is taken, on its df
    assert got.source == SigmaSource.FRESH_SERVER and got.launch == pytest.approx(0.03)
    assert got.launch_df == 3 and got.history == "runs/earlier" and got.history_df == 9
    assert got.value == pytest.approx(math.sqrt(0.03**2 + got.run**2))
    assert with_history(own, None, "x") == own


def test_a_runs_own_launch_variance_is_kept_not_pooled() -> None:
    """Pooled, the launch part failed the gate in the `launch` world (prior.py's docstring):
    where the run has a launch estimate of its own, that one stands, with its spread."""
    own = sigma(value=0.05, df=3, source=SigmaSource.FRESH_SERVER, run=0.03, run_df=4.0,
                launch=0.04, launch_df=1, launch_var_sd=0.004)  # fmt: skip
    past = sigma(value=0.03, df=6, source=SigmaSource.FRESH_SERVER, run=0.02, run_df=8.0,
                 launch=0.02, launch_df=3)  # fmt: skip
    got = with_history(own, past, "e")
    assert (got.launch, got.launch_df, got.launch_var_sd) == (0.04, 1, pytest.approx(0.004))
    assert got.run is not None and got.run**2 == pytest.approx((4 * 0.03**2 + 8 * 0.02**2) / 12)
    assert got.run_df == 12 and got.value == pytest.approx(math.sqrt(0.04**2 + got.run**2))


def _write_spec(tmp_path: Path, noise_from: str, model: str = "/models/tiny") -> Path:
    text = TINY.replace("noise: 2%}", f"noise: 2%, noise_from: {noise_from}}}")
    path = tmp_path / "spec.yaml"
    path.write_text(text.replace("/models/tiny", model))
    return path


def test_noise_from_must_name_an_analysed_run_directory(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_write_spec(tmp_path, "runs/nope"))
    assert "verify.noise_from" in str(err.value) and "no such directory" in str(err.value)
    assert "spec.yaml:13" in str(err.value)  # where, in the spec
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    with pytest.raises(SpecError, match=r"it has no verdict\.json"):
        load_spec(_write_spec(tmp_path, "runs/empty"))


def _rehearse(spec: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", "run", str(spec), *extra, "--out", str(out),
         "--report", str(out.parent / f"{out.name}.md")],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_a_rehearsal_pools_the_noise_of_an_earlier_one(tmp_path: Path) -> None:
    """The earlier run is a calibration (`design: fixed`, as verify.noise_from's docs advise):
    its every cell runs twice, so it measures run noise whatever the data say. (An adaptive
    earlier run measures run noise only where its policy happened to rerun on one server,
    which on the tiny spec's +90% effect it mostly does not.)"""
    first = tmp_path / "first"
    spec0 = tmp_path / "tiny.yaml"
    spec0.write_text(TINY.replace("noise: 2%}", "design: fixed}"))
    assert _rehearse(spec0, first, "--rehearse").returncode == 0
    before = {s["metric"]: s for s in json.loads((first / "verdict.json").read_text())["sigma"]}

    spec = _write_spec(tmp_path, "first")
    second = tmp_path / "second"
    res = _rehearse(spec, second, "--rehearse")
    assert res.returncode == 0, res.stderr[-2000:]
    settings = json.loads((second / "settings.json").read_text())["analysis"]
    assert settings["noise_from"] == f"{first} (SIMULATED)"
    assert set(settings["noise_history"]) == set(before)  # on file: re-analysis needs no dir
    sig = {s["metric"]: s for s in json.loads((second / "verdict.json").read_text())["sigma"]}
    s, b = sig["output_throughput"], before["output_throughput"]
    assert s["history"] == settings["noise_from"]
    # the earlier run's run-noise df are added to what this run's own measurements give
    from matrixrun.analysis import analyse
    from matrixrun.core.verdict import AnalysisSettings
    from matrixrun.rundir.results import RunDir

    alone = AnalysisSettings.model_validate(settings | {"noise_history": {}, "noise_from": None})
    own = next(x for x in analyse(RunDir(second).measurements(), alone).sigma
               if x.metric == "output_throughput")  # fmt: skip
    assert s["history_df"] >= b["run_df"] > 0
    assert s["run_df"] == pytest.approx(own.run_df + b["run_df"], abs=0.02)
    report = (tmp_path / "second.md").read_text()
    assert "pooled with the noise a calibration run (verify.design: fixed) measured" in report
    # the run's own copy of the spec (what its report's Reproduce and resume commands name)
    # keeps `first`, which does not resolve from inside it: it borrows what `second` borrowed
    # (first's noise, from second's settings.json), never second's own (a resume of second
    # would count its own df twice)
    assert not (second / "first").exists()
    copy = load_spec(second / "spec.yaml")
    assert copy.verify.noise_from == str((second / "settings.json").resolve())
    assert copy.verify.noise_from is not None
    again = noise_history(copy, expand(copy), copy.verify.noise_from)
    assert again.label == settings["noise_from"]
    assert again.sigmas["output_throughput"].run_df == b["run_df"]
    if s["run_df"] > b["run_df"]:  # second measured run noise of its own (it may not: the
        # borrowed σ can decide every cell on the first pass): not counted again
        assert again.sigmas["output_throughput"].run_df != s["run_df"]

    # a real run never borrows a simulator's noise: refused before any launch
    real = _rehearse(spec, tmp_path / "real")
    assert real.returncode != 0 and "is a SIMULATED run" in real.stderr
    assert not (tmp_path / "real" / "results.jsonl").exists()
    # nor another model's noise
    other = load_spec(_write_spec(tmp_path, "first", model="/models/other"))
    with pytest.raises(InputError, match="no server group of engine sglang, model /models/other"):
        noise_history(other, expand(other), first)


def test_plan_and_proposal_say_what_noise_from_lends_before_anything_runs() -> None:
    """A reviewer sees the borrowed σ and its df in `plan` and in the PR proposal."""
    spec = ROOT / "spec" / "h200_transformers_cb.yaml"
    run = [sys.executable, "-m", "matrixrun", "plan", str(spec)]
    text = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    line = next(x for x in text.splitlines() if x.startswith("noise from "))
    source = Path(load_spec(spec).verify.noise_from or "")
    past = {s["metric"]: s for s in json.loads((source / "verdict.json").read_text())["sigma"]}
    sigma = past["output_throughput"]
    assert f"output_throughput σ {sigma['value']:.1%}, run noise on {sigma['run_df']:g} df" in line
    proposal = subprocess.run([*run, "--markdown"], cwd=ROOT, capture_output=True, text=True)
    assert "Noise from " in proposal.stdout and "pooled by df" in proposal.stdout


def test_an_adaptive_earlier_runs_noise_is_named_for_what_it_is() -> None:
    """The rehearsal above borrows a calibration's noise; an adaptive earlier run (its launch
    part not pooled: prior.py) is named as such, with its df and where it came from."""
    from matrixrun.report.sections.noise import sigma_text

    s = sigma(value=0.03, df=4, source=SigmaSource.FRESH_SERVER, run=0.02, run_df=3.0,
              history="runs/earlier", history_df=3.0)  # fmt: skip
    text = sigma_text(s)
    assert "pooled with the noise an earlier run measured (3 df, `runs/earlier`" in text
    assert "verify.noise_from): it holds only if that run's noise is this one's" in text
