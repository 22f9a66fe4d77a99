"""The verdict document's data: a run directory in, a plain dict for `templates/verdict.md.j2` out.

`read_inputs` is the only function here that touches files (spec.yaml or settings.json,
plan.json, env.json, events.jsonl, results.jsonl, ingest.json); `context_from` and everything it
calls are pure functions of that data and the `Verdict`, so they are tested on synthetic runs and
a template needs no arithmetic, only loops over pre-formatted strings. Every number printed comes
from the measurements, the verdict or env.json: nothing here estimates or rounds a claim upwards.

Wording rules (issue 6): a sentence says "better"/"worse" only from a confident cell verdict,
inconclusive cells say what would settle them, provisional (n = 1) verdicts say so, and a
simulated run says SIMULATED in the headline with the simulator's time scale.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matrixrun.analysis import WarmupGap, analyse, confirmed_warmup, format_change
from matrixrun.measurement import Measurement
from matrixrun.metrics import higher_is_better, unit
from matrixrun.plan import Plan
from matrixrun.results import RunDir
from matrixrun.spec import FlagValue, Spec
from matrixrun.verdict import ArmSample, Cell, Rerun, Series, Verdict

MINUS = "\u2212"
#: GitHub's limit on one comment's body, in characters.
COMMENT_LIMIT = 65_536

#: Effective server args that differ between instances for reasons nobody asked about but that
#: do not change what is measured: where the server listens and random seeds (matched as
#: substrings), and the simulator's own state and profile (`sim_*`, profile name).
IGNORED_ARG_PARTS = ("port", "host", "seed", "url")
IGNORED_ARG_KEYS = frozenset({"profile", "pid", "log_file", "served_model_name_suffix"})
IGNORED_ARG_PREFIXES = ("sim_",)

_REASON_WORDS = {
    "first": "first run",
    "surprise": "surprising change",
    "inconclusive": "inconclusive cell",
    "crossover": "crossover bracket",
    "fresh_server": "fresh-server check",
    "aa": "A/A (baseline against itself)",
    "manual": "repeat found in the input (reason not recorded)",
}

_CLIENT_WORDS = {
    "builtin": "matrixrun's built-in streaming client (metric definitions as sglang.bench_serving)",
    "bench_serving": "`python -m sglang.bench_serving` (its --output-file parsed)",
    "vllm": "`vllm bench serve` (its --save-result JSON parsed; see docs/ingest.md)",
    "guidellm": "guidellm (its JSON report parsed; see docs/ingest.md)",
    "aiperf": "aiperf (its profile_export_aiperf.json parsed; see docs/ingest.md)",
}


# ------------------------------------------------------------------------------ reading (I/O)


@dataclass(frozen=True)
class RunInputs:
    """Everything the document is made from, read once from the run directory."""

    run_dir: str
    measurements: list[Measurement]
    settings: Any  # AnalysisSettings (typed loosely to keep this dataclass import-light)
    spec: Spec | None = None
    spec_sha: str | None = None
    plan: Plan | None = None
    env: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    ingest: dict[str, Any] | None = None


def _optional_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def display_path(path: Path) -> str:
    """The run directory as a reader can use it: from `runs/` on when it lies under one
    (so a report does not leak /home/...), else as given."""
    parts = path.parts
    if "runs" in parts:
        index = len(parts) - 1 - parts[::-1].index("runs")
        return str(Path(*parts[index:]))
    return str(path)


def read_inputs(rd: RunDir) -> RunInputs:
    """Read a run directory (spec-driven or ingested). Missing optional files are empty."""
    from matrixrun.report import settings_of

    spec: Spec | None = None
    plan: Plan | None = None
    sha: str | None = None
    spec_file = rd.path / "spec.yaml"
    if spec_file.exists():
        from matrixrun.spec import parse_spec

        spec = parse_spec(spec_file.read_text(), str(spec_file))
        plan = Plan.model_validate(rd.read_json("plan.json"))
        sha_file = rd.path / "spec.sha256"
        sha = sha_file.read_text().strip() if sha_file.exists() else None
    env = _optional_json(rd.path / "env.json")
    ingest = _optional_json(rd.path / "ingest.json")
    return RunInputs(
        run_dir=display_path(rd.path),
        measurements=rd.measurements(),
        settings=settings_of(rd),
        spec=spec,
        spec_sha=sha,
        plan=plan,
        env=env if isinstance(env, dict) else {},
        events=rd.events(),
        ingest=ingest if isinstance(ingest, dict) else None,
    )


def build_context(rd: RunDir) -> dict[str, Any]:
    """The template context of a run directory (what `report.render_run_dir` renders)."""
    inputs = read_inputs(rd)
    return context_from(inputs, analyse(inputs.measurements, inputs.settings))


# ------------------------------------------------------------------------------ formatting


def fmt_value(value: float | None) -> str:
    """4 significant digits, thousands separated, never scientific: 1603.04 → '1,603',
    515.58 → '515.6', 0.01234 → '0.01234'."""
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    exp = math.floor(math.log10(abs(value)))
    decimals = max(0, 3 - exp)
    return f"{round(value, 3 - exp):,.{decimals}f}".replace("-", MINUS)


def fmt_exact(value: float | None) -> str:
    """A value with 5 significant digits: for setting two close numbers side by side (a rerun
    against its first run: 515.77 vs 515.58), where 4 digits could hide the difference."""
    if value is None or not math.isfinite(value):
        return "n/a" if value is None else str(value)
    if value == 0:
        return "0"
    decimals = max(0, 4 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def fmt_x(value: Any) -> str:
    """A sweep value: integers without '.0', infinity as 'inf'."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        if value.is_integer():
            return str(int(value))
        return f"{value:g}"
    return str(value)


def fmt_seconds(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:,.1f} s"


def fmt_approx(value: float) -> str:
    """An interpolated estimate, shown with two significant digits (it is only an estimate)."""
    return f"{float(f'{value:.2g}'):g}"


def cli_flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def flag_text(value: FlagValue | object) -> str:
    if value is True:
        return "(set)"
    if value is False or value is None:
        return "(unset)"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return fmt_x(value)


def args_text(flags: Mapping[str, Any]) -> str:
    """Flags as the engine's command line shows them: {tp: 8, x: true} → '--tp 8 --x'."""
    parts = []
    for key, value in flags.items():
        if value is False or value is None:
            continue
        parts.append(cli_flag(key) if value is True else f"{cli_flag(key)} {flag_text(value)}")
    return " ".join(parts)


def join_words(items: Sequence[str]) -> str:
    """'1', '1 and 2', '1, 2 and 3'."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def table_cell(text: str) -> str:
    """Text that is safe inside a GFM table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def shorten(text: str, limit: int = 400) -> str:
    """One line of at most `limit` characters, keeping both ends: an error's head says what
    failed and its tail (the server log's last lines) usually says why."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return text[:half] + " … " + text[-half:]


# ------------------------------------------------------------------------------ headline


def hardware_sentence(check: Any) -> str | None:
    """The runner's hardware gate result as one sentence; an override is said in bold."""
    if not isinstance(check, dict):
        return None if check is None else str(check)
    message = str(check.get("message") or "").rstrip(".")
    if check.get("overridden"):
        message = message.split("; ")[0]  # drop the "what to do" half: it was done
        return f"**overridden**: {message}; the run went ahead anyway (--ignore-hardware)"
    if check.get("ok"):
        return f"passed: {message}" if message else "passed"
    return message or None


def simulation_of(
    measurements: Sequence[Measurement], spec: Spec | None, env: Mapping[str, Any]
) -> dict[str, Any] | None:
    """None unless some measurement is simulated; else the time scale(s) and stream interval
    the report must state."""
    simulated = [m for m in measurements if m.simulated]
    if not simulated and not env.get("simulated"):
        return None
    scales = sorted({m.time_scale for m in simulated}) or [float(env.get("time_scale") or 1.0)]
    stream = spec.rehearsal.stream_interval if spec is not None else None
    note = spec.rehearsal.note if spec is not None else None
    if note and not note.rstrip().endswith((".", "!", "?")):
        note = note.rstrip() + "."
    if scales == [1.0]:
        speed = "the simulator ran in real time"
    else:
        speed = (
            "the simulator ran "
            + " / ".join(f"{fmt_x(s)}×" for s in scales)
            + " faster; times converted back"
        )
    text = f"measured on matrixrun's simulator, not on GPUs: {speed}"
    if stream:
        text += f"; it streamed {stream} tokens per event (rehearsal.stream_interval)"
    slow_engine, slow_writes = simulator_lag(simulated)
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
    return {
        "time_scales": [fmt_x(s) for s in scales],
        "stream_interval": stream,
        "note": note,
        "text": text + ".",
    }


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


def headline(verdict: Verdict) -> list[dict[str, Any]]:
    """One sentence per candidate, from the verdict engine's overall verdict (primary metric)."""
    base = verdict.settings.baseline
    suspects = {c.candidate for s in verdict.slices for c in s.candidates if c.suspect}
    out = []
    for cand, ov in verdict.overall.items():
        out.append(
            {
                "candidate": cand,
                "baseline": base,
                "verdict": ov.verdict,
                "provisional": ov.provisional,
                "suspect": cand in suspects,
                "sentence": ov.sentence,
            }
        )
    return out


# ------------------------------------------------------------------------------ setup


def arm_differences(spec: Spec) -> dict[str, Any]:
    """The flags (and launch prefixes, environment variables) in which arms differ — only
    those; what all arms share belongs to the common args."""
    arms = [spec.baseline_arm, *spec.candidate_arms]
    rows: list[dict[str, Any]] = []
    keys = list(dict.fromkeys(k for a in arms for k in spec.arms[a].flags))
    common: dict[str, Any] = {}
    for key in keys:
        values = [spec.arms[a].flags.get(key) for a in arms]
        if all(v == values[0] for v in values):
            common[key] = values[0]
            continue
        rows.append({"name": f"`{cli_flag(key)}`", "values": [flag_text(v) for v in values]})
    launches = [spec.arms[a].launch or spec.engine.launch for a in arms]
    if any(x != launches[0] for x in launches):
        rows.append(
            {
                "name": "launch",
                "values": [" ".join(x) if x else "(engine default)" for x in launches],
            }
        )
    env_keys = list(dict.fromkeys(k for a in arms for k in spec.arms[a].env))
    for key in env_keys:
        values = [spec.arms[a].env.get(key) for a in arms]
        if any(v != values[0] for v in values):
            rows.append({"name": f"env `{key}`", "values": [flag_text(v) for v in values]})
    return _with_table({"arms": arms, "rows": rows, "common": common}, spec.baseline_arm)


def _with_table(diff: dict[str, Any], baseline: str) -> dict[str, Any]:
    """Add the rendered table (header, escaped rows) to an arm-difference dict."""
    diff["header"] = [
        "flag",
        *(f"`{a}`" + (" (baseline)" if a == baseline else "") for a in diff["arms"]),
    ]
    diff["table"] = [[table_cell(x) for x in [r["name"], *r["values"]]] for r in diff["rows"]]
    return diff


def _ignored_arg(key: str, asked: set[str]) -> bool:
    k = key.lower()
    return (
        key in asked
        or k in IGNORED_ARG_KEYS
        or any(p in k for p in IGNORED_ARG_PARTS)
        or k.startswith(IGNORED_ARG_PREFIXES)
    )


def effective_arg_differences(
    servers: Mapping[str, Mapping[str, Any]], arms: Sequence[str], asked: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """Effective server args (env.json servers[*].args, as the engine reported them) that
    differ between arms within one slice, in anything not `asked` for: keys the arms' flags or
    the server axes set, ports/hosts and seeds are expected to differ. Each entry: slice, key,
    and the values seen per arm (several when an arm's instances disagree)."""
    asked_set = set(asked)
    by_slice: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for info in servers.values():
        arm = info.get("arm")
        if not isinstance(arm, str) or not isinstance(info.get("args"), dict):
            continue
        by_slice.setdefault(str(info.get("slice") or ""), {}).setdefault(arm, []).append(
            info["args"]
        )
    out: list[dict[str, Any]] = []
    for slice_name, per_arm in by_slice.items():
        present = [a for a in arms if a in per_arm]
        if len(present) < 2:
            continue
        keys = sorted({k for a in present for args in per_arm[a] for k in args})
        for key in keys:
            if _ignored_arg(key, asked_set):
                continue
            seen = {
                a: sorted(
                    {json.dumps(args.get(key), sort_keys=True, default=str) for args in per_arm[a]}
                )
                for a in present
            }
            if all(v == seen[present[0]] for v in seen.values()):
                continue
            out.append(
                {
                    "slice": slice_name,
                    "key": key,
                    "values": [" / ".join(_arg_value(v) for v in seen[a]) for a in present],
                    "arms": present,
                }
            )
    return out


def _arg_value(dumped: str) -> str:
    value = json.loads(dumped)
    return "(absent)" if value is None else flag_text(value)


def _asked_keys(spec: Spec) -> set[str]:
    keys = {k for arm in spec.arms.values() for k in arm.flags}
    keys |= set(spec.sweep.server)
    keys |= {k for hw in spec.hardwares for k in hw.args}
    return keys


def setup_of(spec: Spec, plan: Plan | None, measurements: Sequence[Measurement]) -> dict[str, Any]:
    """Model(s), hardware, engine, workload and client, as the spec asked for them."""
    w = spec.workload
    if w.num_prompts is not None:
        prompts = f"{w.num_prompts} per cell"
    elif w.duration is not None:
        prompts = f"as many as fit in {fmt_seconds(w.duration)} per cell"
    else:
        prompts = f"{w.prompts_per_concurrency} × concurrency per cell (at least {w.min_prompts})"
    rate = "inf (all at once)" if math.isinf(w.request_rate) else f"{fmt_x(w.request_rate)} req/s"
    workload = [
        (
            "dataset",
            f"{w.dataset} token ids"
            + ("" if w.range_ratio == 1 else f", range ratio {fmt_x(w.range_ratio)}"),
        ),
        ("input / output length", f"{w.input_len} / {w.output_len} tokens"),
        ("request rate", rate),
        ("prompts", prompts),
        ("warmup", f"{w.warmup_requests} unmeasured request(s) before each cell"),
        ("seed", str(w.seed)),
    ]
    sweep = [
        f"{axis} {', '.join(fmt_x(v) for v in values)}"
        for axis, values in spec.axis_values().items()
        if len(values) > 1 and axis not in ("model", "hardware")
    ]
    clients = sorted({m.client for m in measurements}) or [spec.engine.client]
    diffs = arm_differences(spec)
    common = {**spec.engine.args, **diffs["common"]}
    return {
        "models": [
            f"`{m.label}` ({m.path}" + (f", {m.quantization}" if m.quantization else "") + ")"
            for m in spec.models
        ],
        "hardware": [
            f"`{h.label}`: {h.count}× {h.gpu}"
            + (f" (compute capability {h.compute_capability})" if h.compute_capability else "")
            + (f", args `{args_text(h.args)}`" if h.args else "")
            for h in spec.hardwares
        ],
        "engine": spec.engine.kind,
        "common_args": args_text(common),
        "launch": " ".join(spec.engine.launch) if spec.engine.launch else None,
        "workload": workload,
        "sweep": sweep or ["(a single point)"],
        "client": "; ".join(_CLIENT_WORDS.get(c, c) for c in clients),
        "metrics": {"primary": spec.metrics.primary, "secondary": list(spec.metrics.secondary)},
        "arm_diff": diffs,
        "cells": plan.cost.cells if plan is not None else None,
    }


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


def ingested_setup(
    measurements: Sequence[Measurement], settings: Any, ingest: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What bench_serving files say about themselves: workload fields, backend, versions."""

    def seen(key: str) -> str:
        values = list(
            dict.fromkeys(
                fmt_x(m.extra.get(key)) for m in measurements if m.extra.get(key) is not None
            )
        )
        return ", ".join(values) if values else "not recorded"

    return {
        "files": list(ingest.get("files", [])) if ingest else [],
        "workload": [
            ("dataset", seen("dataset_name")),
            (
                "input / output length",
                f"{seen('random_input_len')} / {seen('random_output_len')} tokens",
            ),
            ("request rate", seen("request_rate")),
            ("bench_serving backend", seen("backend")),
            ("server version", seen("server_version")),
        ],
        "client": "; ".join(
            _CLIENT_WORDS.get(c, c) for c in dict.fromkeys(m.client for m in measurements)
        ),
        "metrics": {"primary": settings.primary, "secondary": list(settings.secondary)},
    }


# ------------------------------------------------------------------------------ tables


def _sample_text(sample: ArmSample) -> str:
    if sample.n == 0:
        text = "failed" if sample.failed_measurements else "n/a"
    else:
        text = fmt_value(sample.mean)
    if sample.failed_requests:
        text += f" ({sample.failed_requests}/{sample.total_requests} req failed)"
    if sample.failed_measurements and sample.n:
        text += f" ({sample.failed_measurements} run(s) failed)"
    return text


def _verdict_words(cell: Cell) -> str:
    """What an undecided cell needs, in words (never 'better' for an inconclusive cell)."""
    parts = []
    if cell.small_change:
        parts.append("a change exists but is below the margin or not yet shown to exceed it")
    if cell.runs_needed is not None:
        who = {
            "baseline": "of the baseline",
            "candidate": "of the candidate",
            "both": "per arm",
        }.get(cell.limiting_arm or "both", "per arm")
        parts.append(f"about {cell.runs_needed} runs {who} would settle it")
    elif cell.d is not None and "no noise estimate" not in cell.notes:
        parts.append("the change sits on the margin: more runs alone may not settle it")
    parts += [n for n in cell.notes if "small change" not in n]
    return "; ".join(parts)


def _regime_sentence(series: Series, axis: str, margin: float) -> str:
    """'inconclusive at 1, better at 10 and 64, worse at 256 and 1024; crossover between 64
    and 256, ≈ 95 interpolated in log concurrency' — along the axis, from the cell verdicts."""
    x_of = {c.point_id: c.x for c in series.cells}
    parts = []
    for r in series.regimes:
        xs = join_words([fmt_x(x_of[p]) for p in r.point_ids if x_of.get(p) is not None])
        word = {"same": f"the same within ±{100 * margin:g}%"}.get(r.verdict, r.verdict)
        parts.append(f"{word} at {xs}" if xs else f"{word} at {len(r.point_ids)} point(s)")
    text = f"Along {axis}: " + ", ".join(parts)
    if series.non_monotone:
        text += "; the sign changes more than once among confident cells: non-monotone, re-measure"
    else:
        for c in series.crossovers:
            text += f"; crossover between {fmt_x(c.x_lo)} and {fmt_x(c.x_hi)}"
            if c.estimate is not None:
                text += f", ≈ {fmt_approx(c.estimate)} interpolated in log {axis}"
    return text + "."


def _fixed_label(fixed: Mapping[str, Any], varying: set[str]) -> str:
    return " · ".join(f"{k} {fmt_x(v)}" for k, v in sorted(fixed.items()) if k in varying)


def metric_tables(
    verdict: Verdict, metric: str, slice_labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One table per (slice, candidate, series) for `metric`: the sweep value first, then
    baseline, candidate, change (candidate / baseline − 1) and the benchstat-style verdict."""
    settings = verdict.settings
    axis = settings.axis
    out: list[dict[str, Any]] = []
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = next((m for m in cand.metrics if m.metric == metric), None)
            if mr is None:
                continue
            fixed_keys = [set(s.fixed.items()) for s in mr.series]
            varying = {
                k
                for s in mr.series
                for k, v in s.fixed.items()
                if any((k, v) not in f for f in fixed_keys)
            }
            u = f" ({mr.unit})" if mr.unit else ""
            for index, series in enumerate(mr.series):
                rows = []
                undecided: dict[str, list[str]] = {}  # what would settle it -> sweep values
                for c in series.cells:
                    x = fmt_x(c.x) if c.x is not None else _fixed_label(c.point, set(c.point))
                    rows.append(
                        [
                            x,
                            _sample_text(c.baseline),
                            _sample_text(c.candidate),
                            "n/a" if c.change is None else format_change(c.change),
                            c.text,
                        ]
                    )
                    if c.verdict == "inconclusive":
                        undecided.setdefault(_verdict_words(c), []).append(x)
                out.append(
                    {
                        "slice": sl.slice,
                        "slice_label": slice_labels.get(sl.slice, sl.slice),
                        "candidate": cand.candidate,
                        "suspect": cand.suspect,
                        "series_label": _fixed_label(series.fixed, varying),
                        "metric": metric,
                        "header": [
                            axis,
                            f"`{settings.baseline}`{u}",
                            f"`{cand.candidate}`{u}",
                            "change",
                            "verdict",
                        ],
                        "rows": [[table_cell(v) for v in row] for row in rows],
                        "regimes": _regime_sentence(series, axis, settings.margin),
                        "undecided": [
                            f"at {axis} {join_words(xs)}: {words}"
                            for words, xs in undecided.items()
                        ],
                        # The slice's verdict on this metric, once, under its last table.
                        "overall": mr.overall.sentence if index == len(mr.series) - 1 else "",
                    }
                )
    return out


def group_tables(
    tables: Sequence[dict[str, Any]], verdict: Verdict, slice_labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Tables grouped by slice (in the verdict's order), for one heading per slice."""
    out = []
    several = len(verdict.slices) > 1
    for sl in verdict.slices:
        mine = [t for t in tables if t["slice"] == sl.slice]
        if mine:
            label = slice_labels.get(sl.slice, sl.slice) if several else ""
            out.append({"slice": sl.slice, "label": label, "tables": mine})
    return out


def slice_labels_of(plan: Plan | None, verdict: Verdict) -> dict[str, str]:
    """Slice label → a heading: the plan's model, hardware and server axes when known."""
    labels = {s.slice: s.slice for s in verdict.slices}
    if plan is not None:
        for info in plan.slices:
            parts = [f"model `{info.model}`", f"hardware `{info.hardware}`"]
            parts += [f"`{cli_flag(k)} {flag_text(v)}`" for k, v in info.server_axes.items()]
            labels[info.label] = ", ".join(parts)
    return labels


# ------------------------------------------------------------------------------ σ


def sigma_of(verdict: Verdict) -> dict[str, Any]:
    s = verdict.settings
    if s.looks > 1:
        if s.spending == "equal":
            level = (
                f"{100 * s.confidence:g}% confidence over {s.looks} planned looks "
                f"(Bonferroni): each interval is a {100 * verdict.level:.4g}% interval"
            )
        else:
            levels = ", ".join(f"{100 * s.level_at(k):.4g}%" for k in range(1, s.looks + 1))
            level = (
                f"{100 * s.confidence:g}% confidence over {s.looks} planned looks "
                f"(α split over each cell's data states, more to later ones): a cell's "
                f"interval is at {levels} after 0, 1, 2… stage-2 rounds gave it runs"
            )
    else:
        level = f"{100 * verdict.level:.4g}% confidence (one look)"
    return {
        "metrics": [
            {
                "metric": x.metric,
                "text": x.text,
                "source": x.source,
                "primary": x.metric == s.primary,
            }
            for x in verdict.sigma
        ],
        "level": level,
        "margin": f"±{100 * s.margin:g}%",
        "multiplicity": verdict.multiplicity,
        "warnings": list(verdict.warnings),
    }


# ------------------------------------------------------------------------------ reruns


def verify_whys(
    events: Sequence[Mapping[str, Any]], measurements: Sequence[Measurement]
) -> dict[tuple[str, int], str]:
    """(cell id, attempt) → the `why` of the verify event that asked for that rerun: the k-th
    verify event of a cell with a reason matches the k-th rerun of that cell with it."""
    queue: dict[tuple[str, str], list[str]] = {}
    for e in events:
        if e.get("event") == "verify" and e.get("cell"):
            queue.setdefault((str(e["cell"]), str(e.get("reason"))), []).append(
                str(e.get("why") or "")
            )
    out: dict[tuple[str, int], str] = {}
    for m in sorted(measurements, key=lambda m: (m.cell_id, m.attempt)):
        pending = queue.get((m.cell_id, m.reason))
        if m.reason != "first" and pending:
            why = pending.pop(0)
            if why:
                out[(m.cell_id, m.attempt)] = why
    return out


def _effect_word(d: float | None, metric: str) -> str:
    if d is None:
        return "change"
    if higher_is_better(metric):
        return "speed-up" if d > 0 else "slowdown"
    return "improvement" if d > 0 else "regression"


def rerun_entries(
    verdict: Verdict, measurements: Sequence[Measurement], events: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Every rerun of the primary metric (analysis.reruns), with why it was run and what it
    showed: the explanation it tested, confirmed / falsified / not settled (`rerun_test`)."""
    settings = verdict.settings
    metric, axis = settings.primary, settings.axis
    u = unit(metric)
    margin_text = f"±{100 * settings.margin:g}%"
    whys = verify_whys(events, measurements)
    sigma = {s.metric: s.value for s in verdict.sigma}
    by_key = {(m.slice, m.point_id, m.arm, m.attempt): m for m in measurements}
    cells: dict[tuple[str, str, str], Cell] = {}
    for sl in verdict.slices:
        for result in sl.candidates:
            for series in result.metrics[0].series:
                for c in series.cells:
                    cells[(sl.slice, result.candidate, c.point_id)] = c
    out = []
    for r in verdict.reruns:
        m = by_key.get((r.slice, r.point_id, r.arm, r.attempt))
        # A baseline rerun belongs to every candidate's cell at that point: take the first.
        cand = (
            r.arm
            if r.arm != settings.baseline
            else next((c for (s, c, p) in cells if s == r.slice and p == r.point_id), "")
        )
        cell = cells.get((r.slice, cand, r.point_id))
        where = f"{axis} {fmt_x(r.point.get(axis, '?'))}"
        if r.slice:
            where += f" [{r.slice}]"
        test = rerun_test(
            r, cell, settings.baseline, settings.margin, settings.surprise, sigma.get(r.metric)
        )
        out.append(
            {
                "where": where,
                "arm": r.arm,
                "role": "baseline" if r.arm == settings.baseline else "candidate",
                "attempt": r.attempt,
                "reason": r.reason,
                "reason_text": _REASON_WORDS.get(r.reason, r.reason),
                "server": ("same warm server " if r.same_instance else "fresh server ")
                + f"`{r.instance}`",
                "why": shorten(whys.get((m.cell_id, r.attempt), "")) if m is not None else "",
                "showed": rerun_sentence(r, test, cell, where, u, margin_text, settings.baseline),
                "outcome": test.outcome,
                "cell_now": cell.text if cell is not None else "",
                "error": shorten(m.error) if m is not None and m.error else "",
            }
        )
    return out


@dataclass(frozen=True)
class RerunTest:
    """One explanation check, judged: what the rerun says about the story it was run to test.

    `alone` is the rerun set against the baseline on its own (candidate rerun / baseline mean
    − 1, or candidate mean / baseline rerun − 1): whether the effect survives without the
    first run, which is what "that first run/instance was odd" predicts it would not."""

    story: str  # "warmup" | "instance" | "" (a replicate, no story)
    outcome: str | None  # "confirmed" | "falsified" | "not settled" | None
    alone: float | None


def rerun_test(
    r: Rerun,
    cell: Cell | None,
    baseline: str,
    margin: float,
    surprise: float,
    sigma: float | None = None,
) -> RerunTest:
    """Judge a rerun (VERDICTS.md §6). A warm rerun tests first-run JIT/warmup, which predicts
    the rerun is better than the first run beyond the margin: within the margin (or worse)
    falsifies it; better beyond the margin confirms it only if also beyond what noise explains
    for one pair (`analysis.confirmed_warmup` with the run's σ), else it settles nothing. A
    fresh-server rerun tests "that instance was odd", which predicts the effect does not
    reproduce: the rerun on its own still beyond the surprise threshold, same sign, falsifies
    it; within the margin of the baseline confirms it; in between settles nothing.
    Inconclusive/crossover/A/A reruns are replicates and test no story."""
    alone: float | None = None
    if cell is not None and r.value is not None and cell.baseline.mean and cell.candidate.mean:
        if r.arm == baseline:
            alone = cell.candidate.mean / r.value - 1
        else:
            alone = r.value / cell.baseline.mean - 1
    if r.reason not in ("surprise", "fresh_server", "manual") or r.matches_first is None:
        return RerunTest("", None, alone)
    if r.same_instance:
        improved = r.change_vs_first is not None and (
            (r.change_vs_first > 0) == higher_is_better(r.metric)
        )
        if r.matches_first or not improved:
            return RerunTest("warmup", "falsified", alone)
        gain = WarmupGap(gap=abs(math.log1p(r.change_vs_first or 0.0)), pairs=1)
        settled = confirmed_warmup(gain, margin, sigma)
        return RerunTest("warmup", "confirmed" if settled else "not settled", alone)
    if alone is None or cell is None or cell.change is None:
        return RerunTest("instance", None, alone)
    if abs(alone) > surprise and (alone > 0) == (cell.change > 0):
        return RerunTest("instance", "falsified", alone)
    if abs(math.log1p(alone)) < math.log1p(margin):
        return RerunTest("instance", "confirmed", alone)
    return RerunTest("instance", "not settled", alone)


def rerun_sentence(
    r: Rerun, test: RerunTest, cell: Cell | None, where: str, u: str, margin: str, baseline: str
) -> str:
    """'the slowdown at concurrency 256 is not warmup: warm rerun 515.77 vs first run 515.58
    tok/s (+0.04%, within ±3%) — the JIT/warmup explanation is falsified.'"""
    if r.value is None or r.first_value is None:
        failed = "the rerun failed" if r.value is None else "the first run failed"
        return f"{failed}, so it shows nothing about the explanation."
    numbers = f"{fmt_exact(r.value)} vs first run {fmt_exact(r.first_value)} {u}".rstrip()
    delta = format_change(r.change_vs_first or 0.0, 2)
    within = f"within {margin}" if r.matches_first else f"beyond {margin}"
    effect = f"the {_effect_word(cell.d if cell else None, r.metric)} at {where}"
    alone = (
        f"; on its own the rerun gives {format_change(test.alone)} vs `{baseline}`"
        if test.alone is not None
        else ""
    )
    if test.story == "warmup":
        rerun = f"warm rerun {numbers} ({delta}, {within}{alone})"
        if test.outcome == "confirmed":
            return (
                f"the first run at {where} was held back: {rerun}, better than the first run "
                "beyond what noise explains — the JIT/warmup explanation is confirmed for that "
                "first run; both runs are kept and counted (whether a verdict rests on cold "
                "first runs is judged over all of the arm's repeats: see the caveats)."
            )
        if test.outcome == "not settled":
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
    if test.story == "instance":
        rerun = f"fresh server {numbers} ({delta}{alone})"
        if test.outcome == "falsified":
            return (
                f"{effect} is not an odd server instance: {rerun}, so the fresh server "
                "reproduces it — the odd-instance explanation is falsified."
            )
        if test.outcome == "confirmed":
            return (
                f"{effect} does not reproduce on a fresh server: {rerun} — the odd-instance "
                "explanation is confirmed."
            )
        return (
            f"{effect} reproduces only in part on a fresh server: {rerun} — the odd-instance "
            "explanation is neither confirmed nor falsified."
        )
    kind = "replicate on the same server" if r.same_instance else "replicate on a fresh server"
    return f"{kind}: {numbers} ({delta}, {within})."


def no_rerun_reason(verdict: Verdict, spec: Spec | None, ingested: bool) -> str:
    """Why the log is empty, said plainly."""
    if ingested:
        return "The input files hold one run per cell and arm; nothing was rerun."
    if spec is not None and spec.verify.max_runs < 2:
        return "The spec allows one run per cell (verify.max_runs: 1), so the policy reran nothing."
    cells = [
        c
        for sl in verdict.slices
        for cand in sl.candidates
        for series in cand.metrics[0].series
        for c in series.cells
    ]
    flagged = [c for c in cells if c.surprise or c.verdict == "inconclusive"]
    if not flagged:
        return (
            "No cell was surprising (|change| above the surprise threshold) or "
            "inconclusive, so the verify policy had nothing to rerun."
        )
    return (
        f"{len(flagged)} cell(s) were surprising or inconclusive, but no rerun was "
        "recorded (reruns disabled, budget spent, or the run stopped before stage 2)."
    )


# ------------------------------------------------------------------------------ failures


def failures_of(measurements: Sequence[Measurement], axis: str) -> dict[str, Any]:
    """Failed measurements (cell, arm, attempt, error) and cells with failed requests."""
    failed = []
    partial = []
    for m in measurements:
        where = f"{axis} {fmt_x(m.point.get(axis, '?'))}" + (f" [{m.slice}]" if m.slice else "")
        if not m.ok:
            failed.append(
                [
                    where,
                    f"`{m.arm}`",
                    str(m.attempt),
                    f"`{m.instance}`",
                    _REASON_WORDS.get(m.reason, m.reason),
                    table_cell(shorten(m.error or "no request completed")),
                ]
            )
        elif m.metrics is not None and m.metrics.failed:
            total = m.metrics.failed + m.metrics.completed
            partial.append(
                f"`{m.arm}` at {where}, attempt {m.attempt}: {m.metrics.failed} of "
                f"{total} requests failed ({100 * m.metrics.failed / total:.1f}%); "
                "its metrics are over the successful ones"
            )
    return {"measurements": failed, "requests": partial}


# ------------------------------------------------------------------------------ correctness


def correctness_of(verdict: Verdict) -> list[list[str]]:
    """Table rows (arm, agreement, floor, status) for candidates with a recorded agreement."""
    s = verdict.settings
    out: dict[str, list[str]] = {}
    for sl in verdict.slices:
        for c in sl.candidates:
            if c.correctness is not None:
                out[c.candidate] = [
                    f"`{c.candidate}`",
                    f"{100 * c.correctness:.1f}%",
                    f"{100 * s.correctness_min:g}%",
                    "**suspect**: its speed does not count" if c.suspect else "ok",
                ]
    return list(out.values())


# ------------------------------------------------------------------------------ environment


def environment_of(env: Mapping[str, Any], spec: Spec | None) -> dict[str, Any]:
    harness = env.get("harness") or {}
    facts = [
        ("harness", f"{harness.get('name', 'matrixrun')} {harness.get('version') or ''}".strip()),
        ("python", env.get("python")),
        ("platform", env.get("platform")),
        ("git", env.get("git_sha")),
        ("engine", env.get("engine") or (spec.engine.kind if spec else None)),
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
    gpu_lines = [
        f"{n}× {name} (driver {driver}, {memory})" for (name, driver, memory), n in gpus.items()
    ]
    check = hardware_sentence(env.get("hardware_check"))
    if check is None and spec is not None and not spec.engine.check_hardware:
        check = "skipped: engine.check_hardware is false in the spec (hardware not verified)"
    infos = {k: v for k, v in (env.get("servers") or {}).items() if isinstance(v, dict)}
    sliced = any(info.get("slice") for info in infos.values())
    header = ["server instance", "arm", *(["slice"] if sliced else []), "engine version", "startup"]
    servers = []
    for name, info in infos.items():
        startup = info.get("startup_s")
        servers.append(
            [
                f"`{name}`",
                f"`{info.get('arm', '?')}`",
                *([table_cell(str(info.get("slice") or "—"))] if sliced else []),
                table_cell(str(info.get("version") or "n/a")),
                fmt_seconds(float(startup)) if isinstance(startup, int | float) else "n/a",
            ]
        )
    variables = [f"`{k}={v}`" for k, v in sorted((env.get("env") or {}).items())]
    return {
        "facts": [(k, table_cell(str(v))) for k, v in facts if v],
        "gpus": gpu_lines,
        "hardware_check": check,
        "servers": servers,
        "servers_header": header,
        "servers_note": None if servers else "No server instances are recorded in env.json.",
        "variables": variables,
    }


# ------------------------------------------------------------------------------ reproduce


def spec_stem(run_dir: str, env: Mapping[str, Any], spec: Spec | None) -> str | None:
    """The spec file's stem: env.json's spec path if recorded, else the runs/<stem>/<id>
    layout the runner uses, else None (never guessed from the experiment name)."""
    recorded = env.get("spec_path")
    if isinstance(recorded, str) and recorded:
        return Path(recorded).stem
    parts = Path(run_dir).parts
    if len(parts) >= 3 and parts[0] == "runs":
        return parts[1].removesuffix(".rehearsal")
    return None  # unknown: the caller points at the run directory's own copy instead


def reproduce_of(inputs: RunInputs, simulated: bool) -> dict[str, Any]:
    commands = []
    if inputs.spec is not None:
        stem = spec_stem(inputs.run_dir, inputs.env, inputs.spec)
        spec_path = f"spec/{stem}.yaml" if stem else f"{inputs.run_dir}/spec.yaml"
        commands.append(f"nox -s matrix -- {spec_path}" + (" --rehearse" if simulated else ""))
    elif inputs.ingest and inputs.ingest.get("command"):
        commands.append(str(inputs.ingest["command"]))
    commands.append(f"matrixrun report {inputs.run_dir}")
    return {
        "commands": commands,
        "spec_copy": f"{inputs.run_dir}/spec.yaml" if inputs.spec is not None else None,
        "spec_sha": inputs.spec_sha,
        "files": list(inputs.ingest.get("files", [])) if inputs.ingest else [],
    }


# ------------------------------------------------------------------------------ the whole


def context_from(inputs: RunInputs, verdict: Verdict) -> dict[str, Any]:
    """The template context. Keys (all plain data, strings pre-formatted):

    title, run_dir, simulated, simulation, provisional, headline, ingested, hypothesis,
    setup, arm_diff, arg_warnings, baseline, candidates, several_candidates, axis, margin,
    primary, comparison, latency, latency_summary, sigma, reruns, no_reruns, failures,
    correctness, environment, reproduce, omitted, limit.

    `comparison` and `latency[*].slices` are lists of {slice, label, tables}; each table has
    header, rows (escaped cells, sweep value first), regimes, undecided and overall. The size
    budget in `report.render` trims this dict (never the data) and lists what it dropped in
    `omitted`.
    """
    spec, settings = inputs.spec, verdict.settings
    ms = inputs.measurements
    simulation = simulation_of(ms, spec, inputs.env)
    labels = slice_labels_of(inputs.plan, verdict)
    primary_tables = metric_tables(verdict, settings.primary, labels)
    if len(verdict.slices) == 1:  # the headline already says it
        for t in primary_tables:
            t["overall"] = ""
    latency = []
    for metric in settings.metrics[1:]:
        tables = metric_tables(verdict, metric, labels)
        if tables:
            better = "higher" if higher_is_better(metric) else "lower"
            latency.append(
                {
                    "metric": metric,
                    "unit": unit(metric),
                    "better": better,
                    "slices": group_tables(tables, verdict, labels),
                }
            )
    candidates = [c for c in verdict.overall]
    arms = [settings.baseline, *candidates]
    servers = inputs.env.get("servers") or {}
    asked = _asked_keys(spec) if spec is not None else set()
    arg_warnings = effective_arg_differences(servers, arms, asked) if spec is not None else []
    if spec is not None:
        setup: dict[str, Any] = setup_of(spec, inputs.plan, ms)
        setup["workload"].append(("prefix cache", cache_flushes(inputs.events)))
        arm_diff = setup["arm_diff"]
        title = spec.title
    else:
        setup = ingested_setup(ms, settings, inputs.ingest)
        diffs = effective_arg_differences(servers, arms)
        arm_diff = _with_table(
            {
                "arms": arms,
                "common": {},
                "rows": [
                    {"name": f"`{d['key']}`", "values": d["values"]}
                    for d in diffs
                    if d["arms"] == arms
                ],
            },
            settings.baseline,
        )
        title = f"{' vs '.join(candidates)} against {settings.baseline} (ingested)"
    reruns = rerun_entries(verdict, ms, inputs.events)
    return {
        "title": title,
        "run_dir": inputs.run_dir,
        "simulated": simulation is not None,
        "simulation": simulation,
        "provisional": any(h["provisional"] for h in headline(verdict)),
        "headline": headline(verdict),
        "ingested": spec is None,
        "hypothesis": " ".join(spec.hypothesis.split()) if spec and spec.hypothesis else None,
        "setup": setup,
        "arm_diff": arm_diff,
        "arg_warnings": arg_warnings,
        "baseline": settings.baseline,
        "candidates": candidates,
        "several_candidates": len(candidates) > 1,
        "axis": settings.axis,
        "margin": f"±{100 * settings.margin:g}%",
        "primary": {
            "metric": settings.primary,
            "unit": unit(settings.primary),
            "better": "higher" if higher_is_better(settings.primary) else "lower",
        },
        "comparison": group_tables(primary_tables, verdict, labels),
        "latency": latency,
        "latency_summary": [],
        "sigma": sigma_of(verdict),
        "reruns": reruns,
        "no_reruns": None if reruns else no_rerun_reason(verdict, spec, spec is None),
        "failures": failures_of(ms, settings.axis),
        "correctness": correctness_of(verdict),
        "environment": environment_of(inputs.env, spec),
        "reproduce": reproduce_of(inputs, simulation is not None),
        "omitted": [],
        "limit": COMMENT_LIMIT,
    }
