"""Checks across fields that pydantic cannot express per field, each located by the YAML
path of the key to fix (pydantic would only say "the spec"). Pure: a Spec in, (path, message)
pairs out; the loader turns them into `path:line: key: message`."""

from __future__ import annotations

from typing import Any

from matrixrun.spec.messages import did_you_mean
from matrixrun.spec.models import Spec
from matrixrun.spec.points import combinations


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
    found += _sizing_issues(spec)
    found += _dataset_issues(spec)
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


def _sizing_issues(spec: Spec) -> list[tuple[tuple[Any, ...], str]]:
    """A cell cannot hold more requests in flight than it sends: with `num_prompts` below a
    swept concurrency the cell measures a lower concurrency than its row says (the README's
    own example once swept to 256 with 64 prompts and reported "+36.8% at 256" from 62-64 in
    flight). Caught here, before anything runs, naming the cells."""
    n = spec.workload.num_prompts
    if n is None:
        return []
    over = sorted({int(c["concurrency"]) for c in combinations(spec) if c["concurrency"] > n})
    if not over:
        return []
    values = " and ".join(map(str, over)) if len(over) <= 2 else f"{over[0]} to {over[-1]}"
    return [
        (
            ("workload", "num_prompts"),
            f"{n} prompts per cell cannot fill concurrency {values}: the cells there would "
            f"never have more than {n} requests in flight; raise num_prompts to at least "
            f"{over[-1]}, size cells by prompts_per_concurrency, or exclude those concurrencies",
        )
    ]


#: Keys that belong to one dataset each; set with another they would be silently ignored.
_OWN_KEYS = {
    "path": ("sharegpt", "trace"),
    "length_filter": ("sharegpt",),
    "context_len": ("sharegpt",),
    "groups": ("shared_prefix",),
    "prompts_per_group": ("shared_prefix",),
    "system_len": ("shared_prefix",),
    "question_len": ("shared_prefix",),
    "time_scale": ("trace",),
}


def _dataset_issues(spec: Spec) -> list[tuple[tuple[Any, ...], str]]:
    """A dataset's keys with that dataset only, the file where one is needed, the axes a
    dataset fixes itself (a ShareGPT prompt's length is the conversation's; a trace's
    schedule is its arrivals), and bench_serving only where its prompts are ours."""
    w = spec.workload
    found: list[tuple[tuple[Any, ...], str]] = []
    for key, kinds in _OWN_KEYS.items():
        if key in w.model_fields_set and w.dataset not in kinds:
            found.append(
                (("workload", key), f"applies to dataset {' and '.join(kinds)} only; remove it")
            )
    if w.dataset in ("sharegpt", "trace") and not w.path:
        found.append(
            (("workload", "dataset"), f"dataset {w.dataset} needs workload.path: the local file")
        )
    fixed: dict[str, tuple[str, ...]] = {
        "sharegpt": ("input_len",),
        "shared_prefix": ("input_len",),
        "trace": ("input_len", "output_len", "request_rate"),
    }
    for axis in fixed.get(w.dataset, ()):
        if getattr(spec.sweep, axis) is not None:
            found.append(
                (("sweep", axis), f"dataset {w.dataset} sets each request's {axis} itself")
            )
    if w.dataset == "trace" and "request_rate" in w.model_fields_set:
        found.append((("workload", "request_rate"), "a trace is replayed on its own schedule"))
    if w.dataset != "random" and spec.engine.client == "bench_serving":
        found.append(
            (
                ("engine", "client"),
                f"bench_serving draws its own prompts, not this {w.dataset} workload's; use "
                "the builtin client (every arm then gets the same requests)",
            )
        )
    if w.dataset == "shared_prefix" and w.num_prompts is not None:
        groups, per, _, _ = w.shared_prefix_shape()
        if w.num_prompts > groups * per:
            found.append(
                (
                    ("workload", "num_prompts"),
                    f"shared_prefix makes {groups * per} prompts (groups x prompts_per_group); "
                    "raise those or lower num_prompts",
                )
            )
    return found
