"""The failures section: measurements that failed (kept; they count against their arm), requests
that failed inside a measurement, and measurements kept but not at face value (a capped cell,
outputs that ended short, a load client that fell behind, a Slurm job that did not complete).
The measurements carry the numbers; every row and sentence is written here.
Template: `templates/sections/failures.md.j2`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from matrixrun.core.keeping import worst
from matrixrun.core.measurement import Measurement
from matrixrun.report import fmt, wording
from matrixrun.report.inputs import RunInputs
from matrixrun.report.section import Section
from matrixrun.rundir.jobs import JobsFile

# ------------------------------------------------------------------------------ words


def failed_requests(
    arm: str,
    where: str,
    attempt: int,
    failed: int,
    total: int,
    reasons: dict[str, int] | None = None,
    compared: bool = True,
) -> str:
    """`reasons`: the commonest errors with their counts (`extra.request_errors`), so a cut or
    unsent request reads as what it is; `compared`: whether the run's metrics are used."""
    why = ""
    if reasons:
        why = ": " + ", ".join(f"{n} {fmt.user(fmt.shorten(e, 160))}" for e, n in reasons.items())
        named = sum(reasons.values())
        why += f" and {failed - named} other" if named < failed else ""
    return (
        f"`{arm}` at {where}, attempt {attempt}: {failed} of {total} requests failed "
        f"({fmt.share(failed / total)}){why}; "
        + ("its metrics are over the successful ones" if compared else "the run is not compared")
    )


def idle_gap(arm: str, where: str, attempt: int, gaps: Sequence[dict[str, Any]]) -> str:
    """The longest stretch the server sent nothing with requests outstanding (`load/idle.py`),
    and how many more the measurement had."""
    g = max(gaps, key=lambda g: float(g["for_s"]))
    n = int(g["outstanding"])
    more = len(gaps) - 1
    return (
        f"`{arm}` at {where}, attempt {attempt}: the server sent nothing for "
        f"{fmt.seconds(float(g['for_s']))} while {n} request{'s were' if n != 1 else ' was'} "
        f"outstanding (from {fmt.seconds(float(g['at_s']))} into the cell)"
        + (f", and {more} more such stretch{'es' if more > 1 else ''}" if more else "")
    )


def capped_cell(
    arm: str, where: str, attempt: int, after_s: float, completed: int, cut: int
) -> str:
    return (
        f"`{arm}` at {where}, attempt {attempt}: capped at {fmt.seconds(after_s)} "
        f"(limits.cell_timeout): {completed} of {completed + cut} requests finished, {cut} cut; "
        "its metrics are over the finished ones (throughput over their span, latency without "
        "the requests that waited longest)"
    )


def short_outputs(arm: str, where: str, attempt: int, short: int) -> str:
    return (
        f"`{arm}` at {where}, attempt {attempt}: {short} request(s) ended before the asked "
        "output length (the model stopped; ignore_eos was not sent)"
    )


def short_concurrency(arm: str, where: str, nominal: float, low: float, high: float) -> str:
    measured = f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}–{high:.1f}"
    return (
        f"`{arm}` at {where}: measured concurrency {measured}, short of the nominal "
        f"{fmt.x(nominal)}: fewer requests were in flight on average than the row's label "
        "says, so it describes a lighter load (too few prompts per cell, or a server that "
        "held requests back)"
    )


def client_bound(
    arm: str, where: str, attempt: int, check: dict[str, Any], processes: int = 1
) -> str:
    named = ", ".join(
        f"{k} by up to {fmt.share(v)}" for k, v in worst(check.get("affected", {}), 3)
    )
    return (
        f"`{arm}` at {where}, attempt {attempt}: the load client"
        + (f" ({processes} processes)" if processes > 1 else "")
        + " fell behind (loop lag p99 "
        f"{fmt.x(check.get('lag_p99_ms', 0))} ms, {fmt.share(check.get('coalesced_share', 0))}"
        f" of token gaps read together): {named} may be the client's, not the server's"
    )


def client_bound_many(
    arms: Sequence[str], axis: str, xs: Sequence[float], checks: Sequence[dict[str, Any]]
) -> str:
    """The same note for many measurements in one line: how many, where, the range of the
    client's lag and the most each metric could be the client's."""
    most: dict[str, float] = {}
    for c in checks:
        for k, v in c.get("affected", {}).items():
            most[k] = max(most.get(k, 0.0), float(v))
    named = ", ".join(f"{k} by up to {fmt.share(v)}" for k, v in worst(most, 3))
    lags = [float(c.get("lag_p99_ms", 0)) for c in checks]
    where = (
        f" at {axis} {fmt.x(min(xs))}" + (f"–{fmt.x(max(xs))}" if max(xs) > min(xs) else "")
        if xs
        else ""
    )
    return (
        f"the load client fell behind in {len(checks)} measurements of "
        f"{fmt.join_words([f'`{a}`' for a in arms])}{where} (loop lag p99 "
        f"{fmt.x(min(lags))}–{fmt.x(max(lags))} ms): {named} may be the client's, not the "
        "server's"
    )


def never_shared_node(candidate: str, baseline: str) -> str:
    return (
        f"`{candidate}` never ran on a node `{baseline}` ran on (the Slurm jobs landed apart): "
        "its change includes the nodes' differences as well as the flags'"
    )


def job_not_completed(job_id: str, arm: str, round_no: int, state: str, reason: str | None) -> str:
    stage = "stage 1" if round_no == 0 else f"stage-2 round {round_no}"
    return f"Slurm job {job_id} (`{arm}`, {stage}) ended {state}" + (
        f": {reason}" if reason else ""
    )


# ------------------------------------------------------------------------------ the section


@dataclass
class Failures:
    measurements: list[list[str]]
    requests: list[str]
    #: Measurements kept but limited: capped cells, outputs that ended short, a client that
    #: fell behind (one sentence each).
    limited: list[str] = field(default_factory=list)


def failures_of(
    measurements: Sequence[Measurement], axis: str, extra_limits: Sequence[str] = ()
) -> Failures:
    """Failed measurements (cell, arm, attempt, error) and cells with failed requests."""
    failed = []
    partial = []
    for m in measurements:
        where = wording.measured_at(axis, m.point, m.slice)
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
            reasons = m.extra.get("request_errors")
            partial.append(
                failed_requests(
                    m.arm, where, m.attempt, m.metrics.failed, total,
                    reasons if isinstance(reasons, dict) else None, compared=m.ok,
                )
            )  # fmt: skip
    limited = [*limits_of(measurements, axis), *concurrency_limits(measurements, axis)]
    return Failures(measurements=failed, requests=partial, limited=[*limited, *extra_limits])


#: Measured concurrency (bench_serving's: the requests' summed time over the benchmark's span)
#: below this share of the nominal one is reported. A full cell loses some to its ramp and its
#: tail: 75-77% of a nominal 8 in the committed H200 runs without continuous batching
#: (reports/runs/h200_transformers_cb*), which are measured loads, not mislabelled ones; a cell
#: with fewer prompts than slots loses most (issue 45: 62-64 measured at a nominal 256).
SHORT_CONCURRENCY = 0.7


def _all_at_once(rate: Any) -> bool:
    """Whether a point's request rate (absent, a number, or "inf" as written) is infinite."""
    if rate is None:
        return True
    if isinstance(rate, str):
        return rate.lower() in ("inf", "infinity")
    return isinstance(rate, int | float) and math.isinf(rate)


def concurrency_limits(measurements: Sequence[Measurement], axis: str) -> list[str]:
    """One sentence per arm and cell whose measured concurrency fell short of its nominal one
    (all at once only: at a finite request rate or a trace's schedule the concurrency is a
    cap, not the load)."""
    seen: dict[tuple[str, str], list[float]] = {}
    nominal: dict[tuple[str, str], float] = {}
    for m in measurements:
        conc = m.point.get("concurrency")
        if m.metrics is None or m.metrics.concurrency is None or not conc:
            continue
        if not _all_at_once(m.point.get("request_rate")) or m.extra.get("scheduled_arrivals"):
            continue
        if m.extra.get("capped"):  # said above, with what it cut
            continue
        key = (m.arm, wording.measured_at(axis, m.point, m.slice))
        seen.setdefault(key, []).append(m.metrics.concurrency)
        nominal[key] = float(conc)
    return [
        short_concurrency(arm, where, nominal[(arm, where)], min(v), max(v))
        for (arm, where), v in seen.items()
        if max(v) < SHORT_CONCURRENCY * nominal[(arm, where)]
    ]


#: More notes of one kind than this are said in one line, with their count and range.
COLLAPSE_AFTER = 3


def limits_of(measurements: Sequence[Measurement], axis: str) -> list[str]:
    """One sentence per measurement the harness kept but could not take at face value; a note
    repeated in more than `COLLAPSE_AFTER` measurements (a client that fell behind) in one."""
    out = []
    behind: list[tuple[Measurement, str]] = []
    for m in measurements:
        where = wording.measured_at(axis, m.point, m.slice)
        capped = m.extra.get("capped")
        # a capped run that is compared (written before it became a failure, whose error and
        # failed requests say it now)
        if isinstance(capped, dict) and "never_sent" not in capped:
            out.append(
                capped_cell(
                    m.arm, where, m.attempt, float(capped.get("after_s", 0)),
                    int(capped.get("completed", 0)), int(capped.get("cut_requests", 0)),
                )
            )  # fmt: skip
        gaps = m.extra.get("idle_gaps")
        if isinstance(gaps, list) and gaps:
            out.append(idle_gap(m.arm, where, m.attempt, gaps))
        if m.extra.get("short_outputs"):
            out.append(short_outputs(m.arm, where, m.attempt, int(m.extra["short_outputs"])))
        check = m.extra.get("client_check")
        if isinstance(check, dict) and check.get("client_bound"):
            processes = int(m.extra.get("client_processes") or 1)
            behind.append((m, client_bound(m.arm, where, m.attempt, check, processes)))
    if len(behind) <= COLLAPSE_AFTER:
        return out + [text for _, text in behind]
    ms = [m for m, _ in behind]
    xs = [float(x) for m in ms if isinstance(x := m.point.get(axis), int | float)]
    arms = list(dict.fromkeys(m.arm for m in ms))
    return [*out, client_bound_many(arms, axis, xs, [m.extra["client_check"] for m in ms])]


def jobs_limits(jobs: JobsFile | None, baseline: str) -> list[str]:
    """What a Slurm run's jobs.json says a reader must know: candidates that never shared a
    node with the baseline (their change includes the nodes'), and jobs that did not complete
    (a stage-2 job's missing reruns show nowhere else)."""
    if jobs is None:
        return []
    out = [never_shared_node(c, baseline) for c in jobs.never_shared_node]
    for j in jobs.jobs:
        if j.failed:
            out.append(job_not_completed(j.job_id, j.arm, j.round, j.state, j.reason))
    return out


def of(inputs: RunInputs) -> Failures:
    settings = inputs.verdict.settings
    limits = jobs_limits(inputs.jobs, settings.baseline)
    return failures_of(inputs.measurements, settings.axis, limits)


SECTION = Section("failures", 60, of)
