"""Before the first launch: is every engine the plan launches there at all?

Without this, a missing `vllm` script or a Python without SGLang fails every cell one by one
("measured 10", each with the same startup error) after minutes of launch attempts. Checked
once per distinct launch prefix (an arm's `launch`, else the engine's), without starting
anything heavy: the executable must resolve (on PATH, or a path that exists and may be run),
and a `python -m package.module` prefix must find the package (`importlib.util.find_spec` of
its top-level name in that Python: nothing of the engine is imported). A container CLI
(`docker run ... IMAGE ...`) is checked for the CLI only (the image is the container's
business). The bench_serving client's prefix is checked the same way when the spec uses it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path, PurePath

from matrixrun.core.errors import InputError
from matrixrun.engines.sglang import DEFAULT_LAUNCH
from matrixrun.engines.vllm import DEFAULT_LAUNCH as VLLM
from matrixrun.load.bench_serving_client import DEFAULT_PREFIX
from matrixrun.plan import expand
from matrixrun.spec import Spec

_CONTAINER_CLIS = {"docker", "podman", "nerdctl", "apptainer", "singularity", "enroot"}
_FIND = "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"


def default_prefix(spec: Spec) -> list[str] | None:
    """The launch prefix the engine uses where an arm gives none."""
    if spec.engine.launch:
        return list(spec.engine.launch)
    if spec.engine.kind == "sglang":
        return list(DEFAULT_LAUNCH)
    if spec.engine.kind == "vllm":
        return list(VLLM)
    return None


def prefixes(spec: Spec) -> list[tuple[str, list[str]]]:
    """(what uses it, prefix) for every distinct prefix the run would start."""
    out: list[tuple[str, list[str]]] = []
    default = default_prefix(spec)
    for group in expand(spec).groups:
        prefix = list(group.launch) if group.launch else default
        if prefix and all(p != prefix for _, p in out):
            who = f"arm {group.arm}'s launch" if group.launch else "engine.launch"
            out.append(
                (who if spec.engine.launch or group.launch else "the default launch", prefix)
            )
    if spec.engine.client == "bench_serving":
        client = list(spec.engine.client_launch or DEFAULT_PREFIX)
        out.append(
            ("engine.client_launch" if spec.engine.client_launch else "bench_serving", client)
        )
    return out


def problem(prefix: list[str]) -> str | None:
    """Why `prefix` cannot start (one clause), or None."""
    exe = prefix[0]
    found = exe if os.sep in exe else shutil.which(exe)
    if found is None:
        return f"{exe} is not on PATH"
    if not Path(found).is_file():
        return f"{exe} does not exist"
    if not os.access(found, os.X_OK):
        return f"{exe} is not executable"
    if PurePath(exe).name in _CONTAINER_CLIS:
        return None
    if len(prefix) >= 3 and prefix[1] == "-m" and "python" in PurePath(exe).name:
        package = prefix[2].split(".")[0]
        try:
            done = subprocess.run(  # noqa: S603 - argv list, no shell
                [found, "-c", _FIND, package],
                capture_output=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{exe} could not be run ({exc})"
        if done.returncode == 1:
            return f"{exe} has no module {package!r} (`-m {prefix[2]}`)"
        if done.returncode != 0:
            return f"{exe} could not be run (exit {done.returncode})"
    return None


def require_launchable(spec: Spec) -> None:
    """One error naming every prefix that cannot start, before the first launch."""
    bad = [(who, prefix, why) for who, prefix in prefixes(spec) if (why := problem(prefix))]
    if not bad:
        return
    lines = "; ".join(f"{who} [{' '.join(prefix)}]: {why}" for who, prefix, why in bad)
    raise InputError(
        f"nothing launched: {lines}. Set engine.launch (or the arm's launch) to the engine's "
        "executable or the Python that has it (for SGLang also MATRIXRUN_SGLANG_PYTHON), "
        "or rehearse with --rehearse"
    )
