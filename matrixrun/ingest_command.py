"""`matrixrun ingest`: write a run directory from bench_serving files run by hand, so
it can be analysed and rendered like any run (it ends by doing both). The mapping itself
(lines -> Measurements) is `ingest.py`; this module only does the writing."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from matrixrun import stages
from matrixrun.errors import InputError
from matrixrun.ingest import measurements_from_files
from matrixrun.results import RunDir
from matrixrun.settings import RunSettings
from matrixrun.units import parse_percent


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
    argv: list[str] | None = None,
) -> Path:
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
    result = measurements_from_files(
        files,
        baseline,
        arm_field=arm_field,
        axis_field=axis_field,
        point_fields=point_fields or (),
        servers="fresh" if fresh_server else "same",
        margin=margin,
        noise=prior,
    )
    rd.create()
    stages.write_settings(rd, RunSettings(analysis=result.settings))
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
            "client": "bench_serving",
            "servers": servers,
        },
    )
    command = shlex.join(["matrixrun", *(argv[1:] if argv else [])]) if argv else None
    rd.write_json(
        "ingest.json",
        {
            "files": [str(Path(f)) for f in files],
            "command": command,
            "baseline": baseline,
            "margin": margin,
        },
    )
    stages.analyse_run(rd)
    stages.render_run(rd)
    return rd.path
