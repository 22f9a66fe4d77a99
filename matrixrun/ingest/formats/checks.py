"""What must agree across the runs of one comparison, and what a report must say first when
the files themselves limit what the verdict may claim.

A verdict credits the difference between arms to the server configuration under test. Runs
against different models, on different GPUs, over different datasets or measured by
different versions of a client differ in more than that, so they are refused unless the
caller allows a named difference; then it becomes a caveat, shown in the report's first
lines. Speculative decoding, points that only some arms ran and failure counts a file does
not record are caveats too. Each caveat
is data (`kind` plus what it is about); `report/sections/headline.py` words it for the report and
`caveat_line` here for the ingest summary.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.ingest.formats.run import Run

__all__ = [
    "IDENTITY", "by_reason", "caveat_line", "differences", "failures_caveat", "identity_caveats",
    "one_arm_points",
]  # fmt: skip

#: What a run's identity records, as `--allow-difference` names it.
IDENTITY = ("model", "gpu", "dataset", "client-version")
_KEY = {"client-version": "client version"}


def _short(value: str, limit: int = 80) -> str:
    """A value as a message quotes it: a dataset spec can be a page of JSON."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _key(name: str) -> str:
    return _KEY.get(name, name)


#: Formats of one client (a client version is compared among one client's runs only).
_SAME_CLIENT = {"vllm_sweep": "vllm", "vllm_table": "vllm"}


def _compared(runs: Sequence[Run], name: str) -> list[bool]:
    """Which runs take part in the check of `name`: all, except for the client version, which
    only runs of one client that record different versions (clients differ in version as a
    matter of course; mixing them is --mix-formats' question, not this one's)."""
    if name != "client-version":
        return [True] * len(runs)
    seen: dict[str, set[str]] = {}
    for r in runs:
        value = r.identity.get(_key(name))
        if value is not None:
            seen.setdefault(_SAME_CLIENT.get(r.format, r.format), set()).add(value)
    return [len(seen.get(_SAME_CLIENT.get(r.format, r.format), ())) > 1 for r in runs]


def differences(runs: Sequence[Run], arms: Sequence[str]) -> dict[str, dict[str, list[str]]]:
    """identity field -> arm -> the values its runs recorded, for the fields whose recorded
    values are not all one (runs that record nothing for a field are not counted)."""
    out: dict[str, dict[str, list[str]]] = {}
    for name in IDENTITY:
        by_arm: dict[str, list[str]] = {}
        for run, arm, compared in zip(runs, arms, _compared(runs, name), strict=True):
            if not compared:
                continue
            value = run.identity.get(_key(name))
            if value is not None and value not in by_arm.setdefault(arm, []):
                by_arm[arm].append(value)
        if len({v for vs in by_arm.values() for v in vs}) > 1:
            out[name] = {a: vs for a, vs in by_arm.items() if vs}
    return out


def identity_caveats(
    runs: Sequence[Run], arms: Sequence[str], allowed: Collection[str]
) -> list[dict[str, Any]]:
    """The allowed differences as caveats; a difference not allowed is an InputError that
    names two runs, the field, both values and what to do."""
    caveats: list[dict[str, Any]] = []
    for name, by_arm in differences(runs, arms).items():
        if name in allowed:
            caveats.append({"kind": "differs", "field": name, "values": by_arm})
            continue
        key = _key(name)
        among = [r for r, c in zip(runs, _compared(runs, name), strict=True) if c]
        first = among[0]
        other = next(r for r in among if r.identity.get(key) not in (None, first.identity.get(key)))
        if first.identity.get(key) is None:
            first = next(r for r in among if r.identity.get(key) not in (None, other.identity[key]))
        raise InputError(
            f"{first.record.where} and {other.record.where} differ in {key} "
            f"({_short(first.identity[key])} vs {_short(other.identity[key])}): a verdict "
            "would credit the "
            f"server configuration with what the {key} changed; ingest runs of one {key}, "
            f"or pass --allow-difference {name} to compare them anyway (the report then "
            "says so in its first lines)"
        )
    return caveats


def spec_decode_caveat(runs: Sequence[Run], arms: Sequence[str]) -> dict[str, Any] | None:
    """Arms whose runs show speculative decoding, with what showed it."""
    found: dict[str, str] = {}
    for run, arm in zip(runs, arms, strict=True):
        if run.spec_decode is not None:
            found.setdefault(arm, run.spec_decode)
    return {"kind": "spec_decode", "arms": found} if found else None


def failures_caveat(runs: Sequence[Run], arms: Sequence[str]) -> dict[str, Any] | None:
    """Arms whose files record no failure count, with why: their `failed` is 0 for want of a
    number, so the report's failed-request count must not read as a check passed."""
    found: dict[str, str] = {}
    for run, arm in zip(runs, arms, strict=True):
        if run.failures_unrecorded is not None:
            found.setdefault(arm, run.failures_unrecorded)
    return {"kind": "failures_not_recorded", "arms": found} if found else None


def by_reason(caveat: dict[str, Any]) -> str:
    """A caveat's arms grouped by their reason: 'a, b (why); c (other)'."""
    groups: dict[str, list[str]] = {}
    for arm, why in caveat["arms"].items():
        groups.setdefault(str(why), []).append(arm)
    return "; ".join(f"{', '.join(arms)} ({why})" for why, arms in groups.items())


def one_arm_points(measurements: Sequence[Measurement]) -> dict[str, Any] | None:
    """Points that not every arm ran (nothing to compare them with), with the arms that did."""
    arms = list(dict.fromkeys(m.arm for m in measurements))
    at: dict[str, list[str]] = {}
    for m in measurements:
        text = ", ".join(f"{k} {v}" for k, v in m.point.items())
        if m.arm not in at.setdefault(text, []):
            at[text].append(m.arm)
    lonely = {p: a for p, a in at.items() if len(a) < len(arms)}
    return {"kind": "one_arm_points", "points": lonely} if lonely else None


def caveat_line(caveat: dict[str, Any]) -> str:
    """One line of the ingest summary for a caveat (the report words it in its own way)."""
    kind = caveat["kind"]
    if kind == "differs":
        values = "; ".join(f"{a}: {', '.join(vs)}" for a, vs in caveat["values"].items())
        return f"compared anyway, arms differ in {_key(caveat['field'])}: {values}"
    if kind == "spec_decode":
        shown = ", ".join(f"{a} ({why})" for a, why in caveat["arms"].items())
        return (
            f"speculative decoding in {shown}: a streamed chunk carries several tokens, so "
            "ITL per chunk is not per token; ITL is left out"
        )
    if kind == "failures_not_recorded":
        return f"failed requests not recorded (counted as 0, not measured): {by_reason(caveat)}"
    points = "; ".join(f"{p} (only {', '.join(a)})" for p, a in caveat["points"].items())
    return f"points not every arm ran, nothing to compare them with: {points}"
