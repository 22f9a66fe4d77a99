"""`matrixrun compare RUN_A RUN_B`: the verdict document for two runs of one experiment (before
and after an engine upgrade), each arm of RUN_B judged against the arm of the same name in
RUN_A.

How: a new run directory whose measurements are both runs' measurements relabelled — the run
becomes the arm (RUN_A's label is the baseline) and the original arm becomes the slice — so
the ordinary stages analyse and render it (`outputs.analyse_run`, `outputs.render_run`): one
analysis, one document, nothing compared twice. `relabel` is pure; `compare_runs` does the
reading and writing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.run import outputs
from matrixrun.rundir.environment import Environment, ServerRecord, read_environment
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import RunSettings, read_settings, write_settings


def relabel(ms: Sequence[Measurement], label: str, arms: set[str]) -> list[Measurement]:
    """`ms` with the run as the arm and the original arm (and slice) as the slice; ids made
    unique per run so repeats of one run never pair with the other's."""
    out = []
    for m in ms:
        if m.arm not in arms:
            continue
        out.append(
            m.model_copy(
                update={
                    "arm": label,
                    "slice": f"{m.arm} · {m.slice}" if m.slice else m.arm,
                    "cell_id": f"{label}:{m.cell_id}",
                    "group_id": f"{label}:{m.group_id}",
                    "instance": f"{label}:{m.instance}",
                    "requests_file": None,
                }
            )
        )
    return out


#: The name `matrixrun run` gives a run directory (runs/<stem>/<time>).
_TIMESTAMP = re.compile(r"\d{8}-\d{6}")


def default_labels(a: Path, b: Path) -> tuple[str, str]:
    """Names for the two runs' arms: each directory's name, but a runner's timestamp
    (`20261202-001530`) says nothing in a table, so such a run is named by its spec (the
    parent directory) where the two differ, else `run A` and `run B` (the document names
    both directories)."""
    names = [p.resolve().name or "run" for p in (a, b)]
    if not any(_TIMESTAMP.fullmatch(n) for n in names):
        return names[0], names[1]
    parents = [p.resolve().parent.name.removesuffix(".rehearsal") for p in (a, b)]
    if parents[0] != parents[1] and all(parents):
        return parents[0], parents[1]
    return "run A", "run B"


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    out: str | Path,
    *,
    labels: tuple[str, str] | None = None,
    command: str | None = None,
) -> Path:
    """Write the comparison run directory `out` (analysed and rendered); return its path."""
    a, b = RunDir(run_a), RunDir(run_b)
    sa, sb = read_settings(a), read_settings(b)
    label_a, label_b = labels or default_labels(Path(run_a), Path(run_b))
    if label_a == label_b:
        label_a, label_b = f"{label_a} (A)", f"{label_b} (B)"
    arms_a = {m.arm for m in a.measurements()}
    arms_b = {m.arm for m in b.measurements()}
    shared = arms_a & arms_b
    if not shared:
        raise InputError(
            f"{a.path} and {b.path} share no arm name (A: {', '.join(sorted(arms_a))}; "
            f"B: {', '.join(sorted(arms_b))}): compare matches arms by name"
        )
    rd = RunDir(out)
    if rd.results_file.exists():
        raise InputError(f"{rd.path} already holds results; give a new --out directory")
    analysis = sa.analysis.model_copy(
        update={"baseline": label_a, "candidates": [label_b], "correctness": {}}
    )
    rd.create()
    write_settings(
        rd,
        RunSettings(
            analysis=analysis,
            rehearsal=sa.rehearsal or sb.rehearsal,
            time_scale=max(sa.time_scale, sb.time_scale),
        ),
    )
    for m in [
        *relabel(a.measurements(), label_a, shared),
        *relabel(b.measurements(), label_b, shared),
    ]:
        rd.append(m)
    servers: dict[str, ServerRecord] = {}
    for label, run in ((label_a, a), (label_b, b)):
        env = read_environment(run.path / "env.json")
        for name, record in (env.servers if env is not None else {}).items():
            if record.arm in shared:
                servers[f"{label}:{name}"] = record.model_copy(
                    update={"arm": label, "slice": record.arm}
                )
    simulated = any(m.simulated for m in rd.measurements())
    rd.write_json(
        "env.json", Environment(simulated=simulated, servers=servers).model_dump(mode="json")
    )
    rd.write_json(
        "ingest.json",
        {
            "files": [str(a.path), str(b.path)],
            "command": command,
            "baseline": label_a,
            "margin": analysis.margin,
            "compare": {"a": label_a, "b": label_b, "arms": sorted(shared)},
        },
    )
    outputs.analyse_run(rd)
    outputs.render_run(rd)
    return rd.path
