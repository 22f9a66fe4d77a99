"""Checks across fields that pydantic cannot express per field, each located by the YAML
path of the key to fix (pydantic would only say "the spec"). Pure: a Spec in, (path, message)
pairs out; the loader turns them into `path:line: key: message`."""

from __future__ import annotations

from typing import Any

from matrixrun.spec.messages import did_you_mean
from matrixrun.spec.models import Spec


def semantic_issues(spec: Spec) -> list[tuple[tuple[Any, ...], str]]:
    """Checks across fields, each located by a YAML path (pydantic would only say "the spec")."""
    found: list[tuple[tuple[Any, ...], str]] = []
    if spec.baseline is not None and spec.baseline not in spec.arms:
        found.append(
            (
                ("baseline",),
                f"{spec.baseline!r} is not one of the arms "
                f"({', '.join(spec.arms)}); name one of them",
            )
        )
    for kind, items in (("model", spec.models), ("hardware", spec.hardwares)):
        labels = [i.label for i in items]
        for i, label in enumerate(labels):
            if labels.index(label) != i:
                found.append(
                    (
                        (kind, i),
                        f"shares the label {label!r} with entry "
                        f"{labels.index(label)}; give each entry a distinct name",
                    )
                )
    if spec.engine.kind == "openai" and not spec.engine.base_url:
        found.append(
            (
                ("engine", "kind"),
                "kind openai needs engine.base_url (the endpoint that is already running)",
            )
        )
    found += _command_issues(spec)
    measured = [spec.metrics.primary, *spec.metrics.secondary]
    for i, bound in enumerate(spec.slo):
        if bound.metric not in measured:
            found.append(
                (
                    ("slo", i, "metric"),
                    f"{bound.metric} is not among the metrics ({', '.join(measured)}); "
                    "add it to metrics.secondary so the SLO can be judged",
                )
            )
    axes = spec.axis_values()
    known = sorted(axes)
    for kind, combos in (("exclude", spec.exclude), ("include", spec.include)):
        for i, combo in enumerate(combos):
            for key, value in combo.items():
                if key not in axes:
                    hint = did_you_mean(key, known)
                    found.append(
                        ((kind, i, key), f"not an axis{hint}; axes here: {', '.join(known)}")
                    )
                elif kind == "exclude" and value not in axes[key]:
                    found.append(
                        (
                            (kind, i, key),
                            f"{value!r} is not among its values "
                            f"{axes[key]}, so this entry excludes nothing",
                        )
                    )
            if kind == "include":
                missing = [a for a, vals in axes.items() if a not in combo and len(vals) > 1]
                if missing:
                    found.append(
                        (
                            (kind, i),
                            f"must name {', '.join(missing)} (axes with "
                            "several values); include adds one whole combination",
                        )
                    )
    return found


def _command_issues(spec: Spec) -> list[tuple[tuple[Any, ...], str]]:
    """kind=command starts a server from `engine.launch` (or an arm's): it needs one, and the
    harness must be able to tell it where to listen."""
    if spec.engine.kind != "command":
        return []
    found: list[tuple[tuple[Any, ...], str]] = []
    launches = [(("engine", "launch"), spec.engine.launch)] + [
        (("arms", name, "launch"), arm.launch) for name, arm in spec.arms.items() if arm.launch
    ]
    if not spec.engine.launch and not all(arm.launch for arm in spec.arms.values()):
        found.append(
            (
                ("engine", "kind"),
                "kind command needs engine.launch, the server's argv with {port} in it "
                "(e.g. [transformers, serve, '{model}', --port, '{port}'])",
            )
        )
    for where, argv in launches:
        if argv and not any("{port}" in a for a in argv):
            found.append(
                (where, "has no {port} placeholder; the harness picks the port for each launch")
            )
    if spec.engine.api == "sglang":
        found.append((("engine", "api"), "kind command speaks the OpenAI API; remove engine.api"))
    return found
