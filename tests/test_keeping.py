"""A rehearsal that cannot keep its model claims nothing from it (issue 44): a simulated
measurement whose engine fell behind by more than `SIM_LATE_LIMIT` of its cell carries no
value, the runner measures it again on a slower relaunch, and a rehearsal that still could not
keep up says so in its first line. Lateness is injected (extra.sim_engine_lateness_ms): no test
here depends on how loaded the host is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_report import SPEC_TEXT, measurement, plan_of, write_run
from test_runner_unit import ONE_RUN, FakeEngine, run

from matrixrun.analysis import analyse, value_of
from matrixrun.core.keeping import carries, fell_behind, kept_model, sim_late_share
from matrixrun.core.measurement import Measurement
from matrixrun.core.timescale import TimeScale
from matrixrun.core.tuning import SIM_LATE_LIMIT, SIM_MAX_SLOWDOWNS
from matrixrun.engines.base import SlowsDown
from matrixrun.engines.sim import rehearsal_engine
from matrixrun.report import render_run_dir
from matrixrun.report.sections.simulation import behind, could_not_keep_up
from matrixrun.rundir.settings import run_settings
from matrixrun.spec import parse_spec

SCALE = 50.0


def late(m: Measurement, share: float) -> Measurement:
    """`m` with its simulator's engine behind its model by `share` of the cell's duration."""
    assert m.metrics is not None
    worst_ms = share * m.metrics.duration * 1000.0 / m.time_scale
    extra = {**m.extra, "sim_engine_lateness_ms": {"mean_ms": 0.1, "max_ms": worst_ms}}
    return m.model_copy(update={"extra": extra})


def matrix(shares: dict[tuple[str, int], float]) -> list[Measurement]:
    """The glm5 spec's cells, simulated at ×50, with the write-up's numbers: every cell keeps
    up except those in `shares` ((arm, concurrency) → how far behind)."""
    from test_report import BASE, BASELINE, CAND, CANDIDATE

    plan = plan_of(SPEC_TEXT)
    values = {BASE: BASELINE, CAND: CANDIDATE}
    out = []
    for g in plan.groups:
        for cell, v in zip(g.cells, values[g.arm], strict=True):
            m = measurement(cell, g.group_id, v, simulated=True, time_scale=SCALE)
            out.append(late(m, shares.get((g.arm, int(cell.x)), 0.001)))
    return out


def test_the_share_is_the_worst_lateness_over_the_modelled_duration() -> None:
    m = matrix({})[0]
    assert sim_late_share(late(m, 0.2)) == pytest.approx(0.2)
    assert kept_model(late(m, SIM_LATE_LIMIT * 0.9))
    assert not kept_model(late(m, SIM_LATE_LIMIT * 1.1))
    real = m.model_copy(update={"extra": {}, "simulated": False})
    assert sim_late_share(real) is None and kept_model(real)  # a real engine: the self-check's


def test_a_measurement_beyond_the_limit_carries_no_value() -> None:
    m = matrix({})[0]
    assert value_of(late(m, 0.02), "output_throughput") is not None
    assert value_of(late(m, 0.5), "output_throughput") is None
    assert value_of(late(m, 0.5), "mean_tpot_ms") is None
    tput = "output_throughput"
    assert fell_behind(late(m, 0.5), tput) and not fell_behind(late(m, 0.02), tput)


def test_a_metric_the_client_flagged_carries_no_value_on_real_engines_too() -> None:
    """The same rule for the load client: its self-check's flagged metric is no number of
    that measurement; its other metrics still are."""
    real = matrix({})[0].model_copy(update={"simulated": False, "extra": {}})
    check = {"client_bound": True, "affected": {"output_throughput": 0.14}}
    flagged = real.model_copy(update={"extra": {"client_check": check}})
    assert carries(real, "output_throughput") and not carries(flagged, "output_throughput")
    assert value_of(flagged, "output_throughput") is None
    assert value_of(flagged, "mean_tpot_ms") is not None
    assert fell_behind(flagged, "output_throughput")


def test_no_verdict_rests_on_a_late_measurement() -> None:
    """The write-up's −50% at 1024, with the candidate's run there 50% behind its model: the
    cell has no candidate value, so it is not decided (and never 'worse' from that run)."""
    from test_report import CAND

    spec = parse_spec(SPEC_TEXT)
    settings = run_settings(spec, plan_of(SPEC_TEXT)).analysis
    kept = analyse(matrix({}), settings)
    lost = analyse(matrix({(CAND, 1024): 0.5}), settings)

    def cell(v: Any, x: float) -> Any:
        series = v.slices[0].candidates[0].metrics[0].series
        return next(c for s in series for c in s.cells if c.x == x)

    assert cell(kept, 1024).candidate.n == 1 and cell(kept, 1024).change < -0.4
    assert cell(lost, 1024).candidate.n == 0 and cell(lost, 1024).change is None
    assert cell(lost, 1024).verdict.value in ("inconclusive", "undecided")  # named either way
    assert cell(lost, 256).candidate.n == 1  # the cells that kept up are read as before


def test_a_late_rehearsal_opens_by_saying_it_could_not_keep_up(tmp_path: Path) -> None:
    from test_report import CAND

    rd = write_run(tmp_path / "late", SPEC_TEXT, matrix({(CAND, 1024): 0.5}))
    text = render_run_dir(rd)
    first = text.splitlines()[0]
    assert first.startswith("# SIMULATED (COULD NOT KEEP UP) — ")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert "could not keep up" in lines[1] and "1 of 10 measurements fell behind" in lines[1]
    assert "the simulator in 1" in lines[1] and "up to 50.0%" in lines[1]
    assert "1 cell(s) have none" in lines[1]


def test_a_rehearsal_that_kept_up_in_the_end_claims_nothing_first(tmp_path: Path) -> None:
    """A late measurement measured again in time (at half the speed): the first line is the
    usual one, and the banner at the end says what happened."""
    from test_report import CAND

    ms = matrix({})
    i, again = next((i, m) for i, m in enumerate(ms) if m.arm == CAND and m.point_id)
    slow = again.model_copy(update={"attempt": 2, "time_scale": SCALE / 2})
    ms[i] = late(ms[i], 0.3)
    rd = write_run(tmp_path / "kept", SPEC_TEXT, [*ms, late(slow, 0.001)])
    text = render_run_dir(rd)
    assert text.splitlines()[0].startswith("# SIMULATED — ")
    assert "COULD NOT KEEP UP" not in text and "could not keep up" not in text
    assert "slowed to 25× and measured them again" in text


class SlowingEngine(FakeEngine):
    """A fake engine that can slow down, and whose first `late` cells report its engine far
    behind its model (injected: the fake server itself keeps up)."""

    def __init__(self, late: int) -> None:
        super().__init__(time_scale=8.0)
        self.late = late
        self.slowed_to: list[float] = []

    def slow_down(self) -> TimeScale:
        self.time_scale = TimeScale(self.time_scale.factor / 2)
        self.slowed_to.append(self.time_scale.factor)
        return self.time_scale

    def cell_extras(self, base_url: str, info: dict[str, Any]) -> dict[str, Any]:
        extra = super().cell_extras(base_url, info)
        behind = self.late > 0
        self.late -= 1
        extra["sim_engine_lateness_ms"] = {"max_ms": 1e6 if behind else 0.0}
        # the client's own self-check is injected too: this test must not depend on host load
        extra["client_check"] = {"client_bound": False, "affected": {}}
        return extra


def test_the_runner_measures_a_late_cell_again_on_a_slower_relaunch(tmp_path: Path) -> None:
    engine = SlowingEngine(late=1)
    assert isinstance(engine, SlowsDown)
    runner, rd = run(tmp_path, engine, ONE_RUN)
    ms = rd.measurements()
    first = ms[0]
    assert not kept_model(first) and first.time_scale == 8.0
    again = [m for m in ms if m.cell_id == first.cell_id]
    assert [m.attempt for m in again] == [1, 2] and again[1].time_scale == 4.0
    assert again[1].instance != first.instance  # a fresh launch at the new speed
    assert engine.slowed_to == [4.0] and all(m.time_scale == 4.0 for m in ms[1:])
    slowed = [e for e in rd.events() if e["event"] == "slowed"]
    assert len(slowed) == 1 and slowed[0]["cell"] == first.cell_id
    assert slowed[0]["time_scale"] == 8.0 and slowed[0]["new_time_scale"] == 4.0
    assert len(ms) == len(list(runner.plan.cells())) + 1


def test_the_runner_slows_down_at_most_so_often(tmp_path: Path) -> None:
    engine = SlowingEngine(late=100)  # the host never lets it keep up
    runner, rd = run(tmp_path, engine, ONE_RUN)
    assert len(engine.slowed_to) == SIM_MAX_SLOWDOWNS
    assert len(rd.measurements()) == len(list(runner.plan.cells())) + SIM_MAX_SLOWDOWNS
    # the fake server is not labelled simulated, so ask the report's derivation directly
    ms = [m.model_copy(update={"simulated": True}) for m in rd.measurements()]
    gone = behind(ms, 8.0, "output_throughput")
    assert gone is not None and gone.lost == len(list(runner.plan.cells()))
    assert gone.slowest == 8.0 / 2**SIM_MAX_SLOWDOWNS


def test_the_simulator_engine_halves_its_time_scale_and_its_argument() -> None:
    spec = parse_spec(SPEC_TEXT)
    engine = rehearsal_engine(spec, "seed")
    assert engine.slow_down().factor == 25.0 and engine.time_scale.factor == 25.0
    at = engine.extra_args.index("--time-scale")
    assert float(engine.extra_args[at + 1]) == 25.0


def test_the_first_line_says_who_fell_behind() -> None:
    """The simulator (with how far), the load client (with the metric it flagged), or both."""
    from test_report import CAND

    ms = matrix({(CAND, 1024): 0.2})
    check = {"client_bound": True, "affected": {"output_throughput": 0.2}}
    i = next(i for i, m in enumerate(ms) if m.arm == CAND and m.point["concurrency"] == 256)
    ms[i] = ms[i].model_copy(update={"extra": {**ms[i].extra, "client_check": check}})
    gone = behind(ms, SCALE, "output_throughput")
    assert gone is not None and (gone.late, gone.client, gone.lost) == (2, 1, 2)
    line = could_not_keep_up(gone)
    assert "the simulator in 1, by more than 3% of the cell's duration, up to 20.0%" in line
    assert "the load client in 1: its self-check flagged `output_throughput`" in line
    assert ", at 50×." in line and "2 cell(s) have none" in line
