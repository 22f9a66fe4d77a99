"""Launch instability (matrixrun/analysis/launches.py) and its first lines in the document
(matrixrun/report/sections/launches.py).

Measurements are built the way a server group produces them (cells on launches, one instance
id per launch); the real H200 run `reports/runs/h200_transformers_cuda_graph` is the case the
check was built for: the baseline's launches 35% apart at concurrency 1 where the candidate's
three agree within 2%, and no cell ran twice on one launch.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from test_analysis import BASE, CAND, meas, settings

from matrixrun.analysis import analyse, estimate_sigma
from matrixrun.analysis.launches import launch_check
from matrixrun.analysis.variance import cell_variance
from matrixrun.core.measurement import Measurement
from matrixrun.report.sections.launches import unstable_launches, untested
from matrixrun.run.outputs import _run_dir

XS = [1, 8, 32, 128]
ROOT = Path(__file__).resolve().parent.parent


def _group(arm: str, launches: list[dict[int, float]], repeats: int = 1) -> list[Measurement]:
    """One arm's group: on launch i, `repeats` runs of each cell at launches[i]'s value."""
    out = []
    attempt = 0
    for i, values in enumerate(launches):
        for x, v in values.items():
            for r in range(repeats):
                attempt += 1
                m = meas(arm, x, v * (1 + 0.002 * r), instance=f"{arm}#{i + 1}", attempt=attempt)
                out.append(m.model_copy(update={"group_id": arm}))
    return out


def test_one_odd_launch_is_named_with_its_values_against_within_launch_repeats() -> None:
    steady = {x: 100.0 * x for x in XS}
    odd = {**steady, 32: 100.0 * 32 * 0.5}
    ms = _group(BASE, [steady, odd], repeats=2) + _group(CAND, [steady, steady], repeats=2)
    check = launch_check(ms, "output_throughput", margin=0.05)
    assert check.tested == 8
    [found] = check.unstable
    assert (found.arm, found.x, found.against) == (BASE, 32.0, "repeats")
    assert [round(v.value) for v in found.launches] == [3203, 1602]
    assert math.isclose(found.spread, 1.0, rel_tol=0.01)
    [line] = unstable_launches(check, "concurrency", "tok/s")
    assert line.startswith(f"**Unstable launches: `{BASE}`**")
    assert "concurrency 32" in line and "not the flag" in line


def test_launches_that_agree_within_run_noise_are_not_named() -> None:
    """Pure noise, same σ within and between launches: over 200 draws of an A/A-like pair of
    groups the family-wise rate of naming any launch stays near ALPHA (5%), well under 12%."""
    rng = np.random.default_rng(5)
    named = 0
    for _ in range(200):
        ms: list[Measurement] = []
        for arm in (BASE, CAND):
            attempt = 0
            for i in range(2):
                for x in XS:
                    for _r in range(2):
                        attempt += 1
                        v = 100.0 * x * math.exp(rng.normal(0, 0.05))
                        m = meas(arm, x, v, instance=f"{arm}#{i + 1}", attempt=attempt)
                        ms.append(m.model_copy(update={"group_id": arm}))
        named += bool(launch_check(ms, "output_throughput", margin=0.05).unstable)
    assert named / 200 < 0.12


def test_without_repeats_the_other_configurations_launches_stand_in() -> None:
    noisy = [{x: 100.0 * x * f for x in XS} for f in (1.0, 1.3, 0.8)]
    calm = [{x: 150.0 * x * f for x in XS} for f in (1.0, 1.01, 0.995)]
    ms = _group(BASE, noisy) + _group(CAND, calm)
    check = launch_check(ms, "output_throughput", margin=0.05)
    assert {s.arm for s in check.unstable} == {BASE}
    assert all(s.against == "other_launches" for s in check.unstable)


def test_one_launch_each_or_no_second_configuration_is_said_untested() -> None:
    one = _group(BASE, [{x: 100.0 * x for x in XS}]) + _group(CAND, [{x: 90.0 * x for x in XS}])
    assert launch_check(one, "output_throughput", margin=0.05).untested_reason == "one_launch"
    two = _group(BASE, [{x: 100.0 * x for x in XS}]) + _group(
        CAND, [{x: 90.0 * x for x in XS}, {x: 95.0 * x for x in XS}]
    )
    check = analyse(two, settings()).launch_check
    assert check is not None and check.untested_reason == "no_repeats"
    assert untested(check)[0].startswith("**Launch stability not tested:**")


def test_the_real_h200_cuda_graph_run_names_the_baselines_launches() -> None:
    rd = _run_dir(ROOT / "reports/runs/h200_transformers_cuda_graph")
    check = launch_check(rd.measurements(), "output_throughput", margin=0.05)
    arms = {s.arm for s in check.unstable}
    assert arms == {"cb"}
    at_one = next(s for s in check.unstable if s.x == 1.0)
    assert [round(v.value, 1) for v in at_one.launches] == [50.2, 54.8, 40.5]
    assert CAND not in arms


def test_one_odd_configuration_does_not_set_the_launch_noise_of_every_cell() -> None:
    """Three arms on three launches each; the second candidate's launches are ±30% apart,
    the others' within 1%. Its group is judged with its own launch variance, and the first
    candidate's cells with the baseline's and its own, not the odd one's."""
    calm = [1.0, 1.01, 0.99]
    wild = [1.0, 1.35, 0.7]
    ms = (
        _group(BASE, [{x: 100.0 * x * f for x in XS} for f in calm])
        + _group(CAND, [{x: 120.0 * x * f for x in XS} for f in [1.005, 0.995, 1.0]])
        + _group("wild", [{x: 120.0 * x * f for x in XS} for f in wild])
    )
    sigma = estimate_sigma(ms, "output_throughput")
    [odd] = sigma.odd_groups
    assert odd.arm == "wild" and odd.launch > 0.2
    assert odd.group == "/wild"  # verdict.json names it slice/group (here the one, unnamed slice)
    assert sigma.launch is not None and sigma.launch < 0.02
    calm_cell = cell_variance(sigma, 1.0, [f"{BASE}#1"], [f"{CAND}#1"])
    wild_cell = cell_variance(sigma, 1.0, [f"{BASE}#1"], ["wild#1"])
    assert calm_cell is not None and wild_cell is not None
    assert calm_cell.launch < 0.02**2 * 2 < wild_cell.launch
    v = analyse(ms, settings())
    calm_verdicts = {c.x: c.verdict.value for s, cand, c in v.comparisons() if cand == CAND}
    assert set(calm_verdicts.values()) == {"better"}
