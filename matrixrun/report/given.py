"""Server flags as the servers were given them (`--tp-size 8`, not the spec's `tp: 8`): engines
rename and render flags, and the report must show what ran. Read off each group's first
launch argv (events.jsonl, else env.json); used by the setup's arm differences and by the
slice headings of every table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matrixrun.core.aliases import SGLANG as SGLANG_ALIASES
from matrixrun.core.aliases import VLLM as VLLM_ALIASES
from matrixrun.plan import Plan, ServerGroup
from matrixrun.report import fmt
from matrixrun.report.inputs import RunInputs


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


def given_of(inputs: RunInputs) -> dict[str, dict[str, str]]:
    """Each server group's flags as given (none without plan.json)."""
    if inputs.plan is None:
        return {}
    servers = inputs.env.get("servers") or {}
    return given_by_group(inputs.plan, argv_by_group(inputs.events, servers))
