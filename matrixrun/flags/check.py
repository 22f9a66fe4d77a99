"""Check every server flag of a spec against the engine's flag list, as the server will get it.

Each key is rendered by the engine's own functions (`engines/sglang.render_flags` with the
engine's `ALIASES`: `tp` -> `--tp-size` for SGLang, `--tensor-parallel-size` for vLLM), so what is
checked is the argv that would be launched, not the YAML: `true` is a bare flag, `false` is
omitted, a list is one flag followed by its values, `no_x: true` is vLLM's `--no-x`.

Errors (the launch would fail, or would not do what the spec says): an unknown flag (with a
did-you-mean), a flag matrixrun sets itself (`--port`, ...), a value for a switch, a bare switch
for a flag that needs a value, several values for a one-value flag, a value not among the
declared choices or not of the declared int/float type, a deprecated flag the engine refuses.
Warnings (it runs, but read it again): a deprecated flag (with its new name). `false` on a flag
that has a `--no-` twin renders `--no-x` (the engines do the same), so it needs no warning.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from matrixrun.core.aliases import SGLANG, VLLM
from matrixrun.engines.sglang import flag_name, render_flags
from matrixrun.flags.model import Flag, FlagSet
from matrixrun.flags.shipped import shipped, shipped_versions
from matrixrun.flags.sources import Source, family, source_for
from matrixrun.spec import Spec

Severity = Literal["error", "warning"]

#: Options matrixrun puts on every launch itself (engines/sglang.py, engines/vllm.py).
HARNESS_OWNED = {
    "sglang": {"--model-path", "--host", "--port", "--tokenizer-path"},
    "vllm": {"--host", "--port", "--tokenizer", "--model"},
    "command": set(),
}


@dataclass(frozen=True)
class FlagIssue:
    """One problem, located by the path of keys as pydantic reports it (`arms.x.flags.k`)."""

    loc: tuple[Any, ...]
    message: str
    severity: Severity = "error"


@dataclass
class FlagReport:
    issues: list[FlagIssue]
    checked: list[str]  # what the flags were checked against, one sentence each
    unchecked: list[str]  # why some or all were not
    #: Options given a value the flag list has no type or choices for: their names were
    #: checked, their values were not (the summary says so rather than "checked").
    values_unchecked: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[FlagIssue]:
        return [i for i in self.issues if i.severity == "error"]


def _aliases(kind: str) -> dict[str, str]:
    if kind == "sglang":
        return SGLANG
    if kind == "vllm":
        return VLLM
    return {}


def _uses(spec: Spec) -> Iterator[tuple[tuple[Any, ...], str, list[Any], list[str] | None]]:
    """(location, key, values, launch prefix) of every server flag in the spec."""
    for key, value in spec.engine.args.items():
        yield ("engine", "args", key), key, [value], None
    for i, hw in enumerate(spec.hardwares):
        for key, value in hw.args.items():
            yield ("hardware", i, "args", key), key, [value], None
    for key, values in spec.sweep.server.items():
        yield ("sweep", "server", key), key, list(values), None
    for name, arm in spec.arms.items():
        for key, value in arm.flags.items():
            yield ("arms", name, "flags", key), key, [value], arm.launch


def check_spec(spec: Spec) -> FlagReport:
    """Every flag use of `spec` against the flag list of the launch that gets it."""
    kind = family(spec.engine.kind)
    report = FlagReport([], [], [])
    if kind is None:
        report.unchecked.append(source_for(spec.engine).says)
        return report

    aliases = _aliases(kind)
    said: set[str] = set()
    for loc, key, values, launch in _uses(spec):
        source: Source = source_for(spec.engine, launch)
        if source.says not in said:
            said.add(source.says)
            (report.checked if source.flags is not None else report.unchecked).append(source.says)
        if source.flags is None:
            continue
        fs = source.flags
        option = flag_name(str(key), aliases)
        flag = _lookup(fs, option)
        if flag is None:
            report.issues.append(FlagIssue(loc, _unknown(fs, kind, key, option, aliases)))
            continue
        if set(flag.names) & HARNESS_OWNED.get(kind, set()):
            report.issues.append(
                FlagIssue(
                    loc,
                    f"{option} is set by matrixrun on every launch (model.path, model.tokenizer, "
                    "host and port come from the spec and the harness); remove it",
                )
            )
            continue
        if flag.deprecated:
            severity: Severity = "error" if flag.fatal else "warning"
            report.issues.append(
                FlagIssue(loc, f"{option} is deprecated in {fs.label}: {flag.deprecated}", severity)
            )
        negative = fs.is_negative(option)
        if _value_unchecked(flag, negative, values) and option not in report.values_unchecked:
            report.values_unchecked.append(option)
        for j, value in enumerate(values):
            where = (*loc, j) if loc[:2] == ("sweep", "server") else loc
            negatable = {n for n in flag.names if flag.negatable}
            argv = render_flags({key: value}, aliases, negatable)
            for message, severity in _value_issues(flag, fs, option, key, value, argv, negative):
                report.issues.append(FlagIssue(where, message, severity))
    return report


def _value_unchecked(flag: Flag, negative: bool, values: list[Any]) -> bool:
    """A value is given but the list says nothing that could refuse a wrong one."""
    if negative or flag.takes == "none":
        return False
    given = [v for v in values if v is not None and not isinstance(v, bool)]
    if not given:
        return False
    return flag.takes == "any" or (flag.type in (None, "str", "json") and flag.choices is None)


def _lookup(fs: FlagSet, option: str) -> Flag | None:
    flag = fs.lookup(option)
    if flag is None and "." in option:
        # vLLM reads `--compilation-config.mode 3` as a key of the JSON flag before the dot.
        head = fs.lookup(option.split(".", 1)[0])
        if head is not None and head.type in ("json", None) and head.takes != "none":
            return Flag(names=(option,), takes="any")
    return flag


def _key_of(option: str, aliases: dict[str, str]) -> str:
    """The spec key that renders `option` (the shortest alias wins: `tp` over `tp_size`)."""
    name = option.removeprefix("--").replace("-", "_")
    short = [k for k, v in aliases.items() if v == name]
    return min(short, key=len) if short else name


def _unknown(fs: FlagSet, kind: str, key: str, option: str, aliases: dict[str, str]) -> str:
    names = [n for n in fs.names() if n.startswith("--")]
    match = difflib.get_close_matches(option, names, n=1, cutoff=0.75)
    hint = f" (did you mean {_key_of(match[0], aliases)!r}, {match[0]}?)" if match else ""
    elsewhere = [
        v
        for v in shipped_versions(kind)
        if v != fs.version and (other := shipped(kind, v)) is not None and other.lookup(option)
    ]
    seen = f"; {kind} {', '.join(elsewhere)} had it (removed or renamed since)" if elsewhere else ""
    return (
        f"{key!r} renders {option}, which {fs.label} does not have{hint}{seen}; "
        "fix the name or remove it"
    )


def _value_issues(
    flag: Flag,
    fs: FlagSet,
    option: str,
    key: str,
    value: Any,
    argv: list[str],
    negative: bool,
) -> Iterator[tuple[str, Severity]]:
    if flag.takes == "any":
        return
    if negative:
        if value is not True and value is not False and value is not None:
            yield f"{option} is a switch: write `{key}: true`", "error"
        return
    if not argv or argv[0].startswith("--no-"):  # omitted, or false as `--no-x`
        return
    tokens = argv[1:]
    if flag.takes == "none":
        if tokens:
            yield f"{option} is a switch that takes no value: write `{key}: true`", "error"
        return
    if not tokens:
        if flag.takes != "optional":
            what = f" ({flag.type})" if flag.type else ""
            yield (
                f"{option} takes a value{what}; `true` renders the bare flag, which "
                f"{fs.engine} rejects",
                "error",
            )
        return
    if len(tokens) > 1 and flag.takes in ("one", "optional"):
        yield f"{option} takes one value, not a list of {len(tokens)}", "error"
        return
    for token in tokens:
        problem = _token_problem(flag, token)
        if problem:
            yield f"{option}: {problem}", "error"


#: vLLM's human_readable_int: digits, or a number followed by one size letter.
_HUMAN_INT = re.compile(r"[-+]?\d+|\d+(\.\d+)?[kmgt]|\d+[KMGT]")


def _token_problem(flag: Flag, token: str) -> str | None:
    known = flag.choices
    if known is not None and flag.fold_case:
        folded = {c.upper() for c in known}
        if token.upper() in folded:
            known = None
    if known is not None and token not in known:
        near = difflib.get_close_matches(
            token.upper() if flag.fold_case else token,
            [c.upper() for c in known] if flag.fold_case else list(known),
            n=1,
            cutoff=0.6,
        )
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        shown = ", ".join(known[:40]) + (", ..." if len(known) > 40 else "")
        return f"{token!r} is not one of its choices{hint}: {shown}"
    if flag.type == "int":
        try:
            int(token)
        except ValueError:
            return f"{token!r} is not an integer"
    if flag.type == "float":
        try:
            float(token)
        except ValueError:
            return f"{token!r} is not a number"
    if flag.type == "human_int" and not _HUMAN_INT.fullmatch(token):
        return f"{token!r} is not an integer (nor a size such as 8k, 25.6k or 2K)"
    return None


def unknown_key(spec: Spec, key: str) -> str | None:
    """The unknown-flag sentence (with its did-you-mean) for a flag key the spec's engine
    does not have, as `check_spec` says it; None when it has it or nothing can be checked.
    For keys outside the arms, such as a rehearsal profile's `when:` (`flags/rules.py`)."""
    kind = family(spec.engine.kind)
    fs = source_for(spec.engine).flags if kind is not None else None
    if kind is None or fs is None:
        return None

    aliases = _aliases(kind)
    option = flag_name(key, aliases)
    return None if _lookup(fs, option) is not None else _unknown(fs, kind, key, option, aliases)
