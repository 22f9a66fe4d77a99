"""Turn `sglang.bench_serving --output-file` results into Measurements, so runs made by hand
(the way the CuteDSL write-up was made) get the same verdict and report as planned runs.

Pure apart from reading the files: `measurements_from_records` does the mapping, and
`measurements_from_files` only reads and parses before calling it. The CLI
(`matrixrun ingest FILE... --baseline ARM --out RUN_DIR [--threshold 3%]`) writes the run
directory from the result.

Mapping, by default:
- arm: the line's `tag`, else the file's name without extension (`--arm-field` picks another
  field, e.g. `server_info.moe_runner_backend`);
- sweep point: `max_concurrency`, on the axis "concurrency" (`--axis-field` picks another;
  `point_fields` add further axes); every other workload field (dataset, input/output lengths,
  range ratio) must agree across the lines of a point, else the comparison would be of unlike
  runs and ingest refuses with what to pass;
- repeats: several lines for one (arm, point) are repeats in file order (attempt 1, 2, ...).
  We do not know why a person reran a cell, so repeats get reason "manual". By default
  (`servers="same"`) all lines of an arm came from one server launch, so repeats are warm
  repeats on the same instance; `servers="fresh"` says each repeat came from a freshly
  launched server (reason "fresh_server", instance `ARM#k` for the k-th run), and
  `servers="per_file"` says each file is one server launch (instance `ARM@FILESTEM`).
- settings without a spec: margin 3%, surprise 10%, no noise prior, 95% confidence, one look,
  primary output_throughput, secondaries `DEFAULT_SECONDARY`.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement, Reason
from matrixrun.core.verdict import AnalysisSettings
from matrixrun.load.bench_serving import BenchServingRecord, read_file
from matrixrun.plan import cell_id, point_id

__all__ = [
    "BENCH_SERVING",
    "DEFAULT_SECONDARY",
    "ClientWords",
    "IngestResult",
    "ServerMode",
    "arm_name",
    "axis_name",
    "measurements_from_files",
    "measurements_from_records",
]

ServerMode = Literal["same", "fresh", "per_file"]
DEFAULT_SECONDARY = ["median_ttft_ms", "median_tpot_ms", "median_itl_ms"]
#: Workload fields that must agree across the lines of one point unless they are point axes.
WORKLOAD_FIELDS = ("dataset_name", "random_input_len", "random_output_len", "random_range_ratio")
_AXIS_NAMES = {
    "max_concurrency": "concurrency",
    "random_input_len": "input_len",
    "random_output_len": "output_len",
}


@dataclass(frozen=True)
class ClientWords:
    """The phrases a mapping message needs, in the words of the client that wrote the
    records (bench_serving's `--tag` means nothing to a vLLM user); formats/words.py has
    each client's."""

    #: What one run is in the client's files ("line", "file", "benchmark", "export").
    unit: str
    #: Where the arm name comes from when --arm-field is left out.
    default_arm: str
    #: How to give each arm its own name, for "only one arm" refusals.
    arm_hint: str
    #: Why a run may lack max_concurrency, and what to pass then.
    no_concurrency: str


BENCH_SERVING = ClientWords(
    unit="line",
    default_arm="the tag (or the file name)",
    arm_hint="give each arm its own --tag or file",
    no_concurrency="(bench_serving ran without --max-concurrency?)",
)


class IngestResult(BaseModel):
    """Measurements (in input order), the records they came from (same order, for writing
    per-request details), the arms found, and analysis settings with documented defaults."""

    model_config = ConfigDict(extra="forbid")

    measurements: list[Measurement]
    records: list[BenchServingRecord]
    arms: list[str]
    settings: AnalysisSettings


def axis_name(field: str) -> str:
    """The axis a bench_serving field becomes: max_concurrency → concurrency, etc."""
    return _AXIS_NAMES.get(field, field)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # 'inf': results.jsonl is strict JSON
    return value


def _file_stem(record: BenchServingRecord) -> str:
    return Path(record.source).stem


#: A later run of an arm, as the report's "Settle it" command names its files and folders
#: (`x.run2.json` beside `x.json`, `results.run2/` beside `results/`): `NAME.runN`.
_RERUN = re.compile(r"^(?P<name>.+)\.run[0-9]+$")


def arm_name(name: str) -> str:
    """A file stem or folder name as the arm it names: less a `.runN` ending, so the second
    run the settle command asks for is a run of the same arm, not a new one (the arm then
    repeats, on another launch with `--servers per-file`)."""
    match = _RERUN.fullmatch(name)
    return match.group("name") if match else name


def _arm_for(r: BenchServingRecord, arm_field: str, words: ClientWords) -> str:
    value = r.field(arm_field)
    if value is None or value == "":
        if arm_field == "tag":
            return arm_name(_file_stem(r))
        raise InputError(
            f"{r.where}: no {arm_field!r} field to name the arm; pass another --arm-field "
            f"or leave it out to use {words.default_arm}"
        )
    return str(value)


def _point_for(r: BenchServingRecord, fields: Sequence[str], words: ClientWords) -> dict[str, Any]:
    point: dict[str, Any] = {}
    for f in fields:
        value = r.field(f)
        if value is None:
            hint = f" {words.no_concurrency}" if f == "max_concurrency" else ""
            raise InputError(
                f"{r.where}: no {f!r} field for the sweep point{hint}; pass --axis-field "
                f"with a field every {words.unit} has, e.g. request_rate"
            )
        point[axis_name(f)] = _json_safe(value)
    return point


Keyed = tuple[BenchServingRecord, str, dict[str, Any], str]


def _keyed(
    records: Sequence[BenchServingRecord],
    arm_for: Callable[[BenchServingRecord], str],
    point_for: Callable[[BenchServingRecord], dict[str, Any]],
    point_keys: set[str],
    slice: str,
    words: ClientWords,
) -> list[Keyed]:
    """Each record with its arm, point and point id. Workload fields not on the point must
    agree across every line of a point (else the lines measured different things)."""
    keyed: list[Keyed] = []
    first_at: dict[str, BenchServingRecord] = {}
    for r in records:
        arm = arm_for(r)
        point = point_for(r)
        workload = {f: _json_safe(getattr(r, f)) for f in WORKLOAD_FIELDS if f not in point_keys}
        pid = point_id(
            {"source": "bench_serving", "slice": slice, "point": point, "workload": workload}
        )
        seen = first_at.setdefault(repr(sorted(point.items())), r)
        for f in WORKLOAD_FIELDS:
            if f in point_keys:
                continue
            a, b = getattr(seen, f), getattr(r, f)
            if a != b:
                where = ", ".join(f"{k} {v}" for k, v in point.items())
                raise InputError(
                    f"{seen.where} and {r.where}: both at {where} but {f} differs ({a} vs {b}); "
                    f"{words.unit}s of one point must run the same workload: pass "
                    f"--point-field {f} to make it a sweep axis, or ingest the files separately"
                )
        keyed.append((r, arm, point, pid))
    return keyed


def _check_arms(arms: list[str], baseline: str, words: ClientWords) -> None:
    if baseline not in arms:
        close = difflib.get_close_matches(baseline, arms, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "pass --baseline with one of them"
        raise InputError(
            f"baseline arm {baseline!r} is not among the arms found ({', '.join(arms)}); {hint}"
        )
    if len(arms) < 2:
        raise InputError(
            f"only one arm ({arms[0]!r}) in the input: a comparison needs a baseline and a "
            f"candidate; {words.arm_hint}"
        )


def _launch_names(records: Sequence[BenchServingRecord]) -> dict[str, str]:
    """Each file's name as a server launch (`--servers per-file`): its stem, or where files
    in different folders share one (`results/stage_0…` and `results.run2/stage_0…`), its path
    below their common folder, so two launches are never taken for one."""
    by_stem: dict[str, set[str]] = {}
    for r in records:
        by_stem.setdefault(_file_stem(r), set()).add(r.source)
    names: dict[str, str] = {}
    for stem, sources in by_stem.items():
        if len(sources) == 1:
            names[next(iter(sources))] = stem
            continue
        common = os.path.commonpath(sorted(str(Path(x).resolve()) for x in sources))
        for source in sources:
            below = Path(source).resolve().relative_to(common)
            names[source] = below.with_suffix("").as_posix()
    return names


def _measurements(keyed: list[Keyed], servers: ServerMode, slice: str) -> list[Measurement]:
    """One Measurement per record; repeats of an (arm, point) are later attempts, on the same
    server or fresh ones as `servers` says."""
    out: list[Measurement] = []
    counts: dict[tuple[str, str], int] = {}
    first_instance: dict[tuple[str, str], str] = {}
    launches = _launch_names([r for r, *_ in keyed])
    for r, arm, point, pid in keyed:
        attempt = counts[(arm, pid)] = counts.get((arm, pid), 0) + 1
        if servers == "same":
            instance = f"{arm}#1"
        elif servers == "fresh":
            instance = f"{arm}#{attempt}"
        else:
            instance = f"{arm}@{launches[r.source]}"
        first = first_instance.setdefault((arm, pid), instance)
        reason: Reason = (
            "first" if attempt == 1 else ("manual" if instance == first else "fresh_server")
        )
        out.append(
            Measurement(
                cell_id=cell_id(pid, arm, {}),
                point_id=pid,
                arm=arm,
                group_id=arm,
                slice=slice,
                point=point,
                attempt=attempt,
                instance=instance,
                reason=reason,
                metrics=r.metrics,
                error=None if r.metrics.completed > 0 else "no request completed",
                client="bench_serving",
                simulated=False,
                extra={
                    "source": r.where,
                    "backend": r.backend,
                    "dataset_name": r.dataset_name,
                    "request_rate": _json_safe(r.request_rate),
                    "random_input_len": r.random_input_len,
                    "random_output_len": r.random_output_len,
                    "server_version": r.server_info.get("version"),
                },
            )
        )
    return out


def measurements_from_records(
    records: Sequence[BenchServingRecord],
    baseline: str,
    *,
    arm_field: str = "tag",
    axis_field: str = "max_concurrency",
    point_fields: Sequence[str] = (),
    arm_of: Callable[[BenchServingRecord], str] | None = None,
    point_of: Callable[[BenchServingRecord], dict[str, Any]] | None = None,
    servers: ServerMode = "same",
    slice: str = "",
    margin: float = 0.03,
    noise: float | None = None,
    primary: str = "output_throughput",
    secondary: Sequence[str] | None = None,
    words: ClientWords = BENCH_SERVING,
) -> IngestResult:
    """Map parsed records to Measurements (see the module docstring); messages name things
    as `words` says the client that wrote the records does."""
    fields = (axis_field, *point_fields)
    keyed = _keyed(
        records,
        arm_of or (lambda r: _arm_for(r, arm_field, words)),
        point_of or (lambda r: _point_for(r, fields, words)),
        set(fields),
        slice,
        words,
    )
    arms = list(dict.fromkeys(arm for _, arm, _, _ in keyed))
    _check_arms(arms, baseline, words)
    settings = AnalysisSettings(
        baseline=baseline,
        candidates=[a for a in arms if a != baseline],
        primary=primary,
        secondary=list(DEFAULT_SECONDARY if secondary is None else secondary),
        margin=margin,
        noise=noise,
        axis=axis_name(axis_field),
    )
    return IngestResult(
        measurements=_measurements(keyed, servers, slice),
        records=list(records),
        arms=arms,
        settings=settings,
    )


def measurements_from_files(
    paths: Iterable[str | Path], baseline: str, **options: Any
) -> IngestResult:
    """Read bench_serving output files (in the order given; lines in file order) and map them
    with `measurements_from_records(records, baseline, **options)`."""
    records: list[BenchServingRecord] = []
    for path in paths:
        records += read_file(path)
    if not records:
        raise InputError("no bench_serving files given; pass one or more --output-file JSONL files")
    return measurements_from_records(records, baseline, **options)
