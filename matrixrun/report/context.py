"""The verdict document's data: a run directory in, a typed `Context` for
`templates/verdict.md.j2` out.

`inputs.read_inputs` reads the run directory once; `context_from` has each section built
through the section interface (`report.section`: `build(inputs) -> part`) put its part under
its name, and asks the six sections not yet moved to it (headline, charts, comparison,
latency, setup, reruns) for their fields; together they are the top-level names the
templates see. Nothing here derives or words anything: a section's numbers and sentences are
its module's, so changing one section touches that module and its partial.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matrixrun.report import fmt
from matrixrun.report.given import given_of
from matrixrun.report.inputs import CHART_FILE, RunInputs, read_inputs
from matrixrun.report.markdown_check import COMMENT_LIMIT
from matrixrun.report.section import Section, parts_of, placed, sections
from matrixrun.report.sections import (
    charts,
    comparison,
    headline,
    latency,
    reruns,
    setup,
    simulation,
)
from matrixrun.report.sections.charts import Chart
from matrixrun.report.sections.comparison import MetricHeading, SliceTables
from matrixrun.report.sections.headline import DecisionBlock
from matrixrun.report.sections.latency import Latency, LatencySummary
from matrixrun.report.sections.reruns import RerunEntry
from matrixrun.report.sections.setup import ArgWarning, ArmDiff, Setup
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
    ingested: bool
    ingest_caveats: list[str]
    decision: DecisionBlock
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
    # the rest (`latency`, `failures`, `setup`, `reruns`, `noise`, `correctness`,
    # `environment`, `reproduce`)
    secondary: list[str]
    latency: list[Latency]
    setup: Setup
    arm_diff: ArmDiff
    arg_warnings: list[ArgWarning]
    compared: str | None
    simulated_hardware: bool
    reruns: list[RerunEntry]
    rerun_checks: list[RerunEntry]
    rerun_routine: str | None
    no_reruns: str | None
    #: the sections built through the section interface (`report.section`), by name: each
    #: partial sees its part as `<name>`; `sections`: the partials the top template includes
    parts: dict[str, Any] = field(default_factory=dict)
    sections: list[str] = field(default_factory=list)
    # the size budget's (`omitted.md.j2`)
    latency_summary: list[LatencySummary] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    limit: int = COMMENT_LIMIT

    def template_vars(self) -> dict[str, Any]:
        """The top-level names a template sees (nested sections stay objects): the context's
        fields, and each built section's part under its name."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        clash = fields.keys() & self.parts.keys()
        if clash:
            raise ValueError(f"report sections named like the context's fields: {sorted(clash)}")
        return {**fields, **self.parts}


def context_from(inputs: RunInputs, every: list[Section] | None = None) -> Context:
    """The template context of one run: each section's part. The sections built through the
    interface (`every`, default all of `report.sections`) go into `parts`; the rest are still
    asked here, one field each."""
    every = sections() if every is None else every
    verdict, s = inputs.verdict, inputs.verdict.settings
    simulated = simulation.of(inputs.measurements, inputs.settings, inputs.env)
    given = given_of(inputs)
    labels = comparison.slice_labels_of(inputs.plan, verdict, given)
    added = comparison.added_points(inputs.plan, inputs.measurements, inputs.events)
    the_setup, arm_diff = setup.of(inputs, given)
    every_rerun, rerun_checks, rerun_routine, no_reruns = reruns.of(inputs)
    return Context(
        title=headline.title_of(inputs),
        run_dir=inputs.run_dir,
        simulated=simulated is not None,
        ingested=inputs.settings.spec is None,
        ingest_caveats=headline.caveats_of(inputs),
        decision=headline.of(inputs),
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
        secondary=latency.secondary_lines(verdict),
        latency=latency.of(verdict, labels, added),
        setup=the_setup,
        arm_diff=arm_diff,
        arg_warnings=setup.warnings_of(inputs),
        compared=setup.compared_of(inputs),
        simulated_hardware=simulated is not None,
        reruns=every_rerun,
        rerun_checks=rerun_checks,
        rerun_routine=rerun_routine,
        no_reruns=no_reruns,
        parts=parts_of(inputs, every),
        sections=placed(every),
    )


def build_context(rd: RunDir, report_at: Path | None = None) -> Context:
    """The template context of a run directory (what `report.render_run_dir` renders), its
    links relative to `report_at` (default RUN_DIR/report.md)."""
    return context_from(read_inputs(rd, report_at))
