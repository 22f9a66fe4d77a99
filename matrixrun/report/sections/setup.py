"""The setup section: what the run was (model, hardware, engine, workload, sweep, client, metrics,
margin) or, for an ingested run, what its files say about themselves; the flags, launch
prefixes and environment variables the arms differ in, as the servers were given them
(`report.given`); and a warning where the servers' effective args differ in something the spec
did not ask for. Template: `templates/sections/setup.md.j2`."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from matrixrun.core.measurement import Measurement
from matrixrun.core.mooncake import BLOCK
from matrixrun.core.redact import redact_json
from matrixrun.core.units import format_duration
from matrixrun.core.verdict import (
    AnalysisSettings,
)
from matrixrun.plan import Plan, ServerGroup
from matrixrun.report import fmt
from matrixrun.report.given import given_of
from matrixrun.report.inputs import RunInputs, compared_pair
from matrixrun.report.section import Section
from matrixrun.report.sections.comparison import MetricHeading
from matrixrun.rundir.settings import RunSettings, SpecFacts

#: Effective server args that differ between instances for reasons nobody asked about but that
#: do not change what is measured: where the server listens and random seeds (matched as
#: substrings), and the simulator's own state and profile (`sim_*`, profile name).
IGNORED_ARG_PARTS = ("port", "host", "seed", "url")


IGNORED_ARG_KEYS = frozenset({"profile", "pid", "log_file", "served_model_name_suffix"})


IGNORED_ARG_PREFIXES = ("sim_",)


@dataclass
class DiffRow:
    name: str
    values: list[str]


@dataclass
class ArmDiff:
    """What the arms differ in (rows), what they share (common), and the rendered table."""

    arms: list[str]
    rows: list[DiffRow]
    common: str
    header: list[str]
    table: list[list[str]]


@dataclass
class ArgWarning:
    """An effective server arg that differs between arms though nobody asked for it."""

    slice: str
    key: str
    values: list[str]
    arms: list[str]


@dataclass
class Metrics:
    primary: str
    secondary: list[str]


@dataclass
class Setup:
    """The setup section: what the run was (spec-driven), or what its files say (ingested), or
    what a `matrixrun compare` directory compares (`compared`); what the arms differ in
    (`arm_diff`) and the effective args they differ in unasked (`warnings`). (Whether the
    hardware was simulated is the `simulation` section's part, which the partial reads.)"""

    workload: list[tuple[str, str]]
    client: str
    metrics: Metrics
    arm_diff: ArmDiff | None = None
    models: list[str] = field(default_factory=list)
    hardware: list[str] = field(default_factory=list)
    engine: str = ""
    common_args: str = ""
    launch: str | None = None
    sweep: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    cells: int | None = None
    #: `NAME=value` of the environment variables every server was given alike (engine.env and
    #: arms' env that agree), secrets masked; those the arms differ in are in `arm_diff`.
    env: list[str] = field(default_factory=list)
    #: built from benchmark result files (`matrixrun ingest`): the setup is what they record
    ingested: bool = False
    #: which way the primary metric is better ("higher"/"lower"), and every metric's margin
    better: str = ""
    margins: str = ""
    warnings: list[ArgWarning] = field(default_factory=list)
    #: what a `matrixrun compare` directory compares, in place of the setup list
    compared: str | None = None


def arm_differences(
    plan: Plan, facts: SpecFacts, given_by: Mapping[str, dict[str, str]]
) -> ArmDiff:
    """The flags (and launch prefixes, environment variables) in which arms differ — only
    those — as the servers were given them; and the common args (engine args and arm flags
    the arms share)."""
    arms = [plan.baseline, *plan.candidates]
    first: dict[str, ServerGroup] = {}
    for g in plan.groups:
        if g.slice == plan.groups[0].slice:
            first.setdefault(g.arm, g)
    groups = [first[a] for a in arms if a in first]
    given = [given_by[g.group_id] for g in groups]
    rows: list[DiffRow] = []
    common: list[str] = []
    for key in dict.fromkeys([*facts.engine_arg_keys, *facts.arm_flag_keys]):
        texts = [f.get(key) for f in given]
        if all(t == texts[0] for t in texts):
            if texts and texts[0] is not None:
                common.append(texts[0])
            continue
        if key not in facts.arm_flag_keys:
            continue
        name = next(t for t in texts if t is not None).split(" ", 1)[0]
        rows.append(DiffRow(f"`{name}`", [_value_of(t) for t in texts]))
    launches = [g.launch for g in groups]
    if any(x != launches[0] for x in launches):
        rows.append(DiffRow("launch", [" ".join(x) if x else "(engine default)" for x in launches]))
    for key in dict.fromkeys(k for g in groups for k in g.env):
        values = [g.env.get(key) for g in groups]
        if any(v != values[0] for v in values):
            rows.append(DiffRow(f"env `{key}`", [fmt.flag_value(v) for v in values]))
    return arm_diff([g.arm for g in groups], rows, " ".join(common), plan.baseline)


def arm_diff(arms: list[str], rows: list[DiffRow], common: str, baseline: str) -> ArmDiff:
    """The differences with their rendered table (header, escaped rows)."""
    header = ["flag", *(f"`{a}`" + (" (baseline)" if a == baseline else "") for a in arms)]
    table = [[fmt.table_cell(x) for x in [r.name, *r.values]] for r in rows]
    return ArmDiff(arms=arms, rows=rows, common=common, header=header, table=table)


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
) -> list[ArgWarning]:
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
    out: list[ArgWarning] = []
    for slice_name, per_arm in by_slice.items():
        present = [a for a in arms if a in per_arm]
        if len(present) < 2:
            continue
        for key in sorted({k for a in present for args in per_arm[a] for k in args}):
            if _ignored_arg(key, asked_set):
                continue
            seen = {
                a: sorted({json.dumps(x.get(key), sort_keys=True, default=str) for x in per_arm[a]})
                for a in present
            }
            if all(v == seen[present[0]] for v in seen.values()):
                continue
            values = [" / ".join(_arg_value(v) for v in seen[a]) for a in present]
            out.append(ArgWarning(slice=slice_name, key=key, values=values, arms=present))
    return out


# ------------------------------------------------------------------------------ words


CLIENT_WORDS = {
    "builtin": "matrixrun's built-in streaming client (metric definitions as sglang.bench_serving)",
    "bench_serving": "`python -m sglang.benchmark.serving` (its --output-file parsed)",
    "vllm": "`vllm bench serve` (its --save-result JSON parsed; see docs/ingest.md)",
    "guidellm": "guidellm (its JSON report parsed; see docs/ingest.md)",
    "aiperf": "aiperf (its profile_export_aiperf.json parsed; see docs/ingest.md)",
}


def _value_of(text: str | None) -> str:
    if text is None:
        return "(unset)"
    parts = text.split(" ", 1)
    return parts[1] if len(parts) > 1 else "(set)"


def _arg_value(dumped: str) -> str:
    value = json.loads(dumped)
    return "(absent)" if value is None else fmt.flag_value(value)


def shell_words(argv: Sequence[str]) -> str:
    """An argv as a shell would need it typed: a word with spaces, quotes or `;` (a `python3
    -c` program) is quoted, a `{placeholder}` is left as it reads, so the line copies into a
    terminal once the placeholders are filled in."""
    return " ".join(a if re.fullmatch(r"[\w@%+=:,./{}-]+", a) else shlex.quote(a) for a in argv)


def _hardware_line(group: ServerGroup, given: Mapping[str, str]) -> str:
    h = group.hardware
    args = " ".join(given[k] for k in h.args if k in given)
    # the label only where it says more than the default one (`1x NVIDIA H200`)
    named = f"`{h.label}`: " if h.label != f"{h.count}x {h.gpu}" else ""
    return (
        f"{named}{h.count}× {h.gpu}"
        + (f" (compute capability {h.compute_capability})" if h.compute_capability else "")
        + (f", args `{args}`" if args else "")
    )


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


def _limit(key: str, value: object) -> str:
    if value is None:
        return "no limit"
    return format_duration(float(str(value))) if key.endswith("budget") else str(value)


def extensions(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each resume that raised a verify limit (`amend` events, run/amend.py), as Setup states
    it: what changed, when, and that the run kept what it had measured — a reader must know
    the limits were raised after the first results, not planned."""
    out = []
    for e in events:
        changes = e.get("changes") if e.get("event") == "amend" else None
        if not isinstance(changes, list) or not changes:
            continue
        what = ", ".join(
            f"`{c.get('setting')}` {_limit(str(c.get('setting')), c.get('old'))} → "
            f"{_limit(str(c.get('setting')), c.get('new'))}"
            for c in changes
            if isinstance(c, dict)
        )
        when = str(e.get("t", ""))[:16].replace("T", " ")
        before = str(e.get("spec_sha256_before", ""))[:12]
        after = str(e.get("spec_sha256_after", ""))[:12]
        out.append(
            f"{what} on {when} UTC, by a resume: every earlier measurement kept, only the "
            f"runs the verify policy then asked for added (spec sha256 {before} → {after})"
        )
    return out


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


def workload(facts: SpecFacts, measurements: Sequence[Measurement] = ()) -> list[tuple[str, str]]:
    """Setup's workload rows. A random workload's lengths are the spec's; a dataset's are its
    own (the spec's input_len and output_len are not what a ShareGPT, trace or shared-prefix
    cell sends), so they are read off the measurements; a trace sets its own arrivals."""
    w = facts.workload
    if w.num_prompts is not None:
        prompts = f"{w.num_prompts} per cell"
    elif w.duration is not None:
        prompts = f"as many as fit in {fmt.seconds(w.duration)} per cell"
    else:
        prompts = f"{w.prompts_per_concurrency} × concurrency per cell (at least {w.min_prompts})"
    rate = "inf (all at once)" if w.request_rate is None else f"{fmt.x(w.request_rate)} req/s"
    if w.dataset == "trace":
        scale = "" if w.time_scale in (None, 1) else f" × {fmt.x(w.time_scale)}"
        rate = f"the trace's own schedule (its timestamps{scale})"
    lengths = f"{w.input_len} / {w.output_len} tokens"
    if w.dataset != "random":  # the spec's lengths are not what a dataset sends
        lengths = dataset_lengths(facts, measurements)
    rows = [
        ("dataset", dataset_words(facts)),
        ("input / output length", lengths),
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


def dataset_words(facts: SpecFacts) -> str:
    """What the cells sent, named so a reader can find it again: the kind, the file a
    ShareGPT or trace workload read, the shape of a generated shared prefix, and how the
    prompts went (token ids, or text)."""
    w = facts.workload
    text = w.prompt_format == "text"
    if w.dataset == "random":
        ratio = "" if w.range_ratio == 1 else f", range ratio {fmt.x(w.range_ratio)}"
        sent = (
            "text of exactly input_len tokens of the model's tokenizer (random token ids decoded)"
            if text
            else "token ids"
        )
        return f"random {sent}{ratio}"
    sent = f"sent as {'text' if text else 'token ids'}"
    if w.dataset == "sharegpt" and w.path:
        return (
            f"sharegpt, the file `{w.path}`: each conversation's first human turn as the "
            f"prompt, counted by the model's tokenizer ({sent})"
        )
    if w.dataset == "trace" and w.path:
        return (
            f"trace, the Mooncake-format file `{w.path}`: each request's lengths, arrival "
            f"time and shared {BLOCK}-token blocks (hash_ids) from it ({sent})"
        )
    if w.dataset == "shared_prefix" and w.shared_prefix:
        groups, per, system, question = w.shared_prefix
        return (
            f"shared_prefix: {groups} groups × {per} prompts, each group sharing a system "
            f"prompt of {system} tokens, then a question of {question} tokens ({sent})"
        )
    return f"{w.dataset} {'text' if text else 'token ids'}"  # settings from before these facts


def dataset_lengths(facts: SpecFacts, measurements: Sequence[Measurement]) -> str:
    """A dataset's lengths as its requests had them (the measurements' totals over their
    completed requests), and where the output length came from."""
    w = facts.workload
    done = [m.metrics for m in measurements if m.metrics is not None and m.metrics.completed]
    n = sum(m.completed for m in done)
    if not n:
        return "the dataset's own (nothing measured)"
    mean_in = sum(m.total_input_tokens for m in done) / n
    mean_out = sum(m.total_output_tokens for m in done) / n
    source = {
        "sharegpt": "output_len" if w.fixed_output else "each reply's length",
        "trace": "the trace's input_length / output_length",
        "shared_prefix": "system prompt + question / output_len",
    }.get(w.dataset, "the dataset's own")
    return (
        f"{fmt.x(round(mean_in, 1))} / {fmt.x(round(mean_out, 1))} tokens per request on "
        f"average, as sent ({source})"
    )


def compared(a: str, b: str, arms: Sequence[str], dirs: Sequence[str] = ()) -> str:
    where = f" (`{a}` is {dirs[0]}, `{b}` is {dirs[1]})" if len(dirs) == 2 else ""
    return (
        f"Built with `matrixrun compare` from two run directories{where}: each arm of `{b}` is "
        f"judged against the arm of the same name in `{a}` (the baseline), one slice per arm "
        f"({', '.join(f'`{x}`' for x in arms)})."
    )


# ------------------------------------------------------------------------------ the section


def setup_of(
    settings: RunSettings,
    plan: Plan,
    measurements: Sequence[Measurement],
    given_by: Mapping[str, dict[str, str]],
) -> Setup:
    """Model(s), hardware, engine, workload and client, as the run was set up."""
    facts = settings.spec
    assert facts is not None
    models = list({g.model.label: g.model for g in plan.groups}.values())
    hardware = {g.hardware.label: g for g in plan.groups}
    clients = sorted({m.client for m in measurements}) or [facts.client]
    diffs = arm_differences(plan, facts, given_by)
    a = settings.analysis
    return Setup(
        models=[
            f"`{m.label}` ({m.path}" + (f", {m.quantization}" if m.quantization else "") + ")"
            for m in models
        ],
        hardware=[_hardware_line(g, given_by[g.group_id]) for g in hardware.values()],
        engine=facts.engine,
        common_args=diffs.common,
        launch=shell_words(facts.launch) if facts.launch else None,
        workload=workload(facts, measurements),
        sweep=[f"{axis} {', '.join(fmt.x(v) for v in vs)}" for axis, vs in facts.sweep.items()]
        or ["(a single point)"],
        client="; ".join(CLIENT_WORDS.get(c, c) for c in clients),
        metrics=Metrics(a.primary, list(a.secondary)),
        arm_diff=diffs,
        cells=plan.cost.cells,
        env=common_env(plan.groups),
    )


def common_env(groups: Sequence[ServerGroup]) -> list[str]:
    """The variables every server group was given with the same value, as `NAME=value`,
    secrets masked (plan.json is written redacted; masked again here for a plan that was not)."""
    if not groups:
        return []
    shared = dict(groups[0].env)
    for g in groups[1:]:
        shared = {k: v for k, v in shared.items() if g.env.get(k) == v}
    masked = redact_json(shared)
    return [f"{k}={masked[k]}" for k in sorted(masked)]


def ingested_setup(
    measurements: Sequence[Measurement],
    settings: AnalysisSettings,
    ingest: Mapping[str, Any] | None,
) -> Setup:
    """What bench_serving files say about themselves: workload fields, backend, versions."""

    def seen(key: str) -> str:
        values = list(
            dict.fromkeys(
                fmt.x(m.extra.get(key)) for m in measurements if m.extra.get(key) is not None
            )
        )
        return ", ".join(values) if values else "not recorded"

    return Setup(
        files=list(ingest.get("files", [])) if ingest else [],
        workload=[
            ("dataset", seen("dataset_name")),
            (
                "input / output length",
                f"{seen('random_input_len')} / {seen('random_output_len')} tokens",
            ),
            ("request rate", seen("request_rate")),
            ("client backend", seen("backend")),
            ("server version", seen("server_version")),
        ],
        client="; ".join(
            CLIENT_WORDS.get(c, c) for c in dict.fromkeys(m.client for m in measurements)
        ),
        metrics=Metrics(settings.primary, list(settings.secondary)),
    )


def setup_or_ingested(inputs: RunInputs) -> Setup:
    """From settings and plan, or for an ingested run from what its files record (the arms'
    differences then from the servers' effective args)."""
    verdict, ms = inputs.verdict, inputs.measurements
    settings = verdict.settings
    if inputs.settings.spec is not None and inputs.plan is not None:
        setup = setup_of(inputs.settings, inputs.plan, ms, given_of(inputs))
        setup.workload.append(("prefix cache", cache_flushes(inputs.events)))
        setup.workload += [("extended", text) for text in extensions(inputs.events)]
        return setup
    arms = [settings.baseline, *verdict.overall]
    diffs = effective_arg_differences(inputs.env.get("servers") or {}, arms)
    rows = [DiffRow(f"`{d.key}`", d.values) for d in diffs if d.arms == arms]
    setup = ingested_setup(ms, settings, inputs.ingest)
    setup.arm_diff = arm_diff(arms, rows, "", settings.baseline)
    return setup


def warnings_of(inputs: RunInputs) -> list[ArgWarning]:
    """Effective server args that differ between arms though the spec did not ask (none for
    an ingested run: its arms are what the files hold)."""
    facts = inputs.settings.spec
    if facts is None:
        return []
    arms = [inputs.verdict.settings.baseline, *inputs.verdict.overall]
    return effective_arg_differences(inputs.env.get("servers") or {}, arms, facts.asked)


def compared_of(inputs: RunInputs) -> str | None:
    """What a `matrixrun compare` directory compares, in place of the setup list."""
    pair = compared_pair(inputs)
    if pair is None:
        return None
    return compared(*pair, dirs=[str(f) for f in (inputs.ingest or {}).get("files", [])])


def of(inputs: RunInputs) -> Setup:
    s = inputs.verdict.settings
    setup = setup_or_ingested(inputs)
    setup.ingested = inputs.settings.spec is None
    setup.better = MetricHeading.of(s.primary).better
    setup.margins = fmt.margins(s.margin, s.margins, s.metrics)
    setup.warnings = warnings_of(inputs)
    setup.compared = compared_of(inputs)
    return setup


SECTION = Section("setup", 70, of)
