"""The sweep's points: every combination of the spec's axes (arm aside) after `exclude` and
`include`, in sweep order. A property of the spec alone, so the spec's own bounds check and the
plan's expansion read the same points."""

from __future__ import annotations

import itertools
import math
from typing import Any

from matrixrun.spec.models import CLIENT_AXES, Spec


def server_points(spec: Spec) -> list[dict[str, Any]]:
    """Every (model, hardware, server axes) combination before exclude/include."""
    server_names = list(spec.sweep.server)
    out: list[dict[str, Any]] = []
    for model in spec.models:
        for hw in spec.hardwares:
            for values in itertools.product(*(spec.sweep.server[n] for n in server_names)):
                out.append(
                    {
                        "model": model.label,
                        "hardware": hw.label,
                        **{f"server.{n}": v for n, v in zip(server_names, values, strict=True)},
                    }
                )
    return out


def client_points(spec: Spec) -> list[dict[str, Any]]:
    axes = spec.axis_values()
    names = list(CLIENT_AXES)
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(axes[n] for n in names))
    ]


def _matches(combo: dict[str, Any], full: dict[str, Any]) -> bool:
    return all(key in full and _same(full[key], value) for key, value in combo.items())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, str) and b.lower() in ("inf", "infinity"):
        return math.isinf(a)
    return bool(a == b)


def combinations(spec: Spec) -> list[dict[str, Any]]:
    """All axis combinations (arm aside) after `exclude` and `include`, in sweep order."""
    full = [{**s, **c} for s in server_points(spec) for c in client_points(spec)]
    kept = [f for f in full if not any(_matches(ex, f) for ex in spec.exclude)]
    axes = spec.axis_values()
    for inc in spec.include:
        combo = {k: (inc[k] if k in inc else v[0]) for k, v in axes.items()}
        for k, v in inc.items():  # server axes named only in include
            combo.setdefault(k, v)
        if combo["request_rate"] in ("inf", "infinity"):
            combo["request_rate"] = math.inf
        if not any(_matches(combo, k) and _matches(k, combo) for k in kept):
            kept.append(combo)
    return kept


def output_len_given(spec: Spec) -> bool:
    """Whether the spec gives the output length itself (in the workload or swept): then it
    replaces each ShareGPT reply's length. One rule for what is sent (the dataset) and what
    the report says was sent (settings.json)."""
    return "output_len" in spec.workload.model_fields_set or spec.sweep.output_len is not None
