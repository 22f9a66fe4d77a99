"""The SIMULATED label: whether any measurement ran on the simulator, its time scale(s) and
stream interval, where its own timing strayed from its model (`simulator_lag`), which profile
a rehearsal ran on, and — on the first screen — the candidates the profile cannot tell from
the baseline. Template: `templates/sections/simulation.md.j2` (the first screen's banner is
in `headline.md.j2`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matrixrun.core.keeping import fell_behind, kept_model, sim_late_share
from matrixrun.core.measurement import Measurement
from matrixrun.core.tuning import SIM_LATE_LIMIT
from matrixrun.report import fmt
from matrixrun.report.inputs import RunInputs
from matrixrun.report.section import Section
from matrixrun.rundir.settings import RunSettings


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
        share = sim_late_share(m)
        if share is not None and share > 0.01:
            throughput.append(share)
        writes = m.extra.get("sim_write_lateness_ms")
        itl = m.metrics.mean_itl_ms
        if isinstance(writes, dict) and itl:
            mean = writes.get("mean_ms")
            if isinstance(mean, int | float) and mean * m.time_scale > 0.1 * itl:
                latency.append(mean * m.time_scale)
    return throughput, latency


@dataclass(frozen=True)
class Behind:
    """The measurements the simulator could not keep, or whose load client could not keep up on
    the primary metric (`core.keeping`: the analysis read no value from them), and what the
    rehearsal did about them."""

    #: successful simulated measurements, and those of them that fell behind
    measured: int
    late: int
    #: of those, the ones only the client's self-check flagged on `metric`
    client: int
    metric: str
    #: the worst share of a cell's duration the simulator fell behind by (0: only the client)
    worst: float
    #: cells with a successful measurement, none of which kept up: no number of theirs counts
    lost: int
    #: the time scale the spec asked for and the slowest the rehearsal ran at
    asked: float
    slowest: float


def behind(measurements: Sequence[Measurement], asked: float, metric: str) -> Behind | None:
    """None when every simulated measurement kept up on the primary `metric`; else the counts
    the report states (a cell measured again in time is not lost)."""
    ok = [m for m in measurements if m.simulated and m.ok]
    late = [m for m in ok if fell_behind(m, metric)]
    if not late:
        return None
    kept = {m.cell_id for m in ok if not fell_behind(m, metric)}
    shares = [sim_late_share(m) or 0.0 for m in late if not kept_model(m)]
    return Behind(
        measured=len(ok),
        late=len(late),
        client=len(late) - len(shares),
        metric=metric,
        worst=max(shares, default=0.0),
        lost=len({m.cell_id for m in late} - kept),
        asked=asked,
        slowest=min([asked, *(m.time_scale for m in ok)]),
    )


# ------------------------------------------------------------------------------ words


def could_not_keep_up(b: Behind) -> str:
    """The document's first line when some cell has no measurement that kept up: the host was
    too slow for the rehearsal even after it slowed down, so those cells say nothing."""
    slowed = (
        f", even after it slowed from {fmt.x(b.asked)}× to {fmt.x(b.slowest)}×"
        if b.slowest < b.asked
        else f", at {fmt.x(b.asked)}×"
    )
    return (
        "**The rehearsal could not keep up with its model on this host:** "
        f"{b.late} of {b.measured} measurements fell behind ({who(b)}){slowed}. Those carry no "
        f"number, so {b.lost} cell(s) have none and the verdict below is not the profile's: "
        "rehearse on a quieter host or lower rehearsal.time_scale."
    )


def who(b: Behind) -> str:
    """Which fell behind, and by how much: the simulator, the load client, or both."""
    parts = []
    if b.late > b.client:
        parts.append(
            f"the simulator in {b.late - b.client}, by more than {100 * SIM_LATE_LIMIT:.0f}% "
            f"of the cell's duration, up to {100 * b.worst:.1f}%"
        )
    if b.client:
        parts.append(f"the load client in {b.client}: its self-check flagged `{b.metric}`")
    return "; ".join(parts)


def kept_up_after(b: Behind) -> str:
    """The banner's sentence when every cell has a measurement that kept up in the end."""
    slowed = (
        f"; the rehearsal slowed to {fmt.x(b.slowest)}× and measured them again"
        if b.slowest < b.asked
        else "; each cell was measured again in time"
    )
    return f". {b.late} measurement(s) fell behind ({who(b)}): they carry no number{slowed}"


def banner(
    scales: Sequence[float],
    stream: int | None,
    slow_engine: Sequence[float],
    slow_writes: Sequence[float],
) -> str:
    """The SIMULATED banner: the speed-up, the stream interval, and where the simulator's own
    timing strayed from its model (`simulator_lag`)."""
    if list(scales) == [1.0]:
        speed = "the simulator ran in real time"
    else:
        speed = (
            "the simulator ran "
            + " / ".join(f"{fmt.x(s)}×" for s in scales)
            + " faster; times converted back"
        )
    text = f"measured on matrixrun's simulator, not on GPUs: {speed}"
    if stream:
        text += f"; it streamed {stream} tokens per event (rehearsal.stream_interval)"
    if slow_engine:
        text += (
            f". In {len(slow_engine)} measurement(s) the simulator's engine fell behind its "
            f"model by up to {100 * max(slow_engine):.1f}% of the cell's duration, so their "
            "throughput understates the profile by up to that much"
        )
    if slow_writes:
        text += (
            f". In {len(slow_writes)} measurement(s) its token writes lagged the model by "
            f"{min(slow_writes):.0f}–{max(slow_writes):.0f} ms on average (modelled time), "
            "inflating their TTFT/ITL samples; lower rehearsal.time_scale or raise "
            "rehearsal.stream_interval to shrink it"
        )
    return text + "."


def rehearsal_profile(profile: str, bundled: bool) -> str:
    """Which profile a rehearsal ran on, where the spec gave none."""
    return (
        f"Profile: the bundled {fmt.user_plain(profile)!r} (the spec gives none)."
        if bundled
        else ""
    )


def blind_arms(blind: Sequence[str], baseline: str) -> str:
    """The first screen's warning: the profile ran these candidates as the baseline, so the
    verdict is about the simulator's noise, not the change (issue 33)."""
    names = ", ".join(f"`{fmt.user_plain(b)}`" for b in blind)
    return (
        f"**No rule of the simulator's profile tells {names} from `{fmt.user_plain(baseline)}`: "
        "both ran as the same simulated engine, so any difference below is the simulator's "
        "noise, not the change.** Give the profile a rule for the flags they differ in "
        "(docs/simulator.md; `matrixrun plan` shows one to copy)."
    )


# ------------------------------------------------------------------------------ the section


@dataclass
class Simulation:
    """What the SIMULATED banner says."""

    time_scales: list[str]
    stream_interval: int | None
    note: str | None
    text: str
    #: the first screen's warning when the profile could not tell arms apart (else None)
    blind: str | None = None
    #: the document's first line when the rehearsal could not keep up with its model
    behind: str | None = None


def settings_baseline(settings: RunSettings | None) -> str:
    return settings.analysis.baseline if settings is not None else ""


def of(
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
    text = banner(scales, stream, slow_engine, slow_writes)
    metric = settings.analysis.primary if settings is not None else "output_throughput"
    # settings.json may record the speed a slowed rehearsal ended at: the fastest is the ask
    late = behind(simulated, max([float(declared or 0.0), *scales]), metric)
    if late is not None and not late.lost:
        text = text[:-1] + kept_up_after(late) + "."
    blind = None
    if facts is not None and facts.rehearsal is not None:
        r = facts.rehearsal
        said = rehearsal_profile(r.profile, r.bundled)
        text += f" {said}" if said else ""
        if r.blind:
            blind = blind_arms(r.blind, settings_baseline(settings))
    return Simulation(
        time_scales=[fmt.x(s) for s in scales],
        stream_interval=stream,
        note=note,
        text=text,
        blind=blind,
        behind=could_not_keep_up(late) if late is not None and late.lost else None,
    )


def _build(inputs: RunInputs) -> Simulation | None:
    return of(inputs.measurements, inputs.settings, inputs.env)


#: Last in the document; the headline's partial reads its part too (SIMULATED, could not keep up).
SECTION = Section("simulation", 130, _build)
