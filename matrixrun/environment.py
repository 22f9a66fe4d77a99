"""What the run ran on, for env.json and the report's environment section.

Only named facts are recorded: the harness, Python, the platform, the git commit of the working
directory, selected GPU-related environment variables and, when present, what nvidia-smi
reports. Never the whole environment (it holds tokens and keys).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from typing import Any

from matrixrun import __version__
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


def git_sha(cwd: str | None = None) -> str | None:
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


def capture_environment(spec: Spec, rehearse: bool, time_scale: float) -> dict[str, Any]:
    return {
        "harness": {"name": "matrixrun", "version": __version__},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "git_sha": git_sha(),
        "engine": spec.engine.kind,
        "client": spec.engine.client,
        "simulated": rehearse,
        "time_scale": time_scale,
        "env": {k: os.environ[k] for k in RECORDED_ENV if k in os.environ},
    }
