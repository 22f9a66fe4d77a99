"""The verdict document's data: a run directory in, a typed `Context` for
`templates/verdict.md.j2` out.

`read_inputs` is the only function here that touches files. It reads what the earlier stages
wrote — verdict.json, settings.json, plan.json, env.json, events.jsonl, results.jsonl (the
failure list and the simulator's timing), ingest.json — and never the spec: a report renders
from a run directory whose spec copy is gone. `context_from` and everything it calls are pure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import higher_is_better, unit
from matrixrun.core.verdict import VERDICT_SCHEMA, Verdict, check_schema_version
from matrixrun.plan import Plan
from matrixrun.report import (
    charts,
    decision,
    fmt,
    run_sections,
    sections,
    summary,
    tables,
    wording,
)
from matrixrun.report.chart_png import CHART_FILE
from matrixrun.report.markdown_check import COMMENT_LIMIT
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import RunSettings, read_settings


@dataclass(frozen=True)
class RunInputs:
    """Everything the document is made from, read once from the run directory."""

    run_dir: str
    verdict: Verdict
    settings: RunSettings
    measurements: list[Measurement] = field(default_factory=list)
    plan: Plan | None = None
    env: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    ingest: dict[str, Any] | None = None
    #: What a Slurm run's jobs.json says a reader must know (one sentence each).
    job_limits: list[str] = field(default_factory=list)
    #: RUN_DIR/chart.png exists (written beside the report when matplotlib is installed).
    chart_png: bool = False


@dataclass
class Reproduce:
    commands: list[str]
    spec_copy: str | None
    spec_sha: str | None
    files: list[str]
    #: what a rehearsal's seed makes reproducible, in words (None for a real run)
    seed_text: str | None = None


@dataclass
class PrimaryMetric:
    metric: str
    unit: str
    better: str


@dataclass
class LatencySummary:
    """A latency metric's verdict, kept when the size budget dropped its tables."""

    metric: str
    slice: str
    candidate: str
    sentence: str


@dataclass
class Latency:
    metric: str
    unit: str
    better: str
    slices: list[tables.SliceTables]


@dataclass
class Context:
    """What the templates render: plain data, every string pre-formatted. The size budget in
    `report.render` trims a copy of it (never the data) and lists what it dropped in
    `omitted`."""

    title: str
    run_dir: str
    simulated: bool
    simulation: run_sections.Simulation | None
    provisional: bool
    headline: list[tables.Headline]
    ingested: bool
    #: What the ingested files limit (arms allowed to differ, speculative decoding, points
    #: only some arms ran): said before the verdict.
    ingest_caveats: list[str]
    hypothesis: str | None
    setup: sections.Setup
    arm_diff: sections.ArmDiff
    arg_warnings: list[sections.ArgWarning]
    baseline: str
    candidates: list[str]
    several_candidates: bool
    axis: str
    margin: str
    primary: PrimaryMetric
    comparison: list[tables.SliceTables]
    latency: list[Latency]
    sigma: tables.NoiseSection
    reruns: list[run_sections.RerunEntry]
    no_reruns: str | None
    failures: run_sections.Failures
    correctness: list[list[str]]
    environment: run_sections.Environment
    reproduce: Reproduce
    decision: summary.DecisionBlock
    charts: list[charts.Chart]
    folded: list[str]
    secondary: list[str]
    slo: summary.SloView | None
    rerun_checks: list[run_sections.RerunEntry]
    rerun_routine: str | None
    simulated_hardware: bool = False
    compared: str | None = None
    latency_summary: list[LatencySummary] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    limit: int = COMMENT_LIMIT
    #: The line under the charts that links chart.png, where it exists.
    chart_png: str | None = None
    #: bisection midpoints with an arm never measured: said under the main table (no row)
    unmatched: list[str] = field(default_factory=list)

    def template_vars(self) -> dict[str, Any]:
        """The top-level names a template sees (nested sections stay objects)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _optional_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def display_path(path: Path) -> str:
    """The run directory as a reader can use it: relative to the working directory when it
    lies under it (`reports/runs/x` in this repository), else from `runs/` on when it lies
    under one (so a report does not leak /home/...), else as given."""
    with contextlib.suppress(ValueError, OSError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    parts = path.parts
    if "runs" in parts:
        index = len(parts) - 1 - parts[::-1].index("runs")
        return str(Path(*parts[index:]))
    return str(path)


def read_inputs(rd: RunDir) -> RunInputs:
    """Read a run directory (spec-driven or ingested). Missing optional files are empty."""
    settings = read_settings(rd)
    if not (rd.path / "verdict.json").exists():
        raise InputError(
            f"{rd.path} has no verdict.json; write it with `matrixrun analyse {rd.path}`"
        )
    data = rd.read_json("verdict.json")
    check_schema_version(
        data, VERDICT_SCHEMA, rd.path / "verdict.json", f"matrixrun analyse {rd.path}"
    )
    try:
        verdict = Verdict.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"{rd.path / 'verdict.json'} is not the verdict of this matrixrun version "
            f"({exc.error_count()} problem(s)); rewrite it with `matrixrun analyse {rd.path}`"
        ) from exc
    plan_file = rd.path / "plan.json"
    env = _optional_json(rd.path / "env.json")
    ingest = _optional_json(rd.path / "ingest.json")
    return RunInputs(
        run_dir=display_path(rd.path),
        verdict=verdict,
        settings=settings,
        measurements=rd.measurements() if rd.results_file.exists() else [],
        plan=Plan.model_validate(rd.read_json("plan.json")) if plan_file.exists() else None,
        env=env if isinstance(env, dict) else {},
        events=rd.events(),
        job_limits=run_sections.jobs_limits(rd.path, settings.analysis.baseline),
        ingest=ingest if isinstance(ingest, dict) else None,
        chart_png=(rd.path / CHART_FILE).exists(),
    )


def spec_stem(run_dir: str) -> str | None:
    """The spec file's stem from the runs/<stem>/<id> layout the runner uses (wherever that
    `runs/` lies), else None (never guessed from the experiment name)."""
    parts = Path(run_dir).parts
    if "runs" in parts:
        index = len(parts) - 1 - parts[::-1].index("runs")
        if len(parts) - index == 3:
            return parts[index + 1].removesuffix(".rehearsal")
    return None  # unknown: the caller points at the run directory's own copy instead


def spec_path_of(inputs: RunInputs) -> str:
    """The spec a command should name: the path `run` was given (settings.json), else the run
    directory's own copy — never a guess from the directory's name (a spec in `myspec/` is
    not `spec/x.yaml`)."""
    facts = inputs.settings.spec
    if facts is not None and facts.spec_path:
        return facts.spec_path
    return f"{inputs.run_dir}/spec.yaml"


def reproduce_of(inputs: RunInputs, simulated: bool) -> Reproduce:
    commands = []
    facts = inputs.settings.spec
    if facts is not None:
        spec_path = spec_path_of(inputs)
        commands.append(f"nox -s matrix -- {spec_path}" + (" --rehearse" if simulated else ""))
    elif inputs.ingest and inputs.ingest.get("command"):
        commands.append(str(inputs.ingest["command"]))
    commands.append(f"matrixrun report {inputs.run_dir}")
    seed = facts.rehearsal.seed if facts is not None and facts.rehearsal is not None else None
    return Reproduce(
        commands=commands,
        seed_text=wording.reproduce_seed(seed) if seed is not None else None,
        spec_copy=f"{inputs.run_dir}/spec.yaml" if facts is not None else None,
        spec_sha=facts.spec_sha256 if facts is not None else None,
        files=list(inputs.ingest.get("files", [])) if inputs.ingest else [],
    )


def _latency(
    verdict: Verdict, labels: dict[str, str], added: frozenset[tuple[str, str]] = frozenset()
) -> list[Latency]:
    out = []
    folded = decision.folded_metrics(verdict)
    for metric in verdict.settings.metrics[1:]:
        if metric in folded:  # said in one line instead (`summary.folded_lines`)
            continue
        found = tables.metric_tables(verdict, metric, labels, added)
        if found:
            out.append(
                Latency(
                    metric=metric,
                    unit=unit(metric),
                    better="higher" if higher_is_better(metric) else "lower",
                    slices=tables.group_tables(found, verdict, labels),
                )
            )
    return out


def _given(inputs: RunInputs) -> dict[str, dict[str, str]]:
    if inputs.plan is None:
        return {}
    servers = inputs.env.get("servers") or {}
    return sections.given_by_group(inputs.plan, sections.argv_by_group(inputs.events, servers))


def _setup(
    inputs: RunInputs, arms: list[str], given: dict[str, dict[str, str]]
) -> tuple[str, sections.Setup, sections.ArmDiff]:
    """(title, setup, arm differences): from settings and plan, or for an ingested run from
    what its files record."""
    verdict, ms = inputs.verdict, inputs.measurements
    settings = verdict.settings
    servers = inputs.env.get("servers") or {}
    if inputs.settings.spec is not None and inputs.plan is not None:
        setup = sections.setup_of(inputs.settings, inputs.plan, ms, given)
        setup.workload.append(("prefix cache", wording.cache_flushes(inputs.events)))
        assert setup.arm_diff is not None
        return inputs.plan.title, setup, setup.arm_diff
    setup = sections.ingested_setup(ms, settings, inputs.ingest)
    diffs = sections.effective_arg_differences(servers, arms)
    rows = [sections.DiffRow(f"`{d.key}`", d.values) for d in diffs if d.arms == arms]
    arm_diff = sections.arm_diff(arms, rows, "", settings.baseline)
    title = wording.ingested_title(arms[1:], settings.baseline)
    pair = _compared(inputs)
    if pair is not None:
        title = wording.compare_title(pair[0], pair[1])
    return title, setup, arm_diff


def _compared(inputs: RunInputs) -> tuple[str, str, list[str]] | None:
    """(label A, label B, arms) of a `matrixrun compare` directory, else None."""
    info = (inputs.ingest or {}).get("compare")
    if not isinstance(info, dict):
        return None
    return str(info.get("a")), str(info.get("b")), [str(x) for x in info.get("arms", [])]


def _settle(inputs: RunInputs) -> str | None:
    """The command that would settle what is undecided (rerun the spec, or re-ingest)."""
    needed = [
        c.runs_needed for _, _, c in inputs.verdict.comparisons() if c.runs_needed is not None
    ]
    return summary.settle_command(
        inputs.settings, inputs.run_dir, spec_path_of(inputs), inputs.ingest, needed
    )


def _resume(inputs: RunInputs) -> str | None:
    """The command that continues a run that stopped before its end (None: it ended)."""
    if not run_sections.unfinished(inputs.events):
        return None
    rehearse = " --rehearse" if inputs.settings.rehearsal else ""
    slurm = " --executor slurm" if Path(inputs.run_dir, "jobs.json").exists() else ""
    return f"matrixrun run {inputs.run_dir}/spec.yaml{rehearse}{slurm} --resume {inputs.run_dir}"


def context_from(inputs: RunInputs) -> Context:
    """The template context of one run."""
    verdict, ms = inputs.verdict, inputs.measurements
    settings = verdict.settings
    facts = inputs.settings.spec
    simulation = run_sections.simulation_of(ms, inputs.settings, inputs.env)
    given = _given(inputs)
    labels = tables.slice_labels_of(inputs.plan, verdict, given)
    added = tables.added_points(inputs.plan, ms)
    primary_tables = tables.metric_tables(verdict, settings.primary, labels, added)
    if len(verdict.slices) == 1:  # the headline already says it
        for t in primary_tables:
            t.overall = ""
    candidates = list(verdict.overall)
    arms = [settings.baseline, *candidates]
    title, setup, arm_diff = _setup(inputs, arms, given)
    servers = inputs.env.get("servers") or {}
    arg_warnings = (
        sections.effective_arg_differences(servers, arms, facts.asked) if facts is not None else []
    )
    reruns = run_sections.rerun_entries(verdict, inputs.events)
    heads = tables.headline(verdict)
    reproduce = reproduce_of(inputs, simulation is not None)
    settle = None if _compared(inputs) else _settle(inputs)
    tested = [i for i, r in enumerate(verdict.reruns) if r.outcome is not None]
    routine = [r for r in verdict.reruns if r.outcome is None]
    return Context(
        title=fmt.user_heading(title),
        decision=summary.decision_of(
            verdict,
            inputs.settings,
            simulated=simulation is not None,
            settle_command=settle,
            resume_command=_resume(inputs),
        ),
        charts=charts.charts_of(verdict),
        chart_png=charts.picture_line(inputs.run_dir, CHART_FILE) if inputs.chart_png else None,
        folded=summary.folded_lines(verdict),
        unmatched=[
            wording.half_measured(h.x, settings.axis, h.measured, h.missing)
            for h in tables.half_measured(inputs.plan, ms, added, settings.baseline)
        ],
        secondary=summary.secondary_lines(verdict),
        slo=summary.slo_of(verdict, inputs.settings),
        rerun_checks=[reruns[i] for i in tested if i < len(reruns)],
        rerun_routine=wording.decision.rerun_summary(routine) if routine else None,
        simulated_hardware=simulation is not None,
        compared=(
            wording.compared(*pair, dirs=[str(f) for f in (inputs.ingest or {}).get("files", [])])
            if (pair := _compared(inputs))
            else None
        ),
        run_dir=inputs.run_dir,
        simulated=simulation is not None,
        simulation=simulation,
        provisional=any(h.provisional for h in heads),
        headline=heads,
        ingested=facts is None,
        ingest_caveats=[
            wording.ingest_caveat(c)
            for c in (inputs.ingest or {}).get("caveats", [])
            if isinstance(c, dict)
        ],
        hypothesis=facts.hypothesis if facts is not None else None,
        setup=setup,
        arm_diff=arm_diff,
        arg_warnings=arg_warnings,
        baseline=settings.baseline,
        candidates=candidates,
        several_candidates=len(candidates) > 1,
        axis=settings.axis,
        margin=f"±{fmt.setting_percent(settings.margin)}",
        primary=PrimaryMetric(
            metric=settings.primary,
            unit=unit(settings.primary),
            better="higher" if higher_is_better(settings.primary) else "lower",
        ),
        comparison=tables.group_tables(primary_tables, verdict, labels),
        latency=_latency(verdict, labels, added),
        sigma=tables.sigma_of(verdict),
        reruns=reruns,
        no_reruns=None
        if reruns
        else wording.no_reruns(verdict, facts.max_runs if facts else None, facts is None),
        failures=run_sections.failures_of(ms, settings.axis, inputs.job_limits),
        correctness=run_sections.correctness_of(verdict),
        environment=run_sections.environment_of(inputs.env, inputs.settings),
        reproduce=reproduce,
    )


def build_context(rd: RunDir) -> Context:
    """The template context of a run directory (what `report.render_run_dir` renders)."""
    return context_from(read_inputs(rd))
