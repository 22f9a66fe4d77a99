"""The proposal: a spec as the Markdown comment a reviewer reads on its pull request
(`matrixrun plan SPEC --markdown`, posted by `matrixrun post --plan SPEC`).

It answers what a reviewer has to decide before GPU time is spent: what is the hypothesis,
which flags differ between the arms (and exactly which command line each launch will run, as
the engine renders it, so the review is of what will run rather than of the YAML), which
matrix of cells is measured, how many launches and runs the first pass and the verify worst
case take, what that costs in GPU time, and whether the spec validated at all. An invalid spec
still gets a proposal — one that shows the errors — so the PR shows why it cannot run.

GPU time is wall time × the GPUs each launch holds. The per-launch and per-cell times come
from earlier run directories of the same engine, model and hardware when `--history DIR` finds
any (measured beats guessed), else from the spec's `estimate:` block. Pure except for reading
the spec and the history directories.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from matrixrun.core.errors import InputError, MatrixError, SpecError
from matrixrun.core.redact import is_secret_name
from matrixrun.core.units import format_duration
from matrixrun.core.words import plural
from matrixrun.engines import for_spec
from matrixrun.engines.base import redact_argv
from matrixrun.engines.sglang import DEFAULT_LAUNCH
from matrixrun.flags import check_file, negatable_for
from matrixrun.plan import Cost, Plan, ServerGroup, estimate_cost, expand
from matrixrun.plan.history import HistoryEstimate, history_estimate, noise_history
from matrixrun.plan.render import decision_words, noise_line, policy_words, sigma_cost
from matrixrun.publish.github import COMMENT_LIMIT
from matrixrun.spec import Spec, SpecFile, read_spec
from matrixrun.store.prior import plan_noise

#: Shown instead of the host and port the runner picks per launch.
HOST_PLACEHOLDER = "{host}"
#: Most launches whose command line is shown; the rest are counted (a big sweep of server axes
#: would otherwise push the comment past GitHub's size limit).
MAX_COMMANDS = 24


class _PortPlaceholder(int):
    """An int (what `Engine.launch` takes) that prints as `{port}`: the engine renders its own
    command line, and the port the runner would pick appears as a placeholder wherever the
    engine puts it (`--port {port}`, or `--port={port}` inside an argument)."""

    def __str__(self) -> str:
        return "{port}"

    def __format__(self, spec: str) -> str:
        return "{port}"


PORT_PLACEHOLDER = _PortPlaceholder(0)


# ------------------------------------------------------------------------------ validation


@dataclass(frozen=True)
class Validation:
    """What `matrixrun validate` would say about the spec, for the proposal."""

    path: str
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def validate_file(path: str | Path) -> tuple[SpecFile | None, Validation]:
    """Read the spec once; (the file as read, the validation result) or (None, the errors)."""
    try:
        source = read_spec(path)
    except SpecError as exc:
        return None, Validation(str(path), errors=[str(i) for i in exc.issues])
    flags = check_file(source)
    said = (
        flags.summary
    )  # "flags checked against …", "flags NOT checked: …", or "no server flags …"
    said = f"server {said}" if said.startswith("flags ") else said
    notes = [str(w) for w in flags.warnings] + [said]
    if flags.errors:
        return source, Validation(str(path), errors=[str(e) for e in flags.errors], notes=notes)
    return source, Validation(str(path), notes=notes)


def experiment_name(path: str | Path) -> str:
    """The spec's `experiment:` (even when the spec does not validate), else its file stem:
    the key of the proposal comment, so fixing a broken spec updates the same comment."""
    try:
        data = YAML(typ="safe").load(Path(path).read_text(encoding="utf-8"))
        name = data.get("experiment") if isinstance(data, dict) else None
    except Exception:  # any unreadable spec: the stem names it
        name = None
    return str(name) if isinstance(name, str) and name.strip() else Path(path).stem


# ------------------------------------------------------------------------- command lines


def _redact_env(env: Mapping[str, str]) -> list[str]:
    return [f"{k}=***" if is_secret_name(k) else f"{k}={v}" for k, v in env.items()]


def command_line(spec: Spec, group: ServerGroup) -> str:
    """The launch of `group` exactly as the engine renders it (`Engine.launch`), with `{host}`
    and `{port}` for what the runner picks per launch and secret-looking values as `***`."""
    try:
        engine = for_spec(spec.engine, negatable_for(spec.engine))
        launch = engine.launch(group, HOST_PLACEHOLDER, PORT_PLACEHOLDER)
    except MatrixError as exc:
        return f"# cannot render this launch: {exc}"
    if not engine.launches:
        return f"# nothing is launched: the running endpoint {launch.base_url} is measured"
    argv = list(launch.argv)
    default = spec.engine.kind == "sglang" and not group.launch
    if default and argv[: len(DEFAULT_LAUNCH)] == DEFAULT_LAUNCH:
        # The harness's own interpreter path says nothing about the GPU node's.
        argv[0] = "python"
    words = [*_redact_env(launch.env), *redact_argv(argv)]
    return " ".join(_quote(w) for w in words)


def _quote(word: str) -> str:
    """shlex.quote, except that the `{host}`/`{port}` placeholders and the `***` of a redacted
    value stay readable (they are for the reader, not for pasting into a shell; braces without
    a comma are not special to a POSIX shell anyway)."""
    plain = word.replace(HOST_PLACEHOLDER, "h").replace(str(PORT_PLACEHOLDER), "1")
    plain = plain.replace("***", "x")
    return word if shlex.quote(plain) == plain else shlex.quote(word)


# ------------------------------------------------------------------------------ rendering


def _code(value: Any) -> str:
    text = str(value).replace("|", "\\|").replace("`", "'")
    return f"`{text}`"


def _flag_value(value: Any, key: str = "") -> str:
    if is_secret_name(key) and value is not None and not isinstance(value, bool):
        return "`***`"
    if value is None or value is False:
        return "(off)"
    if value is True:
        return "on"
    return _code(value)


def _arm_flags(spec: Spec, plan: Plan) -> dict[str, dict[str, Any]]:
    """Each arm's flags as its launches get them. With one slice: everything merged
    (engine + hardware + server axes + arm), as the group has it; with several, hardware args
    and server axes vary by slice (the matrix shows them), so engine args + the arm's own."""
    if len(plan.slices) == 1:
        out: dict[str, dict[str, Any]] = {}
        for g in plan.groups:
            out.setdefault(g.arm, dict(g.flags))
        return out
    return {a: {**spec.engine.args, **spec.arms[a].flags} for a in spec.arms}


def _arms_section(spec: Spec, plan: Plan) -> list[str]:
    arms = [plan.baseline, *plan.candidates]
    flags = _arm_flags(spec, plan)
    keys: list[str] = []
    for arm in arms:
        keys += [k for k in flags.get(arm, {}) if k not in keys]
    differ = [k for k in keys if len({repr(flags.get(a, {}).get(k)) for a in arms}) > 1]
    common = [k for k in keys if k not in differ]
    lines = [
        "### Arms",
        "",
        f"Baseline **{plan.baseline}**; candidate(s) "
        + ", ".join(f"**{c}**" for c in plan.candidates)
        + ".",
        "",
    ]
    header = ["flag", *(f"{a} (baseline)" if a == plan.baseline else a for a in arms)]
    rows = [[_code(k), *(_flag_value(flags.get(a, {}).get(k), k) for a in arms)] for k in differ]
    launches = {a: spec.arms[a].launch or spec.engine.launch for a in arms}
    if len({repr(v) for v in launches.values()}) > 1:
        rows.append(
            ["launch", *(_code(shlex.join(launches[a] or ["(engine default)"])) for a in arms)]
        )
    envs = {a: {**spec.engine.env, **spec.arms[a].env} for a in arms}
    if len({repr(sorted(v.items())) for v in envs.values()}) > 1:
        rows.append(["env", *(_code(" ".join(_redact_env(envs[a])) or "(none)") for a in arms)])
    if rows:
        lines += [
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows),
        ]
    else:
        lines.append(
            "**No flag, launch command or environment differs between the arms**: the "
            "comparison is A/A (same server twice)."
        )
    if common:
        shown = ", ".join(f"{_code(k)} = {_flag_value(flags[arms[0]][k], k)}" for k in common)
        lines += ["", f"Same in every arm: {shown}."]
    if len(plan.slices) > 1:
        lines += ["", "Hardware args and server axes vary by slice: see the matrix."]
    described = [a for a in arms if spec.arms[a].description]
    if described:
        lines.append("")
        lines += [f"- **{a}**: {spec.arms[a].description}" for a in described]
    return lines


def _commands_section(spec: Spec, plan: Plan, limit: int = MAX_COMMANDS) -> list[str]:
    lines = [
        "### Command lines",
        "",
        "Each launch as the engine renders it; `{host}` and `{port}` are picked per launch.",
        "",
    ]
    for g in plan.groups[:limit]:
        where = f" · {g.slice}" if g.slice else ""
        lines += [f"**{g.arm}**{where} (`{g.group_id}`)", "", "```sh", command_line(spec, g)]
        lines += ["```", ""]
    if len(plan.groups) > limit:
        lines.append(
            f"_…and {len(plan.groups) - limit} more launches, left out to keep the comment "
            "short (`matrixrun plan --json` lists them all)._"
        )
    if spec.engine.kind in ("sglang", "sim") and any(not g.launch for g in plan.groups):
        lines.append(
            "`python` is `$MATRIXRUN_SGLANG_PYTHON` on the node that runs it, else matrixrun's "
            "own Python."
        )
    return lines


def _values(values: Iterable[Any]) -> str:
    seen: list[Any] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return ", ".join(str(v) for v in seen)


def _matrix_section(plan: Plan) -> list[str]:
    arms = len(plan.candidates) + 1
    lines = ["### Matrix", ""]
    lines += [
        f"| slice | model | hardware | {plan.axis} | other axes | cells |",
        "|---|---|---|---|---|---|",
    ]
    for s in plan.slices:
        groups = [g for g in plan.groups if g.slice == s.label]
        cells = [c for g in groups for c in g.cells]
        xs = _values(c.x for c in cells)
        other: dict[str, list[Any]] = {}
        for c in cells:
            for k, v in c.point.items():
                if k != plan.axis:
                    other.setdefault(k, []).append(v)
        fixed = "; ".join(f"{k} {_values(v)}" for k, v in other.items() if v)
        lines.append(
            f"| {s.label or '(one)'} | {_code(s.model)} | {_code(s.hardware)} | {xs} | "
            f"{fixed or '—'} | {len(cells)} |"
        )
    points = plan.cost.cells // arms if arms else plan.cost.cells
    lines += [
        "",
        f"{points} point{'s' if points != 1 else ''} × {arms} arms = **{plan.cost.cells} "
        f"cells** in {len(plan.slices)} slice{'s' if len(plan.slices) != 1 else ''}, "
        f"{plan.cost.launches} launches.",
    ]
    return lines


def _gpu_share(plan: Plan, launch_s: float, cell_s: float) -> tuple[float, float]:
    """(first-pass wall seconds, GPU seconds): each launch holds its hardware's GPU count."""
    wall = gpu = 0.0
    for g in plan.groups:
        t = launch_s + len(g.cells) * cell_s
        wall += t
        gpu += t * g.hardware.count
    return wall, gpu


def _gpu_hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:.1f} GPU-h" if hours >= 1 else f"{seconds / 60:.0f} GPU-min"


def _timing(
    spec: Spec, plan: Plan, history: HistoryEstimate | None
) -> tuple[Cost, float | None, float | None, str]:
    """The cost with the best times known (earlier real runs over the spec's estimate), the
    launch and cell times it used, and where they came from, in words."""
    c = plan.cost
    source = ""
    cost: Cost = c
    launch_s, cell_s = c.launch_s, c.cell_s
    if history is not None and (history.launch_s is not None or history.cell_s is not None):
        launch_s = history.launch_s if history.launch_s is not None else launch_s
        cell_s = history.cell_s if history.cell_s is not None else cell_s
        measured = []
        if history.launch_s is not None:
            measured.append(
                f"launch {format_duration(history.launch_s)} (median of {history.launches})"
            )
        if history.cell_s is not None:
            measured.append(f"cell {format_duration(history.cell_s)} (median of {history.cells})")
        source = (
            f"times from {len(history.run_dirs)} earlier run director"
            f"{'y' if len(history.run_dirs) == 1 else 'ies'} of the same engine, model and "
            f"hardware: {', '.join(measured)}"
        )
        if launch_s is not None and cell_s is not None:
            estimate = spec.estimate.model_copy(update={"launch": launch_s, "cell": cell_s})
            cost = estimate_cost(spec.model_copy(update={"estimate": estimate}), plan.groups)
        if c.launch_s is not None and c.cell_s is not None:
            source += (
                f" (the spec's estimate says launch {format_duration(c.launch_s)}, cell "
                f"{format_duration(c.cell_s)})"
            )
    elif c.launch_s is not None and c.cell_s is not None:
        source = (
            f"times from the spec's estimate: launch {format_duration(c.launch_s)}, cell "
            f"{format_duration(c.cell_s)}"
        )
    return cost, launch_s, cell_s, source


def _cost_section(spec: Spec, plan: Plan, history: HistoryEstimate | None) -> list[str]:
    c = plan.cost
    v = spec.verify
    cost, launch_s, cell_s, source = _timing(spec, plan, history)
    timed = cost.time_first_pass_s is not None and cost.time_worst_case_s is not None
    share = 1.0
    if timed and launch_s is not None and cell_s is not None:
        wall, gpu = _gpu_share(plan, launch_s, cell_s)
        share = gpu / wall if wall else 1.0

    def times(seconds: float | None) -> str:
        if not timed or seconds is None:
            return "— | —"
        return f"≈ {format_duration(seconds)} | ≈ {_gpu_hours(seconds * share)}"

    policy = policy_words(spec, c.budget_s)
    worst = (
        "Every cell runs max_runs times, each on its own launch"
        if v.design == "fixed"
        else "The worst case reruns every cell to max_runs"
    )
    lines = [
        "### Cost",
        "",
        "| pass | launches | cell runs | time | GPU time |",
        "|---|---|---|---|---|",
        f"| first pass | {cost.launches} | {cost.runs_first_pass} | "
        f"{times(cost.time_first_pass_s)} |",
        f"| verify worst case | {cost.launches_worst_case} | {cost.runs_worst_case} | "
        f"{times(cost.time_worst_case_s)} |",
        *(
            [
                f"| + crossover bisection, at most (verify.bisect {v.bisect}) | 0 (on those "
                f"launches) | {c.bisection_runs_worst_case} | "
                f"{times(c.bisection_runs_worst_case * cell_s if cell_s is not None else None)} |"
            ]
            if c.bisection_runs_worst_case
            else []
        ),
        "",
        f"Decided on: {decision_words(spec, code=True)}.",
        "",
        f"Verify policy: {policy}. {worst}{' (capped by the budget)' if c.budget_s else ''}.",
        "",
    ]
    noise = _noise_sentence(spec, plan) if v.noise_from not in (None, "none") else ""
    lines += [f"{noise}.", ""] if noise else []
    if timed:
        lines.append(f"{source[0].upper()}{source[1:]}.")
    elif history is not None:
        lines.append(
            f"No time estimate: earlier real runs in --history of this engine, model and "
            f"hardware gave {history.launches} launch and {history.cells} cell times (both "
            "are needed), and the spec has no complete `estimate: {launch: 10m, cell: 3m}` "
            "block."
        )
    else:
        lines.append(
            "No time estimate: add `estimate: {launch: 10m, cell: 3m}` to the spec, or pass "
            "`--history runs/` to use earlier runs of the same engine, model and hardware."
        )
    sigma = sigma_cost(plan)
    if c.budget_s is not None and sigma is not None and v.max_runs > 1 and c.budget_s < sigma[0]:
        lines.append(
            f"**Warning:** the rerun budget {format_duration(c.budget_s)} is less than a "
            f"fresh-server σ costs (≈ {format_duration(sigma[0])}); most cells may stay "
            "undecided: raise `verify.budget`."
        )
    return lines


def _noise_sentence(spec: Spec, plan: Plan) -> str:
    """`verify.noise_from` in the proposal: what it lends, or why it cannot (one sentence)."""
    assert spec.verify.noise_from is not None
    try:
        if spec.verify.noise_dir() is None:
            history = plan_noise(spec, plan).history  # auto: named only where it lends
            line = noise_line(history, spec.metrics.primary) if history else ""
            return line[:1].upper() + line[1:]
        line = noise_line(noise_history(spec, plan, spec.verify.noise_from), spec.metrics.primary)
    except InputError as exc:
        return f"**Noise from an earlier run cannot be used:** {exc}"
    return line[0].upper() + line[1:]


def _validation_section(validation: Validation, plan: Plan | None = None) -> list[str]:
    if validation.ok:
        counts = (
            f" ({len(plan.candidates) + 1} arms, {plural(len(plan.slices), 'slice')}, "
            f"{plural(plan.cost.cells, 'cell')}, "
            f"{plural(plan.cost.launches, 'launch', 'launches')})"
            if plan is not None
            else ""
        )
        lines = [f"**Validation:** `{validation.path}` is valid{counts}."]
        lines += ["", *(f"Note: {n}." for n in validation.notes)] if validation.notes else []
        return lines
    return [
        f"**Validation failed:** `{validation.path}` cannot run until these are fixed "
        "(`matrixrun validate` shows the same):",
        "",
        "```text",
        *(e.replace("```", "'''") for e in validation.errors),
        "```",
    ]


def proposal_markdown(
    spec: Spec | None,
    plan: Plan | None,
    validation: Validation,
    history: HistoryEstimate | None = None,
    *,
    experiment: str | None = None,
    max_commands: int = MAX_COMMANDS,
) -> str:
    """The proposal comment. With no spec (it did not validate) only the validation result.
    Fewer command lines are shown while the document would not fit one GitHub comment."""
    text = _proposal(spec, plan, validation, history, experiment, max_commands)
    while len(text) > COMMENT_LIMIT - 200 and max_commands > 0:
        max_commands //= 2
        text = _proposal(spec, plan, validation, history, experiment, max_commands)
    return text


def _proposal(
    spec: Spec | None,
    plan: Plan | None,
    validation: Validation,
    history: HistoryEstimate | None,
    experiment: str | None,
    max_commands: int,
) -> str:
    if spec is None or plan is None:
        name = experiment or Path(validation.path).stem
        lines = [f"## Proposal: {name}", "", *_validation_section(validation)]
        return "\n".join(lines) + "\n"
    hypothesis = " ".join((spec.hypothesis or "").split())
    lines = [
        f"## Proposal: {plan.experiment}: {spec.title}",
        "",
        f"> **Hypothesis.** {hypothesis}"
        if hypothesis
        else "> No hypothesis given: add `hypothesis:` to the spec (what should happen, and why).",
        "",
        *_validation_section(validation, plan),
        "",
        *_arms_section(spec, plan),
        "",
        *_commands_section(spec, plan, max_commands),
        "",
        *_matrix_section(plan),
        "",
        *_cost_section(spec, plan, history),
    ]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def render_proposal(
    path: str | Path, history: Sequence[str | Path] = ()
) -> tuple[str, Validation, str]:
    """(the proposal Markdown, the validation result, the comment key) for a spec file."""
    source, validation = validate_file(path)
    if source is None:
        name = experiment_name(path)
        return proposal_markdown(None, None, validation, experiment=name), validation, name
    spec = source.spec
    plan = expand(spec, source.hash)
    estimate = history_estimate(spec, plan, history) if history else None
    return proposal_markdown(spec, plan, validation, estimate), validation, spec.experiment
