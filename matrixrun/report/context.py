"""The verdict document's data: a run directory in, a typed `Context` for
`templates/verdict.md.j2` out.

`inputs.read_inputs` reads the run directory once; `context_from` asks each section
(`report/sections/`) for its part and puts the parts side by side, the top-level names the
templates see. Nothing here derives or words anything: a section's numbers and sentences are
its module's, so changing one section touches that module and its partial.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matrixrun.report import fmt
from matrixrun.report.chart_png import CHART_FILE
from matrixrun.report.given import given_of
from matrixrun.report.inputs import RunInputs, read_inputs
from matrixrun.report.markdown_check import COMMENT_LIMIT
from matrixrun.report.sections import (
    cache,
    charts,
    checks,
    comparison,
    correctness,
    environment,
    failures,
    headline,
    latency,
    launches,
    noise,
    reproduce,
    reruns,
    setup,
    simulation,
    slo,
    why,
)
from matrixrun.report.sections.cache import CacheView
from matrixrun.report.sections.charts import Chart
from matrixrun.report.sections.comparison import MetricHeading, SliceTables
from matrixrun.report.sections.environment import Environment
from matrixrun.report.sections.failures import Failures
from matrixrun.report.sections.headline import DecisionBlock
from matrixrun.report.sections.latency import Latency, LatencySummary
from matrixrun.report.sections.noise import NoiseSection
from matrixrun.report.sections.reproduce import Reproduce
from matrixrun.report.sections.reruns import RerunEntry
from matrixrun.report.sections.setup import ArgWarning, ArmDiff, Setup
from matrixrun.report.sections.simulation import Simulation
from matrixrun.report.sections.slo import SloView
from matrixrun.rundir.results import RunDir


@dataclass
class Context:
    """What the templates render: plain data, every string pre-formatted, grouped by the
    section that made it. The size budget in `report.render` trims a copy of it (never the
    data) and lists what it dropped in `omitted`."""

    # the first screen (`headline`, with `launches`, `checks`, `why`)
    title: str
    run_dir: str
    simulated: bool
    simulation: Simulation | None
    ingested: bool
    ingest_caveats: list[str]
    decision: DecisionBlock
    unstable: list[str]
    checks: str
    why: list[str]
    # the charts and the main table (`charts`, `comparison`)
    charts: list[Chart]
    chart_png: str | None
    baseline: str
    several_candidates: bool
    axis: str
    #: the primary metric's margin (the charts and the table judge it); `margins`: every metric's
    margin: str
    margins: str
    primary: MetricHeading
    comparison: list[SliceTables]
    folded: list[str]
    unmatched: list[str]
    slo: SloView | None
    cache: CacheView | None
    # the rest (`latency`, `failures`, `setup`, `reruns`, `noise`, `correctness`,
    # `environment`, `reproduce`)
    secondary: list[str]
    latency: list[Latency]
    failures: Failures
    setup: Setup
    arm_diff: ArmDiff
    arg_warnings: list[ArgWarning]
    compared: str | None
    simulated_hardware: bool
    reruns: list[RerunEntry]
    rerun_checks: list[RerunEntry]
    rerun_routine: str | None
    no_reruns: str | None
    sigma: NoiseSection
    correctness: list[list[str]]
    environment: Environment
    reproduce: Reproduce
    # the size budget's (`omitted.md.j2`)
    latency_summary: list[LatencySummary] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    limit: int = COMMENT_LIMIT

    def template_vars(self) -> dict[str, Any]:
        """The top-level names a template sees (nested sections stay objects)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def context_from(inputs: RunInputs) -> Context:
    """The template context of one run: each section's part, in the document's order."""
    verdict, s = inputs.verdict, inputs.verdict.settings
    simulated = simulation.of(inputs.measurements, inputs.settings, inputs.env)
    given = given_of(inputs)
    labels = comparison.slice_labels_of(inputs.plan, verdict, given)
    added = comparison.added_points(inputs.plan, inputs.measurements)
    the_setup, arm_diff = setup.of(inputs, given)
    every_rerun, rerun_checks, rerun_routine, no_reruns = reruns.of(inputs)
    return Context(
        title=headline.title_of(inputs),
        run_dir=inputs.run_dir,
        simulated=simulated is not None,
        simulation=simulated,
        ingested=inputs.settings.spec is None,
        ingest_caveats=headline.caveats_of(inputs),
        decision=headline.of(inputs),
        unstable=launches.of(verdict),
        checks=checks.of(verdict, inputs.settings, simulated is not None),
        why=why.of(verdict),
        charts=charts.charts_of(verdict),
        chart_png=(
            charts.picture_line(inputs.run_dir, CHART_FILE, inputs.link_base)
            if inputs.chart_png
            else None
        ),
        baseline=s.baseline,
        several_candidates=len(verdict.overall) > 1,
        axis=s.axis,
        margin=fmt.margin(s.margin_for(s.primary)),
        margins=fmt.margins(s.margin, s.margins, s.metrics),
        primary=MetricHeading.of(s.primary),
        comparison=comparison.of(verdict, labels, added),
        folded=comparison.folded_lines(verdict),
        unmatched=comparison.unmatched_of(inputs, added),
        slo=slo.of(verdict, inputs.settings),
        cache=cache.of(inputs.measurements, s.axis),
        secondary=latency.secondary_lines(verdict),
        latency=latency.of(verdict, labels, added),
        failures=failures.of(inputs),
        setup=the_setup,
        arm_diff=arm_diff,
        arg_warnings=setup.warnings_of(inputs),
        compared=setup.compared_of(inputs),
        simulated_hardware=simulated is not None,
        reruns=every_rerun,
        rerun_checks=rerun_checks,
        rerun_routine=rerun_routine,
        no_reruns=no_reruns,
        sigma=noise.of(verdict),
        correctness=correctness.of(verdict),
        environment=environment.of(inputs.env, inputs.settings),
        reproduce=reproduce.of(inputs, simulated is not None),
    )


def build_context(rd: RunDir, report_at: Path | None = None) -> Context:
    """The template context of a run directory (what `report.render_run_dir` renders), its
    links relative to `report_at` (default RUN_DIR/report.md)."""
    return context_from(read_inputs(rd, report_at))
