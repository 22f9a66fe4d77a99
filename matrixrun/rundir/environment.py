"""What the run ran on: env.json as a typed model, and how the runner captures it.

env.json is one of the run directory's interface files (the report's environment section reads
it), so its shape is a pydantic model (`Environment`) rather than a dict assembled in the
runner: writers (`run`, `ingest`) and readers agree on one definition, and `read_environment`
rejects a file that is not one. Only named facts are recorded: the harness, Python, the
platform, the git commit of the working directory, selected GPU-related environment variables,
every server instance (its arm, version, effective args, redacted argv), the hardware gate and
what nvidia-smi reported. Never the whole environment (it holds tokens and keys).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from matrixrun import __version__
from matrixrun.core.errors import InputError
from matrixrun.rundir.hardware import Gpu, HardwareCheck
from matrixrun.spec import Spec

#: Environment variables that change GPU behaviour and are safe to record.
RECORDED_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "NCCL_DEBUG",
    "NCCL_P2P_DISABLE",
    "NCCL_IB_DISABLE",
    "SGLANG_ENABLE_JIT_DEEPGEMM",
    "TORCH_CUDA_ARCH_LIST",
    "FLASHINFER_WORKSPACE_BASE",
    "SLURM_JOB_ID",
    "SLURM_JOB_PARTITION",
)


#: Set where the tree was copied without its own git metadata (a device that receives a copy of
#: the working tree): the commit the copy was made from, recorded as given.
GIT_SHA_ENV = "MATRIXRUN_GIT_SHA"


def git_sha(cwd: str | None = None) -> str | None:
    """The commit of the working directory (`-dirty` with uncommitted changes to tracked
    files), or `MATRIXRUN_GIT_SHA` when set: a copied tree's .git may be a stale one."""
    given = os.environ.get(GIT_SHA_ENV, "").strip()
    if given:
        return given
    git = shutil.which("git")
    if git is None:
        return None
    try:
        out = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [git, "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [git, "status", "--porcelain", "--untracked-files=no"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


class Harness(BaseModel):
    """The harness that wrote the run directory (its version tells readers what to expect)."""

    model_config = ConfigDict(extra="ignore")

    name: str = "matrixrun"
    version: str | None = None


class ServerRecord(BaseModel):
    """One server instance (`group#n`) as it reported itself when it became healthy; an
    ingested run knows only arm, version, args and the file the lines came from."""

    model_config = ConfigDict(extra="ignore")

    arm: str
    group: str | None = None
    slice: str | None = None
    startup_s: float | None = None
    version: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    argv: list[str] | None = Field(None, description="As launched, secrets redacted.")
    source: str | None = Field(None, description="Ingested runs: the bench_serving file.")
    #: Where the instance ran (`--executor slurm`: arms may run on different nodes at once,
    #: so the node is part of the instance, and its σ is part of fresh-server σ).
    node: str | None = None
    gpu_serials: list[str] = Field(
        default_factory=list, description="nvidia-smi serials of the GPUs it was given."
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="The variables its launch set (engine.env and the arm's env), secrets masked.",
    )


class HardwareGate(HardwareCheck):
    """The hardware gate's result; `overridden` when the run went on despite a mismatch."""

    overridden: bool = False


class Environment(BaseModel):
    """The content of env.json. Unknown keys (here and in its parts) are ignored on reading,
    so run directories written by older versions still render."""

    model_config = ConfigDict(extra="ignore")

    harness: Harness = Field(default_factory=Harness)
    python: str | None = None
    platform: str | None = None
    machine: str | None = None
    host: str | None = None
    cpus: int | None = None
    git_sha: str | None = None
    engine: str | None = None
    client: str | None = None
    simulated: bool = False
    time_scale: float = 1.0
    env: dict[str, str] = Field(default_factory=dict, description="RECORDED_ENV variables.")
    servers: dict[str, ServerRecord] = Field(default_factory=dict)
    hardware_check: HardwareGate | None = None
    gpus: list[Gpu] = Field(default_factory=list)


def capture_environment(spec: Spec, simulated: bool, time_scale: float) -> Environment:
    """This process's facts for a run of `spec` (servers, gates and GPUs are added later)."""
    return Environment(
        harness=Harness(version=__version__),
        python=sys.version.split()[0],
        platform=platform.platform(),
        machine=platform.machine(),
        host=platform.node(),
        cpus=os.cpu_count(),
        git_sha=git_sha(),
        engine=spec.engine.kind,
        client=spec.engine.client,
        simulated=simulated,
        time_scale=time_scale,
        env={k: os.environ[k] for k in RECORDED_ENV if k in os.environ},
    )


def read_environment(path: Path) -> Environment | None:
    """env.json at `path`; None when there is none. A file that is not one is an InputError
    naming it (a resumed run must not silently drop the servers it recorded)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return Environment.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the top level"
        raise InputError(f"{path}: not an env.json ({where}: {first['msg']})") from exc
