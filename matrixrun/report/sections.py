"""The document's sections as plain data for the templates: pure functions of what the run
directory holds (`context.RunInputs`) and the `Verdict`. Sentences come from `wording`,
numbers are formatted by `fmt`; nothing here estimates anything."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from matrixrun.core.measurement import Measurement
from matrixrun.core.verdict import AnalysisSettings
from matrixrun.engines.sglang import ALIASES as SGLANG_ALIASES
from matrixrun.engines.vllm import ALIASES as VLLM_ALIASES
from matrixrun.plan import Plan, ServerGroup
from matrixrun.report import fmt, wording
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
    """The setup section: what the run was (spec-driven), or what its files say (ingested)."""

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


# ------------------------------------------------------------------------------ flags as given


def _argv_pairs(argv: Sequence[str]) -> list[tuple[str, list[str]]]:
    pairs: list[tuple[str, list[str]]] = []
    for token in argv:
        if token.startswith("--"):
            pairs.append((token, []))
        elif pairs:
            pairs[-1][1].append(token)
    return pairs


def _names(key: str, name: str) -> bool:
    """Whether the option `name` is how an engine renders the spec key `key` (`tp` is
    `--tp-size` for SGLang, `--tensor-parallel-size` for vLLM)."""
    option = name[2:].replace("-", "_")
    return option.startswith(key) or option in (SGLANG_ALIASES.get(key), VLLM_ALIASES.get(key))


def given_flags(group: ServerGroup, argv: Sequence[str] | None) -> dict[str, str]:
    """The group's flags as its server was given them: key → '--tp-size 8' (engines rename
    and render flags; the report must show what ran). Found as the run of argv options, in
    the plan's order, whose names start with the keys; where the argv is unknown or does not
    show them that way, the flag as the spec wrote it ('--tp 8')."""
    pairs = _argv_pairs(argv or [])
    # `false` is omitted, except on a --x/--no-x switch, where the engine renders --no-x
    negated = {k for k in group.flags if any(_names("no_" + k, name) for name, _ in pairs)}
    wanted = [
        (k, v) for k, v in group.flags.items() if v is not None and (v is not False or k in negated)
    ]
    for start in range(len(pairs) - len(wanted) + 1):
        window = pairs[start : start + len(wanted)]
        if all(
            _names("no_" + k if v is False else k, name)
            for (k, v), (name, _) in zip(wanted, window, strict=True)
        ):
            return {
                k: " ".join([name, *values])
                for (k, _), (name, values) in zip(wanted, window, strict=True)
            }
    return {k: _as_given(k, v) for k, v in wanted}


def _as_given(key: str, value: Any) -> str:
    """A flag as the spec wrote it, rendered: `--x`, `--no-x` (false), `--x value`."""
    if value is True:
        return fmt.cli_flag(key)
    if value is False:
        return "--no-" + fmt.cli_flag(key)[2:]
    return f"{fmt.cli_flag(key)} {fmt.flag_value(value)}"


def argv_by_group(
    events: Sequence[Mapping[str, Any]], servers: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Each group's first recorded launch argv: the launch events, else env.json's servers."""
    out: dict[str, list[str]] = {}
    for e in events:
        if e.get("event") == "launch" and isinstance(e.get("argv"), list):
            out.setdefault(str(e.get("group")), [str(a) for a in e["argv"]])
    for info in servers.values():
        if isinstance(info, dict) and isinstance(info.get("argv"), list):
            out.setdefault(str(info.get("group")), [str(a) for a in info["argv"]])
    return out


def given_by_group(plan: Plan, argv: Mapping[str, list[str]]) -> dict[str, dict[str, str]]:
    """`given_flags` of every server group: the one place flags are spelled for the report."""
    return {g.group_id: given_flags(g, argv.get(g.group_id)) for g in plan.groups}


def _value_of(text: str | None) -> str:
    if text is None:
        return "(unset)"
    parts = text.split(" ", 1)
    return parts[1] if len(parts) > 1 else "(set)"


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


def _arg_value(dumped: str) -> str:
    value = json.loads(dumped)
    return "(absent)" if value is None else fmt.flag_value(value)


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


# ------------------------------------------------------------------------------ setup


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
        workload=wording.workload(facts),
        sweep=[f"{axis} {', '.join(fmt.x(v) for v in vs)}" for axis, vs in facts.sweep.items()]
        or ["(a single point)"],
        client="; ".join(wording.CLIENT_WORDS.get(c, c) for c in clients),
        metrics=Metrics(a.primary, list(a.secondary)),
        arm_diff=diffs,
        cells=plan.cost.cells,
    )


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
            wording.CLIENT_WORDS.get(c, c) for c in dict.fromkeys(m.client for m in measurements)
        ),
        metrics=Metrics(settings.primary, list(settings.secondary)),
    )
