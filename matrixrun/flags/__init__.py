"""Server flags checked against the flags the engine really has (`matrixrun validate`).

    model.py     Flag / FlagSet and the JSON of the shipped lists
    extract.py   the declaration shapes of a released wheel's source files, read with ast
    recipes.py   which files of a release declare its flags, merged into one list
    helptext.py  lists from an installed engine's --help, run as a subprocess and parsed
    shipped.py   the lists in data/, one per released engine version
    sources.py   which list a spec gets (help_command, pinned version, local install, newest)
    check.py     the check itself: rendered as the engine renders, located issues

`check_file` is the one entry point the CLI uses: it locates each issue at its `path:line` with
the spec loader's own location machinery, so flag problems read like every other spec error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from matrixrun.core.errors import SpecError, SpecIssue
from matrixrun.flags.check import FlagReport, check_spec
from matrixrun.flags.rules import identical_arms, rule_issues
from matrixrun.flags.sources import family, source_for
from matrixrun.spec import EngineSpec, SpecFile
from matrixrun.spec.loader import data_loc, line_of


@dataclass
class FileCheck:
    errors: list[SpecIssue]
    warnings: list[SpecIssue]
    summary: str  # "flags checked against ..." or "flags NOT checked: ..."


def check_file(source: SpecFile) -> FileCheck:
    """Check the flags of a spec file as read (`read_spec`); issues carry `path:line` from the
    line map the loader kept, so the file is not parsed a second time."""
    spec, data = source.spec, source.data
    report = check_spec(spec)
    where = str(source.path)
    errors: list[SpecIssue] = []
    warnings: list[SpecIssue] = []
    found = [*identical_arms(spec), *rule_issues(spec, _profile_file(data))]
    for issue in [*report.issues, *found]:
        loc = data_loc(issue.loc, data)
        line = line_of(data, loc)
        key = ".".join(map(str, loc))
        if issue.severity == "error":
            errors.append(SpecIssue(where, line, key, issue.message))
        else:
            warnings.append(SpecIssue(where, line, key, f"warning: {issue.message}"))
    return FileCheck(errors, warnings, summary(report))


def require_valid_flags(source: SpecFile) -> FileCheck:
    """`validate`'s flag check, for `run` and `plan` before anything launches: the errors
    raise `SpecError` (file:line, the allowed choices or type); the result otherwise."""
    found = check_file(source)
    if found.errors:
        raise SpecError(
            [
                *found.errors,
                SpecIssue(str(source.path), None, "", f"{found.summary}; nothing launched"),
            ]
        )
    return found


def negatable_options(engine: EngineSpec, launch: list[str] | None = None) -> frozenset[str]:
    """The options of a launch's flag list that argparse also takes as `--no-<name>`
    (BooleanOptionalAction): the engines render `false` on them as `--no-<name>`."""
    if family(engine.kind) is None:
        return frozenset()
    flags = source_for(engine, launch).flags
    if flags is None:
        return frozenset()
    return frozenset(name for f in flags.flags if f.negatable for name in f.names)


def negatable_for(engine: EngineSpec) -> Callable[[list[str] | None], frozenset[str]]:
    """`negatable_options` for the engines (`engines.for_spec(..., negatable=)`)."""

    def negatable(launch: list[str] | None) -> frozenset[str]:
        return negatable_options(engine, launch)

    return negatable


def _profile_file(data: object) -> str | None:
    """The profile file a spec names (`rehearsal.profile: x.yaml`), None when inline."""
    rehearsal = data.get("rehearsal") if isinstance(data, dict) else None
    profile = rehearsal.get("profile") if isinstance(rehearsal, dict) else None
    return profile if isinstance(profile, str) else None


def summary(report: FlagReport) -> str:
    parts = []
    if report.checked:
        parts.append("flags checked against " + "; ".join(report.checked))
        if report.values_unchecked:
            shown = report.values_unchecked
            names = ", ".join(shown[:6]) + (f" and {len(shown) - 6} more" if len(shown) > 6 else "")
            parts.append(
                f"the values of {names} NOT checked (the engine declares no type or choices "
                "for them)"
            )
    if report.unchecked:
        parts.append("flags NOT checked: " + "; ".join(report.unchecked))
    return ", ".join(parts) or "no server flags to check"
