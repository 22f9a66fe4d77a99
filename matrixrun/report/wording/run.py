"""The sentences about how the run went: reruns and why they were run, the simulator, the
hardware gate, the prefix cache, failed requests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matrixrun.core.metrics import higher_is_better, unit
from matrixrun.core.rerun_reason import RerunWhy, WhyKind
from matrixrun.core.verdict import (
    AnalysisSettings,
    CheckOutcome,
    Comparison,
    Explanation,
    Rerun,
    RerunKind,
    Verdict,
)
from matrixrun.report import fmt
from matrixrun.report.wording.counts import plural
from matrixrun.report.wording.verdicts import cell_text
from matrixrun.rundir.settings import SpecFacts

REASON_WORDS = {
    "first": "first run",
    "surprise": "surprising change",
    "inconclusive": "undecided cell",
    "crossover": "crossover bracket",
    "fresh_server": "fresh-server check",
    "aa": "A/A (baseline against itself)",
    "manual": "repeat found in the input (reason not recorded)",
    "bisection": "bisection midpoint",
    "fixed": "fixed design (calibration)",
}

CLIENT_WORDS = {
    "builtin": "matrixrun's built-in streaming client (metric definitions as sglang.bench_serving)",
    "bench_serving": "`python -m sglang.benchmark.serving` (its --output-file parsed)",
    "vllm": "`vllm bench serve` (its --save-result JSON parsed; see docs/ingest.md)",
    "guidellm": "guidellm (its JSON report parsed; see docs/ingest.md)",
    "aiperf": "aiperf (its profile_export_aiperf.json parsed; see docs/ingest.md)",
}


# ------------------------------------------------------------------------------ reruns


def _effect(cell: Comparison | None, metric: str) -> str:
    d = cell.d if cell is not None else None
    if d is None:
        return "change"
    if higher_is_better(metric):
        return "speed-up" if d > 0 else "slowdown"
    return "improvement" if d > 0 else "regression"


def rerun_server(r: Rerun) -> str:
    return (
        "same warm server " if r.kind == RerunKind.WARM else "fresh server "
    ) + f"`{r.instance}`"


def rerun_showed(r: Rerun, cell: Comparison | None, where: str, s: AnalysisSettings) -> str:
    """'the slowdown at concurrency 256 is not warmup: warm rerun 515.77 vs first run 515.58
    tok/s (+0.04%, within ±3%) — the JIT/warmup explanation is falsified.'"""
    if r.value is None or r.first_value is None:
        failed = "the rerun failed" if r.value is None else "the first run failed"
        return f"{failed}, so it shows nothing about the explanation."
    margin = f"±{fmt.setting_percent(s.margin)}"
    numbers = (
        f"{fmt.exact(r.value)} vs first run {fmt.exact(r.first_value)} {unit(r.metric)}".rstrip()
    )
    delta = fmt.change(r.change_vs_first or 0.0, 2)
    band = f"±{fmt.percent(r.noise_band)}" if r.noise_band is not None else margin
    within = f"within noise, {band}" if r.matches_first else f"beyond noise, {band}"
    effect = f"the {_effect(cell, r.metric)} at {where}"
    alone = (
        f"; on its own the rerun gives {fmt.change(r.alone)} vs `{s.baseline}`"
        if r.alone is not None
        else ""
    )
    if r.tests == Explanation.WARMUP:
        rerun = f"warm rerun {numbers} ({delta}, {within}{alone})"
        if r.outcome == CheckOutcome.CONFIRMED:
            return (
                f"the first run at {where} was held back: {rerun}, better than the first run "
                "beyond what noise explains — the JIT/warmup explanation is confirmed for that "
                "first run; both runs are kept and counted (whether a verdict rests on cold "
                "first runs is judged over all of the arm's repeats: see the caveats)."
            )
        if r.outcome == CheckOutcome.NOT_SETTLED:
            return (
                f"the first run at {where} may have been held back: {rerun}, better than the "
                "first run but within what the noise σ explains for one pair — the JIT/warmup "
                "explanation is neither confirmed nor falsified."
            )
        if r.matches_first:
            return f"{effect} is not warmup: {rerun} — the JIT/warmup explanation is falsified."
        return (
            f"{effect} is not warmup: {rerun}, worse than the first run — the JIT/warmup "
            "explanation is falsified; the server drifts."
        )
    if r.tests == Explanation.INSTANCE:
        rerun = f"fresh server {numbers} ({delta}{alone})"
        if r.outcome == CheckOutcome.FALSIFIED:
            return (
                f"{effect} is not an odd server instance: {rerun}, so the fresh server "
                "reproduces it — the odd-instance explanation is falsified."
            )
        if r.outcome == CheckOutcome.CONFIRMED:
            return (
                f"{effect} does not reproduce on a fresh server: {rerun} — the odd-instance "
                "explanation is confirmed."
            )
        return (
            f"{effect} reproduces only in part on a fresh server: {rerun} — the odd-instance "
            "explanation is neither confirmed nor falsified."
        )
    kind = "on the same server" if r.kind == RerunKind.WARM else "on a fresh server"
    return f"replicate {kind}: {numbers} ({delta}, {within})."


def rerun_why(w: RerunWhy) -> str:
    """Why the verify policy asked for a rerun (from the verify event's numbers)."""
    if w.kind == WhyKind.WARM_CHECK:
        return (
            f"first-run change {fmt.change(w.change or 0.0)} vs {w.baseline} exceeds the surprise "
            f"threshold {w.surprise or 0.0:.0%} with {w.arm} the slower arm: a warm rerun "
            "tests first-run JIT compile/warmup"
        )
    if w.kind == WhyKind.AA:
        return "A/A: the baseline again on a fresh server measures the server-to-server spread"
    if w.kind == WhyKind.UNDECIDED:
        cell = f"undecided ({cell_text(w.cell)}); " if w.cell is not None else ""
        if w.no_sigma:
            return (
                f"{cell}{w.arm}'s n limits the interval; no σ measured yet, so runs are "
                "needed to measure it"
            )
        return (
            f"{cell}{w.arm}'s n limits the interval; an optimistic estimate gives {w.max_runs} "
            f"runs per arm a {w.chance or 0.0:.0%} chance to settle it (the futility rule's "
            "input, not a prediction)"
        )
    if w.kind == WhyKind.INSTANCE_CHECK:
        return (
            f"first-run change {fmt.change(w.change or 0.0)} is surprising: a rerun on a freshly "
            "launched server tests whether the first server was odd"
        )
    if w.kind == WhyKind.SIGMA_REPLICATE:
        return (
            f"a fresh-server replicate so the pooled σ has {w.target_df} degrees of freedom "
            "(the analysis prefers fresh-server σ once one exists)"
        )
    if w.kind == WhyKind.UNSTABLE_LAUNCH:
        return (
            f"launches of `{fmt.user_plain(w.arm or '')}` disagree here by "
            f"{fmt.percent(w.change or 0.0)}, beyond run noise: one more launch tells which "
            "was odd"
        )
    if w.kind == WhyKind.FIXED_DESIGN:
        return (
            f"fixed design (verify.design: fixed): every cell {w.max_runs} times, each run on "
            "its own launch, whatever the data say"
        )
    if w.kind == WhyKind.BISECTION and w.bracket is not None:
        return (
            f"the geometric midpoint of the crossover bracket {w.axis} {fmt.x(w.bracket[0])}–"
            f"{fmt.x(w.bracket[1])}: a new cell at {fmt.x(w.x)} to narrow it"
        )
    return (
        f"brackets the crossover at {w.axis} {w.x or 0.0:g}: a second run so the bracket rests "
        "on more than one"
    )


def no_reruns(v: Verdict, max_runs: int | None, ingested: bool) -> str:
    """Why the log is empty, said plainly."""
    if ingested:
        return "The input files hold one run per cell and arm; nothing was rerun."
    if max_runs is not None and max_runs < 2:
        return "The spec allows one run per cell (verify.max_runs: 1), so the policy reran nothing."
    flagged = [c for _, _, c in v.comparisons() if c.surprise or c.verdict == "inconclusive"]
    if not flagged:
        return (
            "No cell was surprising (|change| above the surprise threshold) or "
            "undecided, so the verify policy had nothing to rerun."
        )
    return (
        f"{plural(len(flagged), 'cell')} {'was' if len(flagged) == 1 else 'were'} surprising "
        "or undecided, but no rerun was "
        "recorded (reruns disabled, budget spent, or the run stopped before stage 2)."
    )


# ------------------------------------------------------------------------------ the run

HARDWARE_SKIPPED = "skipped: engine.check_hardware is false in the spec (hardware not verified)"
NO_SERVERS = "No server instances are recorded in env.json."
SUSPECT_STATUS = "**suspect**: its speed does not count"


def servers_dropped(n: int) -> str:
    return f"{n} server instances were recorded in env.json."


def simulation(
    scales: Sequence[float],
    stream: int | None,
    slow_engine: Sequence[float],
    slow_writes: Sequence[float],
) -> str:
    """The SIMULATED banner: the speed-up, the stream interval, and where the simulator's own
    timing strayed from its model (`run_sections.simulator_lag`)."""
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


def reproduce_seed(seed: str) -> str:
    """What the first command reproduces of a rehearsal, and what it cannot."""
    return (
        f"The simulator's noise is seeded (`rehearsal.seed`: `{fmt.user_plain(seed)}`; each "
        "launch's seed follows from it and the launch's order), so the first command draws "
        "the same noise again. The host's timing jitter still moves each number a little, "
        "and where a cell sits near its margin it can move that verdict and the reruns the "
        "policy picks. Another `rehearsal.seed` draws another sample of the same noise."
    )


def hardware_sentence(check: Any) -> str | None:
    """The runner's hardware gate result as one sentence; an override is said in bold."""
    if not isinstance(check, dict):
        return None if check is None else str(check)
    message = str(check.get("message") or "").rstrip(".")
    if check.get("overridden"):
        found = str(check.get("finding") or message)  # not the "what to do" half: it was done
        return f"**overridden**: {found}; the run went ahead anyway (--ignore-hardware)"
    if check.get("ok"):
        return f"passed: {message}" if message else "passed"
    return message or None


def cache_flushes(events: Sequence[Mapping[str, Any]]) -> str:
    """What the run did about the server's prefix cache before each cell, from events.jsonl
    (every arm gets the same prompts, so a warm cache would flatter whoever runs second)."""
    flushes = [e for e in events if e.get("event") == "flush_cache"]
    if not flushes:
        return "no flush recorded"
    done = sum(1 for e in flushes if e.get("ok"))
    if done == len(flushes):
        return f"flushed before every cell ({done} flushes)"
    why = next((str(e["why"]) for e in flushes if not e.get("ok") and e.get("why")), "")
    return f"flushed before {done} of {len(flushes)} cells" + (f" ({why})" if why else "")


def warmup_text(warmup: int | str, client: str = "builtin") -> str:
    """The workload table's warm-up row. bench_serving's warm-up is copies of the cell's first
    request; matrixrun has it flush between warm-up and measurement (`--flush-cache`), so the
    measured first request is no cache hit."""
    if client == "bench_serving" and warmup not in (0, "cell"):
        return (
            f"{warmup} unmeasured copies of the cell's first request (bench_serving's warm-up), "
            "then a cache flush"
        )
    if warmup == "cell":
        return (
            "an unmeasured copy of each cell before it (as many requests, at its concurrency "
            "and lengths, other prompts)"
        )
    return f"{warmup} unmeasured request(s) before each cell"


def workload(facts: SpecFacts) -> list[tuple[str, str]]:
    w = facts.workload
    if w.num_prompts is not None:
        prompts = f"{w.num_prompts} per cell"
    elif w.duration is not None:
        prompts = f"as many as fit in {fmt.seconds(w.duration)} per cell"
    else:
        prompts = f"{w.prompts_per_concurrency} × concurrency per cell (at least {w.min_prompts})"
    rate = "inf (all at once)" if w.request_rate is None else f"{fmt.x(w.request_rate)} req/s"
    prompts_as = (
        f"{w.dataset} text of exactly input_len tokens of the model's tokenizer (random token "
        "ids decoded)"
        if w.prompt_format == "text"
        else f"{w.dataset} token ids"
    )
    rows = [
        (
            "dataset",
            prompts_as + ("" if w.range_ratio == 1 else f", range ratio {fmt.x(w.range_ratio)}"),
        ),
        ("input / output length", f"{w.input_len} / {w.output_len} tokens"),
        ("request rate", rate),
        ("prompts", prompts),
        ("warmup", warmup_text(w.warmup_requests, facts.client)),
        ("seed", str(w.seed)),
    ]
    if w.strict_openai:
        rows.append(
            (
                "requests",
                "OpenAI completions fields only (no ignore_eos): outputs run to the asked "
                "length only where the model does not stop; short ones are listed below",
            )
        )
    return rows


def ingest_caveat(c: Mapping[str, Any]) -> str:
    """One sentence before an ingested run's verdict for what its files limit (kinds from
    ingest/formats/checks.py); an unknown kind is shown as its name, never dropped."""
    kind = c.get("kind")
    if kind == "differs":
        values = "; ".join(
            f"`{arm}`: {', '.join(str(v) for v in vs)}"
            for arm, vs in (c.get("values") or {}).items()
        )
        what = str(c.get("field", "?")).replace("-", " ")
        return (
            f"the arms differ in {what} ({values}), compared anyway as asked "
            f"(--allow-difference): a difference below may come from the {what}, not from "
            "the server configuration."
        )
    if kind == "spec_decode":
        shown = ", ".join(f"`{arm}` ({why})" for arm, why in (c.get("arms") or {}).items())
        return (
            f"speculative decoding in {shown}: each streamed chunk carries several accepted "
            "tokens, so the gaps between chunks are not per-token inter-token latency; ITL "
            "is left out of this comparison, TPOT (time per output token) is kept."
        )
    if kind == "one_arm_points":
        points = "; ".join(
            f"{p} (only {', '.join(f'`{a}`' for a in arms)})"
            for p, arms in (c.get("points") or {}).items()
        )
        return f"points not every arm ran, with nothing to compare them with: {points}."
    return f"{kind}: see ingest.json."


def failed_requests(arm: str, where: str, attempt: int, failed: int, total: int) -> str:
    return (
        f"`{arm}` at {where}, attempt {attempt}: {failed} of {total} requests failed "
        f"({fmt.share(failed / total)}); its metrics are over the successful ones"
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


def client_bound(
    arm: str, where: str, attempt: int, check: dict[str, Any], processes: int = 1
) -> str:
    from matrixrun.load.selfcheck import worst

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


def ingested_title(candidates: Sequence[str], baseline: str) -> str:
    return f"{' vs '.join(candidates)} against {baseline} (ingested)"


def compare_title(a: str, b: str) -> str:
    return f"{b} against {a} (two runs compared)"


def compared(a: str, b: str, arms: Sequence[str], dirs: Sequence[str] = ()) -> str:
    where = f" (`{a}` is {dirs[0]}, `{b}` is {dirs[1]})" if len(dirs) == 2 else ""
    return (
        f"Built with `matrixrun compare` from two run directories{where}: each arm of `{b}` is "
        f"judged against the arm of the same name in `{a}` (the baseline), one slice per arm "
        f"({', '.join(f'`{x}`' for x in arms)})."
    )
