"""Extending a run: resuming a run directory with a spec whose only change lets the verify
policy do more — `verify.max_runs` or `verify.budget` raised — keeps every measurement and
measures only what the policy now asks for.

Why these two and nothing else: the verify policy is a function of the measurements so far
(`verify.Schedule`), so a resumed run replays it over what is on file, and with more runs or
more rerun time allowed it asks for the reruns the old limits stopped. Nothing measured
changes meaning: cell ids hash what defines a measurement (model, flags, workload), not the
verify block. Anything else is refused with the sentence resuming always gave: a changed
workload, arm, sweep or model would mix measurements of two experiments; a changed margin or
confidence would re-judge data already seen against a standard chosen after seeing it; a
lower limit would orphan runs already made. Which rounds were spent and at what levels the
new `max_runs` judges the states is docs/verdicts.md's ("Extending a finished run").

The amendment (each key's old and new value, the spec's sha256 before and after, when) goes
to the audit log as an `amend` event; the report's Setup states it. The run directory's spec
copy is then the new text, so a second resume compares against it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from matrixrun.core.errors import InputError
from matrixrun.rundir.results import RunDir
from matrixrun.spec.models import VerifySpec

#: The verify keys a resumed run may raise (and only raise): each lets the policy do more.
RAISABLE = ("max_runs", "budget")


@dataclass(frozen=True)
class Change:
    """One raised key: `verify.<key>` from `old` to `new` (None: no limit)."""

    key: str
    old: float | int | None
    new: float | int | None


@dataclass(frozen=True)
class Amendment:
    """What a resume changed in the run's spec, and the spec's sha256 before and after."""

    changes: tuple[Change, ...]
    sha_before: str
    sha_after: str


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _differs(rd: RunDir, spec_path: Path, detail: str = "") -> InputError:
    """The refusal resuming has always given, with what in particular differs."""
    old = rd.path / "spec.yaml"
    why = f" ({detail})" if detail else ""
    return InputError(
        f"{spec_path} differs from the spec this run started with ({old}){why}; resume with "
        f"that file (`--resume {rd.path}` and spec {old}) or start a new run, so no "
        "measurement is mixed with cells of another spec; only raising verify.max_runs or "
        "verify.budget extends a run"
    )


def _data(text: str) -> Any:
    """The YAML as plain data (both texts validated as specs before: a failure is a bug's)."""
    return YAML(typ="safe", pure=True).load(text)


def _without_raisable(data: Any) -> Any:
    """The spec's data with the raisable verify keys left out (an empty verify block too)."""
    if not isinstance(data, dict) or not isinstance(data.get("verify"), dict):
        return data
    verify = {k: v for k, v in data["verify"].items() if k not in RAISABLE}
    rest = {k: v for k, v in data.items() if k != "verify"}
    return {**rest, "verify": verify} if verify else rest


def first_difference(old: Any, new: Any, path: str = "") -> str | None:
    """The first key (dotted, in the new spec's order) whose value differs, so the refusal
    names what to put back; None when the two are equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*new, *(k for k in old if k not in new)]:
            inner = f"{path}.{key}" if path else str(key)
            if key not in old or key not in new:
                return inner
            found = first_difference(old[key], new[key], inner)
            if found is not None:
                return found
        return None
    return None if old == new else (path or "the spec")


def _verify(data: Any) -> VerifySpec:
    block = data.get("verify") if isinstance(data, dict) else None
    return VerifySpec.model_validate(block or {})


def _raised(old: VerifySpec, new: VerifySpec) -> list[Change] | str:
    """The raisable keys that changed, or why a change is not a raise."""
    changes: list[Change] = []
    if new.max_runs < old.max_runs:
        return (
            f"verify.max_runs {new.max_runs} is below the {old.max_runs} this run started "
            "with: a run can be extended, not shortened"
        )
    if new.max_runs > old.max_runs:
        changes.append(Change("max_runs", old.max_runs, new.max_runs))
    if old.budget is not None and (new.budget is None or new.budget > old.budget):
        changes.append(Change("budget", old.budget, new.budget))
    elif new.budget is not None and (old.budget is None or new.budget < old.budget):
        return "verify.budget is lower than this run started with: a run cannot be shortened"
    return changes


def amendment(rd: RunDir, spec_path: Path, spec_text: str) -> Amendment | None:
    """What resuming `rd` with `spec_text` changes (None: the same spec), or one sentence
    refusing it: anything but a raised `verify.max_runs` or `verify.budget` differs, a limit
    was lowered, or the run's own copy was edited after the run wrote it (what it said then
    is gone, so the change cannot be checked)."""
    old_path = rd.path / "spec.yaml"
    if not old_path.exists():
        return None  # a run older than the copy: nothing to compare with
    old_text = old_path.read_text(encoding="utf-8")  # as `RunDir.write_text` wrote it
    recorded = rd.path / "spec.sha256"
    if recorded.exists() and recorded.read_text(encoding="utf-8").strip() != sha256(old_text):
        raise _differs(
            rd,
            spec_path,
            f"{old_path} was edited after the run wrote it, so what changed cannot be checked; "
            "undo that edit and give the changed spec as a file of its own",
        )
    if old_text == spec_text:
        return None
    try:
        old, new = _data(old_text), _data(spec_text)
        verdict = _raised(_verify(old), _verify(new))
    except (YAMLError, ValidationError) as exc:  # the copy no longer reads as a spec
        raise _differs(rd, spec_path, f"{old_path} does not read as a spec: {exc}") from exc
    if isinstance(verdict, str):
        raise _differs(rd, spec_path, verdict)
    where = first_difference(_without_raisable(old), _without_raisable(new))
    if where is not None:
        raise _differs(rd, spec_path, f"{where} changed")
    return Amendment(tuple(verdict), sha256(old_text), sha256(spec_text))


def record_amendment(rd: RunDir, amended: Amendment, spec_path: Path, spec_text: str) -> None:
    """The `amend` event, and the run's spec copy (and its sha256) as amended — written
    together, so a resume that fails to start later neither loses nor repeats the record."""
    rd.event(
        "amend",
        changes=[
            {"setting": f"verify.{c.key}", "old": c.old, "new": c.new} for c in amended.changes
        ],
        spec=str(spec_path),
        spec_sha256_before=amended.sha_before,
        spec_sha256_after=amended.sha_after,
    )
    rd.write_text("spec.yaml", spec_text)
    rd.write_text("spec.sha256", amended.sha_after + "\n")
