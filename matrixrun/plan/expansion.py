"""Expand a Spec into a Plan: server groups (one launch per distinct server config and arm)
holding their cells, with stable ids and a cost estimate. Pure: no files, clocks or processes.

A *point* is one combination of every axis except the arm (model, hardware, server axes, client
axes); a *cell* is one arm at one point — the unit that gets measured. Cell ids hash everything
that defines the measurement (model, hardware, the server's full flags, launch command, the
workload), so a changed spec never resumes onto stale data, and an unchanged one always does.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from matrixrun.spec import CLIENT_AXES, FlagValue, HardwareSpec, ModelSpec, Spec
from matrixrun.spec.points import combinations

#: Why the verify policy added a cell off the grid: the midpoint of a crossover bracket, or of
#: one arm's capacity bracket (`verify.bisect`, `verify.capacity`).
AddedBy = Literal["bisection", "capacity"]


class Cell(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cell_id: str
    point_id: str
    arm: str
    slice: str
    point: dict[str, Any] = Field(description="Client-side axis values of this cell.")
    x: Any = Field(description="Value of the main axis (the table's row).")
    num_prompts: int
    added_by: AddedBy | None = Field(
        None,
        description="Not in the spec's grid: added during the run by the verify policy "
        "(bisection: the geometric midpoint of a crossover bracket; capacity: of an arm's "
        "capacity bracket under the SLO). None for grid cells.",
    )


class ServerGroup(BaseModel):
    """Everything one server launch needs, and the cells it serves."""

    model_config = ConfigDict(extra="forbid")

    group_id: str
    arm: str
    slice: str
    model: ModelSpec
    hardware: HardwareSpec
    server_axes: dict[str, Any]
    flags: dict[str, FlagValue] = Field(
        description="Engine args + hardware args + server axes + arm flags, merged in that order."
    )
    launch: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cells: list[Cell]


class SliceInfo(BaseModel):
    """One model/hardware/server-axis combination: one comparison table in the report."""

    model_config = ConfigDict(extra="forbid")

    label: str
    model: str
    hardware: str
    server_axes: dict[str, Any]


class Cost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    launches: int
    cells: int
    runs_first_pass: int
    runs_worst_case: int
    launches_worst_case: int
    bisection_runs_worst_case: int = Field(
        0,
        description="Runs crossover bisection may add on top of the worst case (new cells, "
        "on launches the worst case already counts): verify.bisect midpoints × max_runs × "
        "(baseline + candidate) per pair of adjacent grid points of each candidate's series. "
        "It bounds a capacity bracket's midpoints too: those share the limit of verify.bisect "
        "values between two grid points of a series, each value measured for at most every arm.",
    )
    launch_s: float | None = None
    cell_s: float | None = None
    time_first_pass_s: float | None = None
    time_worst_case_s: float | None = None
    budget_s: float | None = None


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    experiment: str
    title: str
    spec_hash: str
    baseline: str
    candidates: list[str]
    axis: str
    slices: list[SliceInfo]
    groups: list[ServerGroup]
    cost: Cost

    def cells(self) -> list[Cell]:
        return [c for g in self.groups for c in g.cells]

    def group(self, group_id: str) -> ServerGroup:
        return next(g for g in self.groups if g.group_id == group_id)

    def add_cell(self, group_id: str, cell: Cell) -> bool:
        """Put a cell the verify policy added (`Cell.added_by`) into its group, in sweep
        order; False (and nothing changes) when the group already holds it. The plan's cost
        stays the planned grid's."""
        group = self.group(group_id)
        if any(c.cell_id == cell.cell_id for c in group.cells):
            return False
        group.cells = sorted([*group.cells, cell], key=sweep_order)
        return True

    def adopt_added(self, earlier: Plan) -> None:
        """On resume: the cells an earlier session of this run added (its plan.json), put
        back into the same groups, so they are neither lost nor measured twice."""
        known = {g.group_id for g in self.groups}
        for g in earlier.groups:
            for c in g.cells:
                if c.added_by is not None and g.group_id in known:
                    # JSON writes an infinite request rate as null: back to inf, as expanded
                    point = {k: math.inf if v is None else v for k, v in c.point.items()}
                    self.add_cell(g.group_id, c.model_copy(update={"point": point}))


def numeric_x(value: Any) -> float | None:
    """An axis value as a finite number, else None (inf, a string, a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def series_key(point: dict[str, Any], axis: str) -> str:
    """The point's other keys, canonically: points with one key lie on one series (the
    analysis groups measurements by it too: `analysis.axis`)."""
    return json.dumps({k: v for k, v in point.items() if k != axis}, sort_keys=True, default=str)


def json_point(point: dict[str, Any]) -> dict[str, Any]:
    """A point as JSON gives it back: an infinite value (a request rate) as None, which is how
    plan.json and results.jsonl hold it. Points read from a file and points in memory then
    give the same `series_key`."""
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in point.items()
    }


def series_of(cell: Cell, axis: str) -> tuple[str, str]:
    """(slice, `series_key`): the cells one table row series holds."""
    return cell.slice, series_key(cell.point, axis)


def grid_of(cells: list[Cell], cell: Cell, axis: str) -> list[float]:
    """The spec's grid along `cell`'s series: the finite x of its grid cells, ascending."""
    key = series_of(cell, axis)
    xs = {numeric_x(c.x) for c in cells if c.added_by is None and series_of(c, axis) == key}
    return sorted(x for x in xs if x is not None)


def grid_bracket(cells: list[Cell], cell: Cell, axis: str) -> tuple[float, float] | None:
    """The adjacent grid points (x ascending) of `cell`'s series that enclose its x: the
    bracket a cell added between them bisects. None when x is a grid point, outside the
    grid, or not a finite number."""
    x = numeric_x(cell.x)
    grid = grid_of(cells, cell, axis)
    if x is None or x in grid:
        return None
    below = [v for v in grid if v < x]
    above = [v for v in grid if v > x]
    if not below or not above:
        return None
    return below[-1], above[0]


def sweep_order(cell: Cell) -> list[Any]:
    """Cells of a group in sweep order (the order `expand` gives), inf as a number."""
    return [
        math.inf if str(cell.point[a]).lower() in ("inf", "infinity") else cell.point[a]
        for a in CLIENT_AXES
    ]


def short_hash(obj: Any, n: int = 12) -> str:
    """Stable id: sha256 of the canonical JSON of `obj` (sorted keys, inf as a string)."""
    text = json.dumps(
        obj, sort_keys=True, separators=(",", ":"), default=str, allow_nan=True
    ).replace("Infinity", '"inf"')
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def point_id(definition: dict[str, Any]) -> str:
    return short_hash({"kind": "point", **definition})


def cell_id(point: str, arm: str, arm_definition: dict[str, Any]) -> str:
    return short_hash({"kind": "cell", "point": point, "arm": arm, **arm_definition})


def slice_label(spec: Spec, combo: dict[str, Any]) -> str:
    """A short label naming only the axes that vary: '' when one model, one hardware and no
    server axis (the usual case: a single comparison table)."""
    parts = []
    if len(spec.models) > 1:
        parts.append(str(combo["model"]))
    if len(spec.hardwares) > 1:
        parts.append(str(combo["hardware"]))
    parts += [
        f"{k.removeprefix('server.')}={combo[k]}" for k in sorted(combo) if k.startswith("server.")
    ]
    return " · ".join(parts)


def expand(spec: Spec, spec_hash: str = "") -> Plan:
    """The plan: groups in run order (arms alternate ABBA across slices, so slow drift of the
    machine does not line up with one arm), each holding its cells in sweep order."""
    axis = spec.main_axis()
    arms = [spec.baseline_arm, *spec.candidate_arms]
    groups: list[ServerGroup] = []
    slices: list[SliceInfo] = []
    for index, sl in enumerate(_slices(spec)):
        slices.append(
            SliceInfo(
                label=sl.label,
                model=sl.model.label,
                hardware=sl.hardware.label,
                server_axes=sl.server_axes,
            )
        )
        order = arms if index % 2 == 0 else arms[::-1]
        groups += [_group(spec, sl, arm, axis) for arm in order]
    return Plan(
        experiment=spec.experiment,
        title=spec.title,
        spec_hash=spec_hash,
        baseline=spec.baseline_arm,
        candidates=spec.candidate_arms,
        axis=axis,
        slices=slices,
        groups=groups,
        cost=estimate_cost(spec, groups),
    )


@dataclass(frozen=True)
class _Slice:
    """One (model, hardware, server axes) combination and the client points swept on it."""

    label: str
    model: ModelSpec
    hardware: HardwareSpec
    server_axes: dict[str, FlagValue]
    #: Flags every arm of the slice gets: engine args, the hardware's, the server axes'.
    common_flags: dict[str, FlagValue]
    combos: list[dict[str, Any]]


def _slices(spec: Spec) -> list[_Slice]:
    models = {m.label: m for m in spec.models}
    hardwares = {h.label: h for h in spec.hardwares}
    by_slice: dict[str, list[dict[str, Any]]] = {}
    for combo in combinations(spec):
        by_slice.setdefault(slice_label(spec, combo), []).append(combo)
    out = []
    for label, combos in by_slice.items():
        first = combos[0]
        hw = hardwares[first["hardware"]]
        server_axes = {
            k.removeprefix("server."): v for k, v in first.items() if k.startswith("server.")
        }
        common_flags = {**spec.engine.args, **hw.args, **server_axes}
        out.append(_Slice(label, models[first["model"]], hw, server_axes, common_flags, combos))
    return out


def _group(spec: Spec, sl: _Slice, arm: str, axis: str) -> ServerGroup:
    """One arm on one slice: its launch (flags, prefix, environment) and its cells."""
    arm_spec = spec.arms[arm]
    flags = {**sl.common_flags, **arm_spec.flags}
    launch = arm_spec.launch or spec.engine.launch
    env = {**spec.engine.env, **arm_spec.env}
    server_def = {
        "engine": spec.engine.kind,
        "model": sl.model.path,
        "gpu": sl.hardware.gpu,
        "count": sl.hardware.count,
        "flags": flags,
        "launch": launch,
        "env": sorted(env),
    }
    arm_def = _arm_def(spec, arm)
    combos = sorted(sl.combos, key=lambda c: [c[a] for a in CLIENT_AXES])
    return ServerGroup(
        group_id="g" + short_hash({"arm": arm, **server_def}, 8),
        arm=arm,
        slice=sl.label,
        model=sl.model,
        hardware=sl.hardware,
        server_axes=sl.server_axes,
        flags=flags,
        launch=launch,
        env=env,
        cells=[_cell(spec, sl, arm, arm_def, combo, axis) for combo in combos],
    )


def _arm_def(spec: Spec, arm: str) -> dict[str, Any]:
    """What of a cell's definition is the arm's own (its cell id hashes it)."""
    arm_spec = spec.arms[arm]
    launch = arm_spec.launch or spec.engine.launch
    env = {**spec.engine.env, **arm_spec.env}
    return {"flags": arm_spec.flags, "launch": launch, "env": sorted(env)}


def added_cell(
    spec: Spec, group: ServerGroup, like: Cell, x: Any, by: AddedBy = "bisection"
) -> Cell:
    """A cell of `group` off the spec's grid: `like`'s point with the main axis at `x`, its
    point and cell ids derived exactly as `expand` derives them (so every arm at the new
    point shares its point id, and the same decision always names the same cell), marked
    with the rule that added it (`by`), which the report words."""
    sl = next(s for s in _slices(spec) if s.label == group.slice)
    axis = spec.main_axis()
    cell = _cell(spec, sl, group.arm, _arm_def(spec, group.arm), {**like.point, axis: x}, axis)
    return cell.model_copy(update={"added_by": by})


def _cell(
    spec: Spec, sl: _Slice, arm: str, arm_def: dict[str, Any], combo: dict[str, Any], axis: str
) -> Cell:
    """One arm at one client point. The point id hashes what every arm shares there (so arms
    compare at equal point ids); the cell id adds what is the arm's own (`arm_def`)."""
    w = spec.workload
    client = {a: combo[a] for a in CLIENT_AXES}
    num = w.prompts_for(int(client["concurrency"]))
    pid = point_id(
        {
            "model": sl.model.path,
            "gpu": sl.hardware.gpu,
            "count": sl.hardware.count,
            "common_flags": sl.common_flags,
            "client": client,
            "num_prompts": num,
            "dataset": w.dataset,
            "range_ratio": w.range_ratio,
            "seed": w.seed,
            "warmup_requests": w.warmup_requests,
            "duration": w.duration,
        }
    )
    return Cell(
        cell_id=cell_id(pid, arm, arm_def),
        point_id=pid,
        arm=arm,
        slice=sl.label,
        point=client,
        x=client[axis],
        num_prompts=num,
    )


def estimate_cost(spec: Spec, groups: list[ServerGroup]) -> Cost:
    """Launches and runs for the first pass and for the worst case the verify policy allows.

    Worst case: every cell reaches `max_runs`; reruns that cannot share a warm server need a
    relaunch per round (VERDICTS.md §6), so launches grow to groups × max_runs when fresh-server
    reruns are on; A/A calibration adds one baseline relaunch per slice. `budget` caps the
    rerun time when the spec gives per-launch and per-cell estimates.
    """
    v = spec.verify
    cells = sum(len(g.cells) for g in groups)
    launches = len(groups)
    runs_worst = cells * v.max_runs
    launches_worst = launches * v.max_runs if (v.fresh_server and v.max_runs > 1) else launches
    if v.aa:
        baseline_groups = [g for g in groups if g.arm == spec.baseline_arm]
        launches_worst += len(baseline_groups)
        runs_worst += sum(len(g.cells) for g in baseline_groups)
    if v.max_runs > 1 and not v.fresh_server:
        launches_worst = launches * v.max_runs  # stage-2 reruns still need the server back
    bisection = 0
    if v.bisect and v.max_runs > 1:
        for g in groups:
            if g.arm != spec.baseline_arm:
                series: dict[tuple[str, str], int] = {}
                for c in g.cells:
                    key = series_of(c, spec.main_axis())
                    series[key] = series.get(key, 0) + 1
                pairs = sum(max(n - 1, 0) for n in series.values())
                bisection += pairs * v.bisect * v.max_runs * 2  # a new cell may reach max_runs
    e = spec.estimate
    cost = Cost(
        launches=launches,
        cells=cells,
        runs_first_pass=cells,
        runs_worst_case=runs_worst,
        launches_worst_case=launches_worst,
        bisection_runs_worst_case=bisection,
        launch_s=e.launch,
        cell_s=e.cell,
        budget_s=v.budget,
    )
    if e.launch is not None and e.cell is not None:
        first = launches * e.launch + cells * e.cell
        worst = launches_worst * e.launch + runs_worst * e.cell
        if v.budget is not None:
            worst = min(worst, first + v.budget)
        cost.time_first_pass_s, cost.time_worst_case_s = first, worst
    return cost
