"""The sweep axis when the files say it and the caller did not: a run of `--request-rate`
sweeps (old sglang.bench_serving lines, vLLM v0.8 files, inference-perf stages, nightly
tables) has `max_concurrency` null everywhere, and its point is whatever varies.

`find` looks only when the caller left `--axis-field` at its default (`max_concurrency`) and
no run has that field: then the one candidate field that varies across the runs of an arm is
the axis; when none varies every arm ran one point, named by its request rate where every run
has one; when several vary, or a field is missing from some runs, it asks in one sentence
which to use. A field some runs have and others lack is never guessed over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run

__all__ = ["CANDIDATES", "find"]

DEFAULT = "max_concurrency"
#: Fields that can be the point of a sweep, in the order a tie is broken.
CANDIDATES = ("request_rate", "random_input_len", "random_output_len")


def _values(runs: Sequence[Run], name: str) -> list[Any]:
    return [r.record.field(name) for r in runs]


def find(runs: Sequence[Run], axis_field: str) -> tuple[str, str | None]:
    """(the axis field, why it was chosen — None when the caller's choice stands)."""
    if axis_field != DEFAULT or any(r.record.max_concurrency is not None for r in runs):
        return axis_field, None
    arms: dict[str, list[Run]] = {}
    for r in runs:
        arms.setdefault(str(r.record.tag), []).append(r)
    varying = []
    for name in CANDIDATES:
        for group in arms.values():
            values = _values(group, name)
            if any(v is not None for v in values) and len({repr(v) for v in values}) > 1:
                varying.append(name)
                break
    files = ", ".join(dict.fromkeys(r.record.source for r in runs[:3]))
    more = " …" if len({r.record.source for r in runs}) > 3 else ""
    if len(varying) == 1:
        name = varying[0]
        if any(v is None for v in _values(runs, name)):
            raise InputError(
                f"{files}{more}: max_concurrency is null and {name} varies but some runs lack "
                f"it; pass --axis-field with a field every run has"
            )
        return (
            name,
            f"{name}: the only field that varies across the runs (max_concurrency is null "
            "in every one)",
        )
    if len(varying) > 1:
        raise InputError(
            f"{files}{more}: max_concurrency is null in every run and {' and '.join(varying)} "
            f"all vary; pass --axis-field {varying[0]} (or --axis-field {varying[1]} with "
            f"--point-field {varying[0]}) to say which is the sweep"
        )
    if all(v is not None for v in _values(runs, "request_rate")):
        return (
            "request_rate",
            "request_rate: one point per arm, named by its request rate (max_concurrency "
            "is null in every run)",
        )
    return axis_field, None
