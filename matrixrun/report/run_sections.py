"""The sections about how the run went: simulation, reruns, failures, correctness,
environment and how to reproduce it. Pure functions of the run directory's data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from matrixrun.core.measurement import Measurement
from matrixrun.core.rerun_reason import RerunWhy
from matrixrun.core.verdict import Comparison, Verdict
from matrixrun.report import fmt, wording
from matrixrun.rundir.settings import RunSettings


@dataclass
class Simulation:
    """What the SIMULATED banner says."""

    time_scales: list[str]
    stream_interval: int | None
    note: str | None
    text: str
    #: the first screen's warning when the profile could not tell arms apart (else None)
    blind: str | None = None


@dataclass
class Failures:
    measurements: list[list[str]]
    requests: list[str]
    #: Measurements kept but limited: capped cells, outputs that ended short, a client that
    #: fell behind (one sentence each).
    limited: list[str] = field(default_factory=list)


@dataclass
class Environment:
    facts: list[tuple[str, str]]
    gpus: list[str]
    hardware_check: str | None
    servers: list[list[str]]
    servers_header: list[str]
    servers_note: str | None
    variables: list[str]


def simulator_lag(measurements: Sequence[Measurement]) -> tuple[list[float], list[float]]:
    """How far the simulator's own timing strayed from its model, in modelled time, for the
    cells where it matters (it records both per cell; absolute deadlines keep either from
    accumulating):

    - throughput: the engine loop's worst lateness bounds how much a cell's duration grew, so
      max lateness / duration bounds the throughput understatement; listed (as that share)
      where it exceeds 1%;
    - latency: token writes that lag the engine inflate TTFT/ITL samples; listed (as mean lag
      in ms) where the mean lag exceeds 10% of the mean inter-token latency.
    """
    throughput, latency = [], []
    for m in measurements:
        if m.metrics is None:
            continue
        engine = m.extra.get("sim_engine_lateness_ms")
        if isinstance(engine, dict) and m.metrics.duration > 0:
            worst = engine.get("max_ms", engine.get("p99_ms"))
            if isinstance(worst, int | float):
                share = worst * m.time_scale / 1000 / m.metrics.duration
                if share > 0.01:
                    throughput.append(share)
        writes = m.extra.get("sim_write_lateness_ms")
        itl = m.metrics.mean_itl_ms
        if isinstance(writes, dict) and itl:
            mean = writes.get("mean_ms")
            if isinstance(mean, int | float) and mean * m.time_scale > 0.1 * itl:
                latency.append(mean * m.time_scale)
    return throughput, latency


def simulation_of(
    measurements: Sequence[Measurement], settings: RunSettings | None, env: Mapping[str, Any]
) -> Simulation | None:
    """None unless some measurement is simulated; else the time scale(s) and stream interval
    the report must state."""
    simulated = [m for m in measurements if m.simulated]
    rehearsal = settings is not None and settings.rehearsal
    if not simulated and not env.get("simulated") and not rehearsal:
        return None
    declared = settings.time_scale if settings is not None and rehearsal else None
    scales = sorted({m.time_scale for m in simulated}) or [
        float(declared or env.get("time_scale") or 1.0)
    ]
    facts = settings.spec if settings is not None else None
    stream = facts.stream_interval if facts is not None else None
    note = facts.rehearsal_note if facts is not None else None
    if note and not note.rstrip().endswith((".", "!", "?")):
        note = note.rstrip() + "."
    slow_engine, slow_writes = simulator_lag(simulated)
    text = wording.simulation(scales, stream, slow_engine, slow_writes)
    blind = None
    if facts is not None and facts.rehearsal is not None:
        r = facts.rehearsal
        said = wording.rehearsal_profile(r.profile, r.bundled)
        text += f" {said}" if said else ""
        if r.blind:
            blind = wording.blind_arms(r.blind, settings_baseline(settings))
    return Simulation(
        time_scales=[fmt.x(s) for s in scales],
        stream_interval=stream,
        note=note,
        text=text,
        blind=blind,
    )


def settings_baseline(settings: RunSettings | None) -> str:
    return settings.analysis.baseline if settings is not None else ""


# ------------------------------------------------------------------------------ reruns


@dataclass
class RerunEntry:
    where: str
    arm: str
    attempt: int
    reason: str
    reason_text: str
    server: str
    why: str
    showed: str
    outcome: str | None
    cell_now: str
    error: str


def unfinished(events: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the run's last session started and never ended (no `run_end` after its last
    `run_start`): a directory without run events (an ingest) is not a run that stopped."""
    starts = [i for i, e in enumerate(events) if e.get("event") == "run_start"]
    return bool(starts) and not any(e.get("event") == "run_end" for e in events[starts[-1] :])


def verify_whys(events: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """(cell id, attempt) → why the verify event that asked for that rerun asked, in words
    (the runner records the attempt the rerun will have, and the reason as data)."""
    out: dict[tuple[str, int], str] = {}
    for e in events:
        if e.get("event") == "verify" and e.get("cell") and isinstance(e.get("attempt"), int):
            why = e.get("why")
            try:
                text = wording.rerun_why(RerunWhy.model_validate(why))
            except ValidationError:  # not a reason this version records: shown as written
                text = str(why or "")
            out[(str(e["cell"]), int(e["attempt"]))] = text
    return out


def rerun_entries(verdict: Verdict, events: Sequence[Mapping[str, Any]]) -> list[RerunEntry]:
    """Every rerun of the primary metric, with why it was run and what it showed."""
    settings = verdict.settings
    axis = settings.axis
    whys = verify_whys(events)
    cells: dict[tuple[str, str, str], Comparison] = {
        (s, c, cell.point_id): cell for s, c, cell in verdict.comparisons()
    }
    out = []
    for r in verdict.reruns:
        cell = cells.get((r.slice, r.candidate, r.point_id))
        where = f"{axis} {fmt.x(r.point.get(axis, '?'))}" + (f" [{r.slice}]" if r.slice else "")
        out.append(
            RerunEntry(
                where=where,
                arm=r.arm,
                attempt=r.attempt,
                reason=r.reason,
                reason_text=wording.REASON_WORDS.get(r.reason, r.reason),
                server=wording.rerun_server(r),
                why=fmt.shorten(whys.get((r.cell_id, r.attempt), "")),
                showed=wording.rerun_showed(r, cell, where, settings),
                outcome=r.outcome.value if r.outcome is not None else None,
                cell_now=wording.cell_text(cell) if cell is not None else "",
                error=fmt.shorten(r.error) if r.error else "",
            )
        )
    return out


# ------------------------------------------------------------------------------ failures


def failures_of(
    measurements: Sequence[Measurement], axis: str, extra_limits: Sequence[str] = ()
) -> Failures:
    """Failed measurements (cell, arm, attempt, error) and cells with failed requests."""
    failed = []
    partial = []
    for m in measurements:
        where = f"{axis} {fmt.x(m.point.get(axis, '?'))}" + (f" [{m.slice}]" if m.slice else "")
        if not m.ok:
            failed.append(
                [
                    where,
                    f"`{m.arm}`",
                    str(m.attempt),
                    f"`{m.instance}`",
                    wording.REASON_WORDS.get(m.reason, m.reason),
                    fmt.table_cell(fmt.shorten(m.error or "no request completed")),
                ]
            )
        if m.metrics is not None and m.metrics.failed:
            # also for a failed measurement: the checks line counts its failed requests, so
            # the list must not then say "none"
            total = m.metrics.failed + m.metrics.completed
            partial.append(
                wording.failed_requests(m.arm, where, m.attempt, m.metrics.failed, total)
            )
    limited = [*limits_of(measurements, axis), *extra_limits]
    return Failures(measurements=failed, requests=partial, limited=limited)


def jobs_limits(run_dir: Path | None, baseline: str) -> list[str]:
    """What a Slurm run's jobs.json says a reader must know: candidates that never shared a
    node with the baseline (their change includes the nodes'), and jobs that did not complete
    (a stage-2 job's missing reruns show nowhere else)."""
    if run_dir is None or not (run_dir / "jobs.json").exists():
        return []
    from matrixrun.rundir.jobs import read_jobs

    jobs = read_jobs(run_dir / "jobs.json")
    out = [wording.never_shared_node(c, baseline) for c in jobs.never_shared_node]
    for j in jobs.jobs:
        if j.failed:
            out.append(wording.job_not_completed(j.job_id, j.arm, j.round, j.state, j.reason))
    return out


def limits_of(measurements: Sequence[Measurement], axis: str) -> list[str]:
    """One sentence per measurement the harness kept but could not take at face value."""
    out = []
    for m in measurements:
        where = f"{axis} {fmt.x(m.point.get(axis, '?'))}" + (f" [{m.slice}]" if m.slice else "")
        capped = m.extra.get("capped")
        if isinstance(capped, dict):
            out.append(
                wording.capped_cell(
                    m.arm, where, m.attempt, float(capped.get("after_s", 0)),
                    int(capped.get("completed", 0)), int(capped.get("cut_requests", 0)),
                )
            )  # fmt: skip
        if m.extra.get("short_outputs"):
            out.append(
                wording.short_outputs(m.arm, where, m.attempt, int(m.extra["short_outputs"]))
            )
        check = m.extra.get("client_check")
        if isinstance(check, dict) and check.get("client_bound"):
            processes = int(m.extra.get("client_processes") or 1)
            out.append(wording.client_bound(m.arm, where, m.attempt, check, processes))
    return out


def correctness_of(verdict: Verdict) -> list[list[str]]:
    """Table rows (arm, agreement, floor, status) for candidates with a recorded agreement."""
    s = verdict.settings
    out: dict[str, list[str]] = {}
    for sl in verdict.slices:
        for c in sl.candidates:
            if c.correctness is not None:
                out[c.candidate] = [
                    f"`{c.candidate}`",
                    fmt.share(c.correctness),
                    fmt.setting_percent(s.correctness_min),
                    wording.SUSPECT_STATUS if c.suspect else "ok",
                ]
    return list(out.values())


# ------------------------------------------------------------------------------ environment


def _servers(env: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    infos = {k: v for k, v in (env.get("servers") or {}).items() if isinstance(v, dict)}
    sliced = any(info.get("slice") for info in infos.values())
    # issue 16 (--executor slurm), the one addition here: a node column when instances say
    # where they ran (arms may run on different nodes at once); jobs.json has the rest
    noded = any(info.get("node") for info in infos.values())
    # the GPUs, when the servers did not all run on the same ones (a run resumed on another
    # lent machine): their launch-to-launch spread then includes the machines'
    gpus = {tuple(info.get("gpu_serials") or ()) for info in infos.values()}
    on_gpus = len(gpus - {()}) > 1
    header = [
        "server instance",
        "arm",
        *(["slice"] if sliced else []),
        *(["node"] if noded else []),
        *(["GPU serials"] if on_gpus else []),
        "engine version",
        "startup",
    ]
    rows = []
    for name, info in infos.items():
        startup = info.get("startup_s")
        rows.append(
            [
                f"`{name}`",
                f"`{info.get('arm', '?')}`",
                *([fmt.table_cell(str(info.get("slice") or "—"))] if sliced else []),
                *([fmt.table_cell(str(info.get("node") or "—"))] if noded else []),
                *([fmt.table_cell(", ".join(info.get("gpu_serials") or ["—"]))] if on_gpus else []),
                fmt.table_cell(str(info.get("version") or "n/a")),
                fmt.seconds(float(startup)) if isinstance(startup, int | float) else "n/a",
            ]
        )
    return header, rows


def environment_of(env: Mapping[str, Any], settings: RunSettings | None) -> Environment:
    facts = settings.spec if settings is not None else None
    harness = env.get("harness") or {}
    info = [
        ("harness", f"{harness.get('name', 'matrixrun')} {harness.get('version') or ''}".strip()),
        ("python", env.get("python")),
        ("platform", env.get("platform")),
        ("matrixrun commit", env.get("git_sha")),
        ("engine", env.get("engine") or (facts.engine if facts else None)),
    ]
    gpus: dict[tuple[str, str, str], int] = {}
    for g in env.get("gpus") or []:
        if isinstance(g, dict):
            key = (
                str(g.get("name", "?")),
                str(g.get("driver_version", "?")),
                str(g.get("memory_total", "?")),
            )
            gpus[key] = gpus.get(key, 0) + 1
    check = wording.hardware_sentence(env.get("hardware_check"))
    if check is None and facts is not None and not facts.check_hardware:
        check = wording.HARDWARE_SKIPPED
    header, servers = _servers(env)
    return Environment(
        facts=[(k, fmt.table_cell(str(v))) for k, v in info if v],
        gpus=[f"{n}× {name} (driver {drv}, {mem})" for (name, drv, mem), n in gpus.items()],
        hardware_check=check,
        servers=servers,
        servers_header=header,
        servers_note=None if servers else wording.NO_SERVERS,
        variables=[f"`{k}={v}`" for k, v in sorted((env.get("env") or {}).items())],
    )
