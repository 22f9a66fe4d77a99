"""The words and tables of `matrixrun history` and of the results store's messages: every
sentence about the store is here, the numbers come typed from `store.queries` and
`store.regression`. Output is Markdown (tables, a Mermaid xychart), so it can go straight
into a job summary or a PR comment. In the CLI, not the report: the verdict document never
shows them; `history`, `plan` (an earlier run's noise) and the run's finish (a store error) do."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from matrixrun.core.aliases import SGLANG as SGLANG_ALIASES
from matrixrun.core.aliases import VLLM as VLLM_ALIASES
from matrixrun.report import fmt
from matrixrun.store.queries import ArmKey, ArmSeries, Earlier, Experiment, LogStats
from matrixrun.store.regression import Check, StepKind

if TYPE_CHECKING:
    from matrixrun.store.prior import PlanNoise


def _where(store: str | None) -> str:
    from matrixrun.store.db import location, shown

    where = location(store)
    return shown(where) if where else "(off)"


def store_unreadable(store: str | None, exc: BaseException) -> str:
    """A run that could not ask the store for a prior: it goes on without one."""
    return (
        f"the results store {_where(store)} could not be read ({_reason(exc)}); this run "
        "borrows no earlier noise (verify.noise_from: auto): check the store, or set "
        "MATRIXRUN_STORE"
    )


def plan_noise_note(engine: str, noise: PlanNoise) -> str | None:
    """`plan` under `verify.noise_from: auto` when the store lends nothing, and why."""
    if not noise.looked or noise.history is not None:
        return None
    if noise.error is not None:
        return (
            f"noise from earlier runs: unknown, the results store {_where(None)} could not be "
            f"read ({_reason(noise.error)}); a run now would borrow none"
        )
    return (
        f"noise from earlier runs: none (no analysed real run of engine {engine} with this "
        "model and hardware in the results store; verify.noise_from: auto)"
    )


def store_unwritable(store: str | None, run_dir: str, exc: BaseException) -> str:
    """A run or ingest that could not be recorded: nothing measured is lost."""
    return (
        f"the results store {_where(store)} could not record {run_dir} ({_reason(exc)}); the "
        f"run directory is complete: `matrixrun store rebuild {run_dir}` adds it later"
    )


def store_failed(run_dir: str, prior: BaseException | None, record: BaseException | None) -> str:
    """A run's one sentence about the store: it could not lend a prior, record the run, or
    either (nothing measured is lost in any case)."""
    if prior is None and record is not None:
        return store_unwritable(None, run_dir, record)
    if record is None and prior is not None:
        return store_unreadable(None, prior)
    assert prior is not None
    return (
        f"the results store {_where(None)} could not be reached ({_reason(prior)}): this run "
        f"borrowed no earlier noise (verify.noise_from: auto) and is not recorded; the run "
        f"directory is complete: `matrixrun store rebuild {run_dir}` adds it later"
    )


def _reason(exc: BaseException) -> str:
    """The driver's own message where SQLAlchemy wrapped one (its first line), redacted."""
    from matrixrun.core.redact import redact_text

    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else cause.__class__.__name__
    return redact_text(fmt.shorten(text, 240))


def _version_list(e: Experiment) -> str:
    versions = sorted({a.engine_version for a in e.arms if a.engine_version})
    return ", ".join(versions) or "?"


#: How each engine renders a spec's short keys (`tp` is `--tp-size` for SGLang), so a flag reads
#: as the launches used it.
_RENAMED = {"sglang": SGLANG_ALIASES, "sim": SGLANG_ALIASES, "vllm": VLLM_ALIASES}


def launch_flag(engine: str, key: str) -> str:
    """A stored flag key as `engine`'s launches give it: ('sglang', 'tp') → '--tp-size'."""
    return fmt.cli_flag(_RENAMED.get(engine, {}).get(key, key))


def _arms(e: Experiment) -> str:
    parts = []
    for a in e.arms:
        flags = " ".join(
            f"{launch_flag(e.engine, k)} {fmt.flag_value(v)}" for k, v in a.flags.items()
        )
        tag = "baseline" if a.baseline else (a.verdict if a.verdict else "not judged")
        parts.append(f"{a.arm} ({tag}{'; ' + flags if flags else ''})")
    return "; ".join(parts)


def experiments_table(total: int, rows: Sequence[Experiment]) -> str:
    """The runs that match, newest first."""
    if not rows:
        return "No run in the results store matches.\n"
    head = (
        f"{total} run(s) match; the newest {len(rows)}:\n\n"
        if total > len(rows)
        else f"{total} run(s) match:\n\n"
    )
    lines = [
        "| finished | run directory | engine | model | hardware | arms (verdict) |",
        "|---|---|---|---|---|---|",
    ]
    for e in rows:
        engine = f"{e.engine} {_version_list(e)}" + (" SIMULATED" if e.simulated else "")
        lines.append(
            "| "
            + " | ".join(
                fmt.table_cell(fmt.user_plain(v))
                for v in (
                    (e.finished_at or "?")[:16],
                    e.run_dir,
                    engine,
                    e.model,
                    e.hardware,
                    _arms(e),
                )
            )
            + " |"
        )
    return head + "\n".join(lines) + "\n"


def _gmean(stats: LogStats) -> float:
    return math.exp(stats.mean)


def series_table(series: ArmSeries) -> str:
    """The arm's metric by engine version (rows) and point (columns): median and n."""
    if not series.groups:
        return f"No real measurement of arm {fmt.user_plain(series.arm)} in the results store.\n"
    xs = sorted({x for g in series.groups for x in g.at if not math.isnan(x)})
    head = "| engine version | first measured | runs | " + " | ".join(fmt.x(x) for x in xs)
    lines = [head + " |", "|---|---|---|" + "---|" * len(xs)]
    for g in series.groups:
        cells = [f"{fmt.value(_gmean(g.at[x]))} (n={g.at[x].n})" if x in g.at else "–" for x in xs]
        lines.append(
            f"| {fmt.table_cell(fmt.user_plain(g.version))} | {g.first_seen[:10] or '?'} | "
            f"{g.runs} | " + " | ".join(cells) + " |"
        )
    return (
        f"Arm {fmt.user_plain(series.arm)}, {series.metric} (geometric mean of real "
        "measurements) by "
        "engine version, oldest first; columns are the sweep axis:\n\n" + "\n".join(lines) + "\n"
    )


def series_chart(series: ArmSeries, at: float | None = None) -> str:
    """A Mermaid xychart of the geometric mean at one point (`at`, else the largest) per
    version."""
    xs = sorted({x for g in series.groups for x in g.at if not math.isnan(x)})
    if not xs or len(series.groups) < 2:
        return ""
    x = at if at is not None and at in xs else xs[-1]
    groups = [g for g in series.groups if x in g.at]
    if len(groups) < 2:
        return ""
    names = ", ".join('"' + g.version.replace('"', "'")[:40] + '"' for g in groups)
    values = [_gmean(g.at[x]) for g in groups]
    return (
        "```mermaid\nxychart-beta\n"
        f'    title "{series.arm} {series.metric} at {fmt.x(x)}, by engine version"\n'
        f"    x-axis [{names}]\n"
        f'    y-axis "{series.metric}" {0} --> {fmt.value(max(values) * 1.1)}\n'
        f"    line [{', '.join(f'{v:.4g}' for v in values)}]\n```\n"
    )


_STEP_WORDS = {
    StepKind.REGRESSION: "**regression**",
    StepKind.IMPROVEMENT: "improvement",
    StepKind.NONE: "no step",
    StepKind.UNTESTED: "untested (no version has two measurements here)",
}


def check_text(series: ArmSeries, result: Check) -> str:
    """Each step between consecutive versions, and the verdict on the newest."""
    if not result.steps:
        return (
            f"No regression check: arm {fmt.user_plain(series.arm)} has "
            f"{len(series.groups)} engine version(s) with real measurements at a shared point; "
            "it needs two.\n"
        )
    lines = [
        "| from | to | at | change | p | n (from/to) | step |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in result.steps:
        p = f"{s.p:.2g}" if s.p is not None else "–"
        lines.append(
            f"| {fmt.table_cell(fmt.user_plain(s.before))} | "
            f"{fmt.table_cell(fmt.user_plain(s.after))} | {fmt.x(s.x)} | "
            f"{fmt.change(s.change)} | {p} | {s.n_before}/{s.n_after} | {_STEP_WORDS[s.kind]} |"
        )
    latest = result.latest()
    bad = [s for s in latest if s.kind == StepKind.REGRESSION]
    newest = fmt.user_plain(latest[0].after)
    if bad:
        where = fmt.join_words([f"{fmt.x(s.x)} ({fmt.change(s.change)})" for s in bad])
        verdict = f"{newest} regressed against {fmt.user_plain(latest[0].before)} at {where}."
    else:
        verdict = (
            f"{newest} shows no regression against {fmt.user_plain(latest[0].before)} beyond "
            f"{fmt.percent(result.threshold)}."
        )
    return (
        f"Regression check of arm {fmt.user_plain(series.arm)}, {series.metric}: each step "
        f"between consecutive engine versions, a t-test on log values with the spread pooled "
        f"over every version (α {result.alpha:g}, Bonferroni over a step's points; threshold "
        f"{fmt.percent(result.threshold)}).\n\n" + "\n".join(lines) + f"\n\n{verdict}\n"
    )


def measured_before_text(keys: Sequence[ArmKey], found: Mapping[str, Sequence[Earlier]]) -> str:
    """For each arm of a spec: has this configuration been measured before?"""
    lines = []
    for k in keys:
        earlier = found.get(k.arm, [])
        what = f"{k.engine}, {k.model} on {k.gpu_count}× {k.gpu}"
        if not earlier:
            lines.append(f"- {fmt.user_plain(k.arm)}: never measured ({fmt.user_plain(what)}).")
            continue
        latest = earlier[0]
        real = sum(1 for e in earlier if not e.simulated)
        lines.append(
            f"- {fmt.user_plain(k.arm)}: measured before in {len(earlier)} run(s) "
            f"({real} real); newest {fmt.user_plain(latest.run_dir)} "
            f"({(latest.finished_at or '?')[:10]}, {fmt.user_plain(latest.engine_version or '?')}"
            f"{', SIMULATED' if latest.simulated else ''}), which measured "
            f"{latest.points} of this spec's {len(k.points)} point(s)."
        )
    return "\n".join(lines) + "\n"
