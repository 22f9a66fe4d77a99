"""The `when:` keys of a rehearsal profile's rules, checked against the engine's flags.

A rule fires when a launch's flags have the value it names (`core/profile.py`), so a misspelt
key (`max_num_batched_tokns`) is a rule that never fires: the rehearsal runs both arms as one
engine and its report says "same" about the profile, not the change (issue 33). Each key is
rendered as the launch renders it and looked up in the same flag list `validate` checks the
arms against, with the same did-you-mean; a real flag that no launch of the spec sets is a
warning (the rule can never apply to this spec).
"""

from __future__ import annotations

from typing import Any

from matrixrun.core.profile import Profile
from matrixrun.flags.check import FlagIssue, unknown_key
from matrixrun.flags.sources import family
from matrixrun.spec import Spec


def rule_issues(spec: Spec, profile_file: str | None = None) -> list[FlagIssue]:
    """One issue per `when:` key that no flag of the engine renders to, or that no launch of
    the spec sets. `profile_file`: the profile came from that file (the issue is then located
    at `rehearsal.profile` and names the rule inside the file)."""
    profile = spec.rehearsal.profile
    if not isinstance(profile, Profile) or family(spec.engine.kind) is None:
        return []
    used = _used_keys(spec)
    out: list[FlagIssue] = []
    for field, rules in (("rules", profile.rules), ("effect_rules", profile.effect_rules)):
        for i, rule in enumerate(rules):
            for key in rule.when:
                name = key.replace("-", "_")
                loc: tuple[Any, ...] = ("rehearsal", "profile", field, i, "when", key)
                where = ""
                if profile_file is not None:
                    loc, where = (
                        ("rehearsal", "profile"),
                        f"{profile_file}: {field}[{i}].when.{key}: ",
                    )
                unknown = unknown_key(spec, name)
                if unknown is not None:
                    out.append(FlagIssue(loc, f"{where}rule key {unknown}"))
                elif name not in used:
                    out.append(
                        FlagIssue(
                            loc,
                            f"{where}no launch of this spec sets {name!r}, so this rule never "
                            "applies (a rule matches the flags an arm, engine.args, "
                            "hardware.args or a server axis gives)",
                            "warning",
                        )
                    )
    return out


def identical_arms(spec: Spec) -> list[FlagIssue]:
    """A warning per arm with the same flags, launch and environment as an earlier one: both
    would launch the same server, so the comparison could only show noise (a rehearsal
    would even call it "same" with confidence). A warning, not an error: an A/A pair can be
    meant, though `verify.aa` is the way to ask for one."""
    out: list[FlagIssue] = []
    seen: dict[str, str] = {}
    for name, arm in spec.arms.items():
        flags = sorted((str(k).replace("-", "_"), repr(v)) for k, v in arm.flags.items())
        key = repr((flags, arm.launch, sorted(arm.env.items())))
        if key in seen:
            out.append(
                FlagIssue(
                    ("arms", name),
                    f"has the same flags, launch and env as {seen[key]!r}, so both launch the "
                    "same server and the comparison can only show noise; make them differ "
                    "(to measure server-to-server spread, set verify.aa: true instead)",
                    "warning",
                )
            )
        else:
            seen[key] = name
    return out


def _used_keys(spec: Spec) -> set[str]:
    keys = {str(k).replace("-", "_") for k in spec.engine.args}
    keys |= {str(k).replace("-", "_") for hw in spec.hardwares for k in hw.args}
    keys |= {str(k).replace("-", "_") for k in spec.sweep.server}
    keys |= {str(k).replace("-", "_") for arm in spec.arms.values() for k in arm.flags}
    return keys
