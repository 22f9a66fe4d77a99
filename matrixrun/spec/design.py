"""What `verify.design: fixed` allows (a calibration run: every cell max_runs times, each run on
its own launch, nothing chosen by the data; `verify/fixed.py` runs it). Kept apart from the
models so the rule reads in one place: a setting that contradicts the design, asked for
explicitly, is refused with one sentence; the defaults are set to what the design does, so
every reader of the spec (plan, cost, report) agrees with what runs."""

from __future__ import annotations

from typing import Protocol, TypeVar


class _Verify(Protocol):
    """The part of the spec's verify block the rules read (`spec.models.VerifySpec`)."""

    @property
    def design(self) -> str: ...

    @property
    def max_runs(self) -> int: ...

    @property
    def model_fields_set(self) -> set[str]: ...


_V = TypeVar("_V", bound=_Verify)

#: The verify settings a fixed design implies.
DESIGN = {"bisect": 0, "aa": False, "warm_rerun": False, "fresh_server": True}


def fixed_design_rules(v: _V) -> _V:
    """`v` unchanged unless it is a fixed design; then checked (ValueError: the sentence the
    loader puts at the verify block's line) and given the design's settings."""
    if v.design != "fixed":
        return v
    if v.max_runs < 2:
        raise ValueError(
            "design: fixed needs max_runs of at least 2 (each run is its own launch, and "
            "one launch per arm shows no launch-to-launch noise); set max_runs: 3"
        )
    asked = [
        f"{k}: {str(getattr(v, k)).lower()}"
        for k, value in DESIGN.items()
        if k in v.model_fields_set and getattr(v, k) != value
    ]
    if asked:
        them = "it" if len(asked) == 1 else "them"
        raise ValueError(
            f"design: fixed runs nothing the data choose and relaunches for every run, so "
            f"{' and '.join(asked)} cannot apply; remove {them}, or use design: adaptive"
        )
    for k, value in DESIGN.items():
        setattr(v, k, value)
    return v
