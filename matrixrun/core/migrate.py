"""Migrations forward: any run directory an earlier matrixrun wrote, in today's format.

The run directory is the contract between stages, and users keep them: a run measured on a GPU
node last month must still render and analyse today. So a format change is never a reason to
refuse a directory; it is a step here. `migrate` takes the directory's files as plain data —
a mapping of file name to content: a JSON file's value, a JSONL file's list of records,
spec.yaml's parsed mapping, spec.sha256's text — and returns the same mapping in the current
format. Every step is a pure function (dict in, dict out: no files, no clock, no matrixrun
model), so each is tested on its own and a step never changes once written: the next format
change is the next step, not an edit to this one.

Where the versions come from is `core.format_version`: settings.json and verdict.json carry
their own, every other file the directory's format.json. The versions move in step: step n
takes every file of version n to n + 1, whether or not its content changes (a file written
newer than the rest — verdict.json after `matrixrun analyse` — is left alone until the others
reach it). Only two readers call `migrate`, on a directory whose files are not all current:
`rundir.results.RunDir`, through which every stage reads a run directory, and `plan.history`,
which reads an earlier run's verdict.json for its noise (`verify.noise_from`) from below
`rundir`. No other reader knows an old format exists.

The steps:

- 0 → 1 (files written before 2026-12-02, commit 9974c4e, which added `schema_version`):
  settings.json gains its version; a directory from before settings.json existed (before
  9cdfdf9) gets one made from what it has — the analysis settings its verdict.json recorded
  (else the spec copy's verify block), and the facts the report states from the spec copy.
  verdict.json loses the sentences the analysis once stored (`text`, `sentence`, `warnings`,
  `multiplicity`; today the report words them) and the split σ fields (`fresh_*`, `warm_*`),
  gains `Overall.metric` and `Overall.cells`, its cell notes become the note enum, and its rerun
  log gains what today's records name (cell id, candidate, kind, the explanation tested).
  The record files (results, events, plan, env) were already what today reads.
- 1 → 2 (2026-12-03): settings.json and the records only take the version; in verdict.json
  the undecided outcome is stored as the word every reader
  sees, `undecided`, not `inconclusive` (cells, regimes, overall verdicts and their per-slice
  verdicts), and `Overall`'s count of such cells is `undecided`.
- 2 → 3 (2026-12-03): the reason of a rerun of an undecided cell is stored as `undecided`
  too, not `inconclusive` — in results.jsonl and its shards (`reason`), in events.jsonl and
  its shards (a verify event's `reason`) and in verdict.json (the rerun log's `reason`, each
  arm's `reasons`) — so one outcome has one stored word everywhere and nothing translates it
  for printing; settings.json only takes the new version.

"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.core.format_version import (
    FORMAT_FILE,
    RECORDS_VERSION,
    SETTINGS_VERSION,
    VERDICT_VERSION,
    check_newer,
    found_version,
)
from matrixrun.core.units import parse_percent

Files = dict[str, Any]
Step = Callable[[Files], Files]

#: Files that carry their own `schema_version`, and the version this matrixrun writes.
SELF_VERSIONED = {"settings.json": SETTINGS_VERSION, "verdict.json": VERDICT_VERSION}


def records_version(files: Mapping[str, Any]) -> int:
    """The version of every file without its own: format.json's, else (a directory from before
    format.json) settings.json's, which was written with them (0 where it has none)."""
    fmt = files.get(FORMAT_FILE)
    if isinstance(fmt, dict) and isinstance(fmt.get("version"), int):
        return int(fmt["version"])
    return found_version(files.get("settings.json"))


def version_of(files: Mapping[str, Any], name: str) -> int:
    """One file's format version: its own `schema_version`, or the directory's records one."""
    if name in SELF_VERSIONED:
        return found_version(files.get(name))
    return records_version(files)


def is_current(files: Mapping[str, Any]) -> bool:
    """Every file present is in this matrixrun's format (nothing to migrate)."""
    if FORMAT_FILE not in files and "settings.json" not in files:
        return False  # a directory from before settings.json, or not a run directory at all
    return records_version(files) == RECORDS_VERSION and all(
        version_of(files, name) == current
        for name, current in SELF_VERSIONED.items()
        if name in files
    )


def migrate(files: Mapping[str, Any]) -> Files:
    """The directory's files in the current format (a new mapping; `files` is not changed).
    A file from a newer matrixrun is refused: nothing migrates backwards."""
    out: Files = copy.deepcopy(dict(files))
    check_newer(records_version(out), RECORDS_VERSION, FORMAT_FILE)
    for name, current in SELF_VERSIONED.items():
        if name in out:
            check_newer(version_of(out, name), current, name)
    out[FORMAT_FILE] = {"version": records_version(out)}
    for version, step in enumerate(STEPS):
        out = step(out)
        if out[FORMAT_FILE]["version"] == version:
            out[FORMAT_FILE] = {"version": version + 1}
    return out


# -- 0 → 1 ---------------------------------------------------------------------------------


def v0_to_v1(files: Files) -> Files:
    """The step to the first recorded versions (see the module's docstring)."""
    out = dict(files)
    if "settings.json" in files and version_of(files, "settings.json") == 0:
        out["settings.json"] = settings_v0_to_v1(files)
    elif records_version(files) == 0 and _settings_source(files):
        out["settings.json"] = settings_v0_to_v1(files)  # from before settings.json existed
    if "verdict.json" in files and version_of(files, "verdict.json") == 0:
        out["verdict.json"] = verdict_v0_to_v1(files)
    return out


def _settings_source(files: Mapping[str, Any]) -> bool:
    """A version-0 directory without settings.json has what one is made from: its spec copy
    or the settings its verdict.json recorded (else it stays without, and the reader says so)."""
    verdict = files.get("verdict.json")
    judged = verdict.get("settings") if isinstance(verdict, dict) else None
    return isinstance(files.get("spec.yaml"), dict) or isinstance(judged, dict)


def settings_v0_to_v1(files: Mapping[str, Any]) -> dict[str, Any]:
    """settings.json as version 1: the old file with its version, or — before settings.json
    was written at all — one made from the verdict's settings and the spec copy."""
    old = files.get("settings.json")
    if isinstance(old, dict):
        return {"schema_version": 1, **{k: v for k, v in old.items() if k != "schema_version"}}
    spec = files.get("spec.yaml")
    verdict = files.get("verdict.json")
    judged = verdict.get("settings") if isinstance(verdict, dict) else None
    if not isinstance(spec, dict) and not isinstance(judged, dict):
        raise InputError(
            "no settings.json, and neither a spec copy (spec.yaml) nor a verdict.json to make "
            "one from: not a run directory that matrixrun wrote"
        )
    spec = spec if isinstance(spec, dict) else None
    records = files.get("results.jsonl") or []
    simulated = any(r.get("simulated") for r in records) or any(
        e.get("event") == "run_start" and e.get("rehearse") for e in files.get("events.jsonl", [])
    )
    scale = max((float(r.get("time_scale") or 1.0) for r in records), default=1.0)
    sha = files.get("spec.sha256")
    facts = None  # an ingested run of the time: no spec, as `ingest` writes today
    if spec is not None:
        facts = spec_facts_v0(spec, simulated)
        facts["spec_sha256"] = sha.split()[0] if isinstance(sha, str) and sha.strip() else None
    return {
        "schema_version": 1,
        "analysis": dict(judged) if isinstance(judged, dict) else analysis_from_spec_v0(spec or {}),
        "rehearsal": simulated,
        "time_scale": scale,
        "spec": facts,
    }


def _get(tree: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = tree.get(key)
    return dict(value) if isinstance(value, dict) else {}


def analysis_from_spec_v0(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Version-0 analysis settings from a spec of that time (a run stopped before its verdict
    was written): the first arm is the baseline, the verify block's percentages as fractions,
    as the runner of that time translated them."""
    verify, metrics = _get(spec, "verify"), _get(spec, "metrics")
    arms = list(_get(spec, "arms"))
    sweep_axes = [k for k, v in _get(spec, "sweep").items() if isinstance(v, list)]
    out: dict[str, Any] = {
        "baseline": arms[0] if arms else "baseline",
        "candidates": arms[1:],
        "primary": metrics.get("primary", "output_throughput"),
        "secondary": list(metrics.get("secondary") or []),
        "looks": max(int(verify.get("max_runs", 1)), 1),
        "axis": sweep_axes[0] if sweep_axes else "concurrency",
    }
    for key, field in (("threshold", "margin"), ("surprise", "surprise"), ("noise", "noise")):
        if verify.get(key) is not None:
            out[field] = parse_percent(str(verify[key]))
    if verify.get("confidence") is not None:
        out["confidence"] = float(verify["confidence"])
    return out


def spec_facts_v0(spec: Mapping[str, Any], simulated: bool) -> dict[str, Any]:
    """What the report states about the experiment, read from a spec copy of the time before
    settings.json (the keys it had then; today's defaults where it left one out)."""
    engine, workload = _get(spec, "engine"), _get(spec, "workload")
    rehearsal, verify = _get(spec, "rehearsal"), _get(spec, "verify")
    arms = _get(spec, "arms")
    arm_keys = list(dict.fromkeys(k for flags in arms.values() if flags for k in flags))
    rate = workload.get("request_rate")
    facts: dict[str, Any] = {
        "hypothesis": " ".join(str(spec["hypothesis"]).split()) if spec.get("hypothesis") else None,
        "notes": str(spec["notes"]).strip() if spec.get("notes") else None,
        "engine": str(engine.get("kind", "sglang")),
        "client": str(engine.get("client", "builtin")),
        "launch": engine.get("launch"),
        "workload": {
            "dataset": workload.get("dataset", "random"),
            "range_ratio": float(workload.get("range_ratio", 1.0)),
            "input_len": int(workload.get("input_len", 0)),
            "output_len": int(workload.get("output_len", 0)),
            "request_rate": None if rate in (None, "inf", float("inf")) else float(rate),
            "num_prompts": workload.get("num_prompts"),
            "warmup_requests": workload.get("warmup_requests", 0),
            "seed": int(workload.get("seed", 0)),
        },
        "sweep": {
            k: v
            for k, v in _get(spec, "sweep").items()
            if isinstance(v, list) and len(v) > 1 and k not in ("model", "hardware")
        },
        "engine_arg_keys": list(_get(engine, "args")),
        "arm_flag_keys": arm_keys,
        "asked": sorted(arm_keys),
        "max_runs": int(verify.get("max_runs", 1)),
        "stream_interval": rehearsal.get("stream_interval"),
        "rehearsal_note": str(rehearsal["note"]).strip() if rehearsal.get("note") else None,
    }
    if simulated:
        profile = _get(rehearsal, "profile")
        facts["rehearsal"] = {
            "profile": str(profile.get("name") or rehearsal.get("profile") or "default"),
            "bundled": not rehearsal.get("profile"),
            "seed": str(rehearsal.get("seed", spec.get("experiment", ""))),
            "blind": [],
        }
    return facts


#: Version-0 verdicts stored these sentences; today the report words every one.
_V0_WORDS = ("text", "sentence")
_V0_SIGMA = ("fresh_value", "fresh_df", "warm_value", "warm_df")
#: Version-0 cell notes were sentences; the words that tell which note each was.
_V0_NOTES = (
    ("no successful measurement of the baseline", "no_baseline"),
    ("no successful measurement of the candidate", "no_candidate"),
    ("no σ", "no_noise"),
    ("candidate fails", "candidate_unreliable"),
    ("baseline fails", "baseline_unreliable"),
    ("warmup", "warmup"),
    ("one server", "one_server"),
)


def _drop(record: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in keys}


def _note_v0(note: Any) -> str | None:
    text = str(note)
    if text in {n for _, n in _V0_NOTES}:
        return text  # already the enum's value
    return next((value for words, value in _V0_NOTES if words in text), None)


def _overall_v0(overall: Mapping[str, Any], metric: str) -> dict[str, Any]:
    out = _drop(overall, _V0_WORDS)
    out.setdefault("metric", metric)
    if "cells" not in out:
        out["cells"] = sum(int(out.get(k, 0)) for k in ("better", "worse", "same", "inconclusive"))
    return out


def _cell_v0(cell: Mapping[str, Any]) -> dict[str, Any]:
    out = _drop(cell, _V0_WORDS)
    notes = [_note_v0(n) for n in out.get("notes", [])]
    out["notes"] = [n for n in dict.fromkeys(notes) if n is not None]
    return out


def _metric_v0(result: Mapping[str, Any]) -> dict[str, Any]:
    metric = str(result.get("metric"))
    out = dict(result)
    out["sigma"] = _drop(_drop(result.get("sigma", {}), _V0_SIGMA), _V0_WORDS)
    out["series"] = [
        {
            **_drop(series, _V0_WORDS),
            "cells": [_cell_v0(c) for c in series.get("cells", [])],
            "regimes": [_drop(r, _V0_WORDS) for r in series.get("regimes", [])],
        }
        for series in result.get("series", [])
    ]
    out["overall"] = _overall_v0(result.get("overall", {}), metric)
    return out


def _rerun_v0(
    rerun: Mapping[str, Any],
    cell_ids: Mapping[tuple[str, str], str],
    baseline: str,
    candidates: list[str],
) -> dict[str, Any]:
    """A version-0 rerun record: its cell id from results.jsonl, its candidate (a baseline
    rerun belongs to the first candidate's comparison, as the analysis of the time judged
    it), where it ran and so what it tested (a warm rerun tests warm-up, a fresh one the
    instance)."""
    out = _drop(rerun, (*_V0_WORDS, "same_instance"))
    arm = str(rerun.get("arm"))
    warm = bool(rerun.get("same_instance"))
    out.setdefault("cell_id", cell_ids.get((arm, str(rerun.get("point_id"))), ""))
    out.setdefault("candidate", arm if arm != baseline or not candidates else candidates[0])
    out.setdefault("kind", "warm" if warm else "fresh_server")
    if "tests" not in out:
        surprise = rerun.get("reason") == "surprise"
        out["tests"] = ("warmup" if warm else "instance") if surprise else "replicate"
    return out


def verdict_v0_to_v1(files: Mapping[str, Any]) -> dict[str, Any]:
    """verdict.json as version 1 (see the module's docstring); numbers are kept as the
    analysis of the time computed them — `matrixrun analyse` judges the run again."""
    old = files["verdict.json"]
    settings = old.get("settings", {})
    primary = str(settings.get("primary", "output_throughput"))
    out = _drop(old, ("multiplicity", "warnings"))
    out["schema_version"] = 1
    out["sigma"] = [_drop(_drop(s, _V0_SIGMA), _V0_WORDS) for s in old.get("sigma", [])]
    out["slices"] = [
        {
            **slice_,
            "candidates": [
                {
                    **cand,
                    "metrics": [_metric_v0(m) for m in cand.get("metrics", [])],
                    "overall": _overall_v0(cand.get("overall", {}), primary),
                }
                for cand in slice_.get("candidates", [])
            ],
        }
        for slice_ in old.get("slices", [])
    ]
    out["overall"] = {k: _overall_v0(v, primary) for k, v in old.get("overall", {}).items()}
    cell_ids = {
        (str(r.get("arm")), str(r.get("point_id"))): str(r.get("cell_id"))
        for r in files.get("results.jsonl", [])
    }
    candidates = [str(c) for c in settings.get("candidates", [])]
    baseline = str(settings.get("baseline", ""))
    out["reruns"] = [_rerun_v0(r, cell_ids, baseline, candidates) for r in old.get("reruns", [])]
    return out


# -- 1 → 2 ---------------------------------------------------------------------------------


def v1_to_v2(files: Files) -> Files:
    """verdict.json's undecided outcome stored as `undecided` (see the module's docstring);
    settings.json only takes the new version."""
    out = dict(files)
    if "settings.json" in files and version_of(files, "settings.json") == 1:
        out["settings.json"] = {**files["settings.json"], "schema_version": 2}
    if "verdict.json" in files and version_of(files, "verdict.json") == 1:
        out["verdict.json"] = verdict_v1_to_v2(files["verdict.json"])
    return out


def _undecided(word: Any) -> Any:
    return "undecided" if word == "inconclusive" else word


def _overall_v1(overall: Mapping[str, Any]) -> dict[str, Any]:
    """An `Overall` with its verdict word and its count renamed, keys in their order."""
    out = {("undecided" if k == "inconclusive" else k): v for k, v in overall.items()}
    out["verdict"] = _undecided(out.get("verdict"))
    out["by_slice"] = [
        {**b, "verdict": _undecided(b.get("verdict"))} for b in out.get("by_slice", [])
    ]
    return out


def _metric_v1(result: Mapping[str, Any]) -> dict[str, Any]:
    series = [
        {
            **s,
            "cells": [{**c, "verdict": _undecided(c.get("verdict"))} for c in s.get("cells", [])],
            "regimes": [
                {**r, "verdict": _undecided(r.get("verdict"))} for r in s.get("regimes", [])
            ],
        }
        for s in result.get("series", [])
    ]
    return {**result, "series": series, "overall": _overall_v1(result.get("overall", {}))}


def verdict_v1_to_v2(old: Mapping[str, Any]) -> dict[str, Any]:
    """verdict.json as version 2: every stored verdict word `inconclusive` is `undecided`."""
    slices = [
        {
            **sl,
            "candidates": [
                {
                    **cand,
                    "metrics": [_metric_v1(m) for m in cand.get("metrics", [])],
                    "overall": _overall_v1(cand.get("overall", {})),
                }
                for cand in sl.get("candidates", [])
            ],
        }
        for sl in old.get("slices", [])
    ]
    overall = {k: _overall_v1(v) for k, v in old.get("overall", {}).items()}
    return {**old, "schema_version": 2, "slices": slices, "overall": overall}


# -- 2 → 3 ---------------------------------------------------------------------------------

#: The files of records whose `reason` may name a rerun's reason: results and the audit log,
#: and their per-node shards.
_REASON_FILES = ("results.jsonl", "events.jsonl", "results.d/", "events.d/")


def _reason_v2(record: Any) -> Any:
    """A record with `reason: inconclusive` as `reason: undecided` (others as they are)."""
    if isinstance(record, dict) and record.get("reason") == "inconclusive":
        return {**record, "reason": "undecided"}
    return record


def _arm_v2(arm: Any) -> Any:
    if not isinstance(arm, dict) or not isinstance(arm.get("reasons"), list):
        return arm
    return {**arm, "reasons": [_undecided(r) for r in arm["reasons"]]}


def verdict_v2_to_v3(old: Mapping[str, Any]) -> dict[str, Any]:
    """verdict.json as version 3: the rerun log's and every arm's reason `inconclusive` is
    `undecided`."""
    slices = [
        {
            **sl,
            "candidates": [
                {
                    **cand,
                    "metrics": [
                        {
                            **m,
                            "series": [
                                {
                                    **s,
                                    "cells": [
                                        {
                                            **c,
                                            "baseline": _arm_v2(c.get("baseline")),
                                            "candidate": _arm_v2(c.get("candidate")),
                                        }
                                        for c in s.get("cells", [])
                                    ],
                                }
                                for s in m.get("series", [])
                            ],
                        }
                        for m in cand.get("metrics", [])
                    ],
                }
                for cand in sl.get("candidates", [])
            ],
        }
        for sl in old.get("slices", [])
    ]
    reruns = [_reason_v2(r) for r in old.get("reruns", [])]
    return {**old, "schema_version": 3, "slices": slices, "reruns": reruns}


def v2_to_v3(files: Files) -> Files:
    """A rerun's reason `inconclusive` stored as `undecided` (see the module's docstring)."""
    out = dict(files)
    if "settings.json" in files and version_of(files, "settings.json") == 2:
        out["settings.json"] = {**files["settings.json"], "schema_version": 3}
    if "verdict.json" in files and version_of(files, "verdict.json") == 2:
        out["verdict.json"] = verdict_v2_to_v3(files["verdict.json"])
    if records_version(files) == 2:
        for name, records in files.items():
            if name.startswith(_REASON_FILES) and isinstance(records, list):
                out[name] = [_reason_v2(r) for r in records]
    return out


#: STEPS[n] takes every file of version n to n + 1.
STEPS: list[Step] = [v0_to_v1, v1_to_v2, v2_to_v3]


def current_of(name: str) -> int:
    """The version this matrixrun writes `name` in."""
    return SELF_VERSIONED.get(name, RECORDS_VERSION)
