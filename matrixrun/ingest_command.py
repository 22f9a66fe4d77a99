"""`matrixrun ingest`: write a run directory from benchmark result files run by hand, so
`matrixrun report` renders a verdict for them. Reading the formats is `ingest_formats/`, the
mapping itself (runs -> Measurements) is `ingest.py`; this module only does the writing."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matrixrun.errors import InputError
from matrixrun.ingest_formats import Format, load
from matrixrun.ingest_formats.vllm_sweep import SweepServe
from matrixrun.results import RunDir
from matrixrun.units import parse_percent


def ingest(
    files: list[str],
    *,
    baseline: str,
    out: str | Path,
    threshold: str = "3%",
    arm_field: str = "tag",
    axis_field: str = "max_concurrency",
    fresh_server: bool = False,
    noise: str | None = None,
    argv: list[str] | None = None,
    format: Format | None = None,
    mix_formats: bool = False,
    sweep_serve: SweepServe = "arms",
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
        servers="fresh" if fresh_server else "same",
        margin=margin,
        noise=prior,
    )
    if show is not None:
        show(ingested.summary())
    if dry_run:
        return None
    result = ingested.result
    rd.create()
    rd.write_json("settings.json", result.settings.model_dump(mode="json"))
    servers: dict[str, dict[str, Any]] = {}
    for m, record in zip(result.measurements, result.records, strict=True):
        rd.append(m)
        info = record.server_info or {}
        servers.setdefault(
            m.instance,
            {
                "arm": m.arm,
                "version": info.get("version"),
                "args": {k: v for k, v in info.items() if not isinstance(v, dict | list)},
                "source": record.source,
            },
        )
    rd.write_json(
        "env.json",
        {
            "harness": {"name": "matrixrun"},
            "simulated": False,
            "client": ingested.client,
            "servers": servers,
        },
    )
    command = shlex.join(["matrixrun", *(argv[1:] if argv else [])]) if argv else None
    rd.write_json(
        "ingest.json",
        {
            "files": [str(Path(f)) for f in files],
            "formats": {path: fmt for path, fmt in ingested.inputs},
            "command": command,
            "baseline": baseline,
            "margin": margin,
        },
    )
    return rd.path
