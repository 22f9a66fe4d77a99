"""`matrixrun ingest`: write a run directory from benchmark result files run by hand, so it
can be analysed and rendered like any run (it ends by doing both). Reading the formats is
`ingest/formats/`, the mapping (runs -> Measurements) `ingest/records.py`; this module only
writes (ingest.json keeps the caveats the report shows first)."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.core.metrics import METRIC_NAMES
from matrixrun.core.units import parse_percent
from matrixrun.ingest.formats import Format, Ingested, load, server_side
from matrixrun.ingest.formats.vllm_sweep import SweepServe
from matrixrun.ingest.records import ServerMode
from matrixrun.run import outputs
from matrixrun.rundir.environment import Environment, ServerRecord
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import RunSettings, write_settings


def _server_mode(servers: str | None, fresh_server: bool) -> ServerMode:
    """`--servers same|fresh|per-file` (`--fresh-server` is `--servers fresh`)."""
    if servers is not None and fresh_server and servers != "fresh":
        raise InputError(f"--fresh-server contradicts --servers {servers}")
    if servers == "per-file":
        return "per_file"
    if servers == "fresh" or fresh_server:
        return "fresh"
    return "same"


def _metric_choice(metrics: str | None) -> dict[str, Any]:
    """`--metrics PRIMARY[,SECONDARY...]` as `primary`/`secondary` options, each name checked
    (with the closest valid name when it is not one); secondaries default when only the
    primary is given."""
    if metrics is None:
        return {}
    names = [n.strip() for n in metrics.split(",") if n.strip()]
    if not names:
        raise InputError("--metrics is empty; name the primary metric, e.g. output_throughput")
    for name in names:
        if name not in METRIC_NAMES:
            close = difflib.get_close_matches(name, METRIC_NAMES, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see docs/ingest.md for the names"
            raise InputError(f"--metrics: {name!r} is not a metric ingest reads; {hint}")
    choice: dict[str, Any] = {"primary": names[0]}
    if len(names) > 1:
        choice["secondary"] = names[1:]
    return choice


def ingest(
    files: list[str],
    *,
    baseline: str,
    out: str | Path,
    threshold: str = "3%",
    arm_field: str = "tag",
    axis_field: str = "max_concurrency",
    point_fields: list[str] | None = None,
    fresh_server: bool = False,
    noise: str | None = None,
    server_mode: str | None = None,
    argv: list[str] | None = None,
    format: Format | None = None,
    mix_formats: bool = False,
    sweep_serve: SweepServe = "arms",
    metrics: str | None = None,
    allow_differences: list[str] | None = None,
    dry_run: bool = False,
    show: Callable[[str], None] | None = None,
) -> Path | None:
    """Map the files and write the run directory; `show` gets what was understood before
    anything is written, and `dry_run` stops there (returns None)."""
    try:
        margin = parse_percent(threshold)
        prior = parse_percent(noise) if noise is not None else None
    except ValueError as exc:
        raise InputError(f"--threshold/--noise: {exc}") from exc
    rd = RunDir(out)
    if rd.results_file.exists():
        raise InputError(
            f"{rd.path} already holds results; give a new --out directory so "
            "nothing measured is overwritten"
        )
    ingested = load(
        files,
        baseline,
        format=format,
        mix_formats=mix_formats,
        sweep_serve=sweep_serve,
        arm_field=arm_field,
        axis_field=axis_field,
        point_fields=point_fields or (),
        servers=_server_mode(server_mode, fresh_server),
        margin=margin,
        noise=prior,
        allow_differences=allow_differences or (),
        **_metric_choice(metrics),
    )
    if show is not None:
        show(ingested.summary())
    if dry_run:
        return None
    again = settle_command(
        files,
        Path(out),
        {
            "--baseline": baseline,
            "--threshold": threshold if threshold != "3%" else None,
            "--noise": noise,
            "--arm-field": arm_field if arm_field != "tag" else None,
            "--axis-field": axis_field if axis_field != "max_concurrency" else None,
            "--point-field": point_fields or [],
            "--format": format,
            "--mix-formats": mix_formats,
            "--sweep-serve": sweep_serve if sweep_serve != "arms" else None,
            "--metrics": metrics,
            "--allow-difference": allow_differences or [],
            "--servers": "fresh" if _server_mode(server_mode, fresh_server) == "fresh" else None,
        },
    )
    _write(rd, ingested, files, baseline, margin, argv, again)
    outputs.analyse_run(rd)
    outputs.render_run(rd)
    return rd.path


def settle_command(files: list[str], out: Path, given: dict[str, Any]) -> str:
    """The ingest that would settle what this one leaves undecided, for the report to print:
    these files and a second one per input measured on a freshly started server (x.json ->
    x.run2.json, a folder d -> d.run2: records.arm_name reads them as the same arm), with
    every option this ingest was given (without them a difference allowed here would be
    refused there), each file one server launch (`--servers per-file`: a second file's runs
    are fresh-server repeats, the lines within a file stay repeats on its launch), into a new
    run directory `OUT.2` (ingest never overwrites one; the report once said `--out .`, the
    run directory itself, which ingest refuses)."""
    again = [str(Path(f).with_name(f"{Path(f).stem}.run2{Path(f).suffix}")) for f in files]
    words = ["matrixrun", "ingest", *files, *again]
    for flag, value in given.items():
        if value is None or value is False:
            continue
        if value is True:
            words.append(flag)
        elif isinstance(value, list):
            for v in value:
                words += [flag, str(v)]
        else:
            words += [flag, str(value)]
    if "--servers" not in words:
        words += ["--servers", "per-file"]
    words += ["--out", f"{out}.2"]
    return (
        f"{shlex.join(words)}  # the .run2 files: each arm again on a freshly started "
        f"server; {out}.2: a new run directory"
    )


def _write(
    rd: RunDir,
    ingested: Ingested,
    files: list[str],
    baseline: str,
    margin: float,
    argv: list[str] | None,
    settle: str,
) -> None:
    """The run directory's files: settings, measurements, env.json (one server per
    instance, as the files describe it) and ingest.json (what was ingested, and how)."""
    result = ingested.result
    rd.create()
    write_settings(rd, RunSettings(analysis=result.settings))
    servers: dict[str, ServerRecord] = {}
    for m, record in zip(result.measurements, result.records, strict=True):
        rd.append(m)
        info = record.server_info or {}
        version = info.get("version")
        servers.setdefault(
            m.instance,
            ServerRecord(
                arm=m.arm,
                version=str(version) if version is not None else None,
                args={k: v for k, v in info.items() if not isinstance(v, dict | list)},
                source=record.source,
            ),
        )
    env = Environment(simulated=False, client=ingested.client, servers=servers)
    rd.write_json("env.json", env.model_dump(mode="json"))
    command = shlex.join(["matrixrun", *(argv[1:] if argv else [])]) if argv else None
    rd.write_json(
        "ingest.json",
        {
            "files": [str(Path(f)) for f in files],
            "formats": {path: fmt for path, fmt in ingested.inputs},
            "command": command,
            "baseline": baseline,
            "margin": margin,
            "caveats": ingested.caveats,
            "axis_found": ingested.axis_note,
            # The server's own numbers (inference-perf's Prometheus scrape): beside the
            # client's measurements, never in results.jsonl, so never in the verdict.
            "server_side": server_side(ingested.runs),
            # What the report's "Settle it" prints (report/sections/headline.py).
            "settle_command": settle,
        },
    )
