"""The environment section: harness, Python, platform, commit and engine; the GPUs; the hardware
gate's result; the environment variables the servers got; one row per server instance
(env.json). Template: `templates/sections/environment.md.j2`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from matrixrun.report import fmt
from matrixrun.report.section import Section, Trim
from matrixrun.rundir.settings import RunSettings

# ------------------------------------------------------------------------------ words


HARDWARE_SKIPPED = "skipped: engine.check_hardware is false in the spec (hardware not verified)"


NO_SERVERS = "No server instances are recorded in env.json."


def servers_dropped(n: int) -> str:
    return f"{n} server instances were recorded in env.json."


def hardware_sentence(check: Any) -> str | None:
    """The runner's hardware gate result as one sentence; an override is said in bold."""
    if not isinstance(check, dict):
        return None if check is None else str(check)
    message = str(check.get("message") or "").rstrip(".")
    if check.get("overridden"):
        found = str(check.get("finding") or message)  # not the "what to do" half: it was done
        return f"**overridden**: {found}; the run went ahead anyway (--ignore-hardware)"
    if check.get("ok"):
        return f"passed: {message}" if message else "passed"
    return message or None


# ------------------------------------------------------------------------------ the section


@dataclass
class Environment:
    facts: list[tuple[str, str]]
    gpus: list[str]
    hardware_check: str | None
    servers: list[list[str]]
    servers_header: list[str]
    servers_note: str | None
    variables: list[str]


def _servers(env: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    infos = {k: v for k, v in (env.get("servers") or {}).items() if isinstance(v, dict)}
    sliced = any(info.get("slice") for info in infos.values())
    # issue 16 (--executor slurm), the one addition here: a node column when instances say
    # where they ran (arms may run on different nodes at once); jobs.json has the rest
    noded = any(info.get("node") for info in infos.values())
    # the GPUs, when the servers did not all run on the same ones (a run resumed on another
    # lent machine): their launch-to-launch spread then includes the machines'
    gpus = {tuple(info.get("gpu_serials") or ()) for info in infos.values()}
    on_gpus = len(gpus - {()}) > 1
    header = [
        "server instance",
        "arm",
        *(["slice"] if sliced else []),
        *(["node"] if noded else []),
        *(["GPU serials"] if on_gpus else []),
        "engine version",
        "startup",
    ]
    rows = []
    for name, info in infos.items():
        startup = info.get("startup_s")
        rows.append(
            [
                f"`{name}`",
                f"`{info.get('arm', '?')}`",
                *([fmt.table_cell(str(info.get("slice") or "—"))] if sliced else []),
                *([fmt.table_cell(str(info.get("node") or "—"))] if noded else []),
                *([fmt.table_cell(", ".join(info.get("gpu_serials") or ["—"]))] if on_gpus else []),
                fmt.table_cell(str(info.get("version") or "n/a")),
                fmt.seconds(float(startup)) if isinstance(startup, int | float) else "n/a",
            ]
        )
    return header, rows


def of(env: Mapping[str, Any], settings: RunSettings | None) -> Environment:
    facts = settings.spec if settings is not None else None
    harness = env.get("harness") or {}
    info = [
        ("harness", f"{harness.get('name', 'matrixrun')} {harness.get('version') or ''}".strip()),
        ("python", env.get("python")),
        ("platform", env.get("platform")),
        ("matrixrun commit", env.get("git_sha")),
        ("engine", env.get("engine") or (facts.engine if facts else None)),
    ]
    gpus: dict[tuple[str, str, str], int] = {}
    for g in env.get("gpus") or []:
        if isinstance(g, dict):
            key = (
                str(g.get("name", "?")),
                str(g.get("driver_version", "?")),
                str(g.get("memory_total", "?")),
            )
            gpus[key] = gpus.get(key, 0) + 1
    check = hardware_sentence(env.get("hardware_check"))
    if check is None and facts is not None and not facts.check_hardware:
        check = HARDWARE_SKIPPED
    header, servers = _servers(env)
    return Environment(
        facts=[(k, fmt.table_cell(str(v))) for k, v in info if v],
        gpus=[f"{n}× {name} (driver {drv}, {mem})" for (name, drv, mem), n in gpus.items()],
        hardware_check=check,
        servers=servers,
        servers_header=header,
        servers_note=None if servers else NO_SERVERS,
        variables=[f"`{k}={v}`" for k, v in sorted((env.get("env") or {}).items())],
    )


def trim(part: Environment) -> str | None:
    """The size budget's first step: the per-instance server table goes first."""
    servers = part.servers
    if not servers:
        return None
    part.servers = []
    part.servers_note = servers_dropped(len(servers))
    return "the per-instance server table"


SECTION = Section(
    "environment", 110, lambda inputs: of(inputs.env, inputs.settings), (Trim(10, trim),)
)
