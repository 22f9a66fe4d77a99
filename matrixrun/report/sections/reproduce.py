"""How to reproduce the run: the command that runs the spec again (or the ingest that built it)
and the one that re-renders this document, where the spec as run is kept, and what a
rehearsal's seed makes reproducible. Template: `templates/sections/reproduce.md.j2`."""

from __future__ import annotations

from dataclasses import dataclass

from matrixrun.report import fmt
from matrixrun.report.inputs import RunInputs, spec_path_of
from matrixrun.report.section import Section
from matrixrun.report.sections import simulation

# ------------------------------------------------------------------------------ words


def reproduce_seed(seed: str) -> str:
    """What the first command reproduces of a rehearsal, and what it cannot."""
    return (
        f"The simulator's noise is seeded (`rehearsal.seed`: `{fmt.user_plain(seed)}`; each "
        "launch's seed follows from it and the launch's order), so the first command draws "
        "the same noise again. The host's timing jitter still moves each number a little, "
        "and where a cell sits near its margin it can move that verdict and the reruns the "
        "policy picks. Another `rehearsal.seed` draws another sample of the same noise."
    )


# ------------------------------------------------------------------------------ the section


@dataclass
class Reproduce:
    commands: list[str]
    spec_copy: str | None
    spec_sha: str | None
    files: list[str]
    #: what a rehearsal's seed makes reproducible, in words (None for a real run)
    seed_text: str | None = None


def of(inputs: RunInputs, simulated: bool) -> Reproduce:
    commands = []
    facts = inputs.settings.spec
    if facts is not None:
        spec_path = spec_path_of(inputs)
        commands.append(f"nox -s matrix -- {spec_path}" + (" --rehearse" if simulated else ""))
    elif inputs.ingest and inputs.ingest.get("command"):
        commands.append(str(inputs.ingest["command"]))
    commands.append(f"matrixrun report {inputs.run_dir}")
    seed = facts.rehearsal.seed if facts is not None and facts.rehearsal is not None else None
    return Reproduce(
        commands=commands,
        seed_text=reproduce_seed(seed) if seed is not None else None,
        spec_copy=f"{inputs.run_dir}/spec.yaml" if facts is not None else None,
        spec_sha=facts.spec_sha256 if facts is not None else None,
        files=list(inputs.ingest.get("files", [])) if inputs.ingest else [],
    )


def _build(inputs: RunInputs) -> Reproduce:
    simulated = simulation.of(inputs.measurements, inputs.settings, inputs.env) is not None
    return of(inputs, simulated)


SECTION = Section("reproduce", 120, _build)
