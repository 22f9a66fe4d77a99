"""Check, before any launch, that this node has the GPUs the spec was written for.

A run on the wrong node wastes hours and, worse, produces a report whose setup section names
hardware it never ran on. `check_hardware(spec)` asks `nvidia-smi` (run directly, no shell)
for every GPU's name, driver and memory, and compares each `hardware:` entry of the spec:

* name: case-insensitive, ignoring a leading "NVIDIA ", and the spec's words must be the first
  words of the GPU's name, so `H100` matches "NVIDIA H100 80GB HBM3" but `H20` does not match
  "NVIDIA H200";
* count: *at least* `count` matching GPUs. A node with 8 GPUs runs a tp=4 configuration fine
  (the server uses the first ones), and a spec with a hardware axis of 4 and 8 GPUs must pass
  on the 8-GPU node; demanding exactly `count` would refuse both. When CUDA_VISIBLE_DEVICES
  lists GPU indices, only those GPUs count, since the server can see only those.

The result is plain data (`HardwareCheck`: ok, gpus, one-sentence message) that the runner
records in env.json; the runner, not this module, decides to stop (unless overridden with
`--ignore-hardware` or `engine.check_hardware: false`). Pure parts (`parse_csv`, `compare`)
are separate from the one subprocess call (`query_gpus`), so they are tested on strings.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from matrixrun.spec import HardwareSpec, Spec

QUERY = ["--query-gpu=name,driver_version,memory.total", "--format=csv"]
OVERRIDE = "fix hardware: in the spec or pass --ignore-hardware"


class Gpu(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    driver_version: str
    memory_total: str


class HardwareCheck(BaseModel):
    """What nvidia-smi showed and whether it satisfies the spec."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    gpus: list[Gpu]
    message: str  # the finding and, when it failed, what to do: the error the user sees
    finding: str = ""  # the finding alone: what a report of an overridden check states
    available: bool = True  # False: nvidia-smi missing or failing, nothing was compared


def parse_csv(text: str) -> list[Gpu]:
    """`nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv` output -> GPUs.

    The first row is the header ("name, driver_version, memory.total [MiB]"); values are
    separated by ", ". Rows with a different number of fields are skipped.
    """
    rows = [r for r in csv.reader(text.splitlines(), skipinitialspace=True) if r]
    if rows and rows[0] and rows[0][0].strip().lower() == "name":
        rows = rows[1:]
    return [
        Gpu(name=r[0].strip(), driver_version=r[1].strip(), memory_total=r[2].strip())
        for r in rows
        if len(r) == 3
    ]


def _words(name: str) -> list[str]:
    words = name.lower().split()
    return words[1:] if words[:1] == ["nvidia"] else words


def name_matches(wanted: str, actual: str) -> bool:
    """Spec GPU name vs nvidia-smi name (see the module docstring for the rule)."""
    want = _words(wanted)
    have = _words(actual)
    return bool(want) and have[: len(want)] == want


def visible(gpus: list[Gpu], cuda_visible_devices: str | None) -> list[Gpu]:
    """The GPUs a server can use under CUDA_VISIBLE_DEVICES (indices only; UUIDs or MIG ids
    are not resolved, so then every GPU counts)."""
    if cuda_visible_devices is None:
        return gpus
    items = [x.strip() for x in cuda_visible_devices.split(",") if x.strip()]
    if not all(x.isdigit() for x in items):
        return gpus
    return [gpus[int(x)] for x in items if int(x) < len(gpus)]


def describe(gpus: Sequence[Gpu]) -> str:
    """'4x NVIDIA H100 80GB HBM3' (or '2x A, 2x B'; 'no GPU')."""
    if not gpus:
        return "no GPU"
    counts = Counter(g.name for g in gpus)
    return ", ".join(f"{n}x {name}" for name, n in counts.items())


def compare(hardware: Sequence[HardwareSpec], gpus: list[Gpu]) -> HardwareCheck:
    """Every hardware entry must find at least `count` GPUs of its name."""
    failing = [h for h in hardware if sum(name_matches(h.gpu, g.name) for g in gpus) < h.count]
    if not failing:
        asked = " and ".join(f"{h.count}x {h.gpu}" for h in hardware)
        found = f"nvidia-smi shows {describe(gpus)}, enough for {asked}"
        return HardwareCheck(ok=True, gpus=gpus, message=found, finding=found)
    asked = " and ".join(f"{h.count}x {h.gpu}" for h in failing)
    found = f"spec asks for {asked} but nvidia-smi shows {describe(gpus)}"
    return HardwareCheck(ok=False, gpus=gpus, message=f"{found}; {OVERRIDE}", finding=found)


def _nvidia_smi(args: Sequence[str], timeout_s: float) -> tuple[str | None, str]:
    """nvidia-smi's stdout, or (None, why it could not be asked): run directly, no shell."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "nvidia-smi is not on PATH (no NVIDIA driver on this machine?)"
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [exe, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return None, f"nvidia-smi did not answer within {timeout_s:.0f}s"
    except OSError as exc:
        return None, f"nvidia-smi could not run: {exc.strerror}"
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"nvidia-smi failed (exit code {done.returncode}): {last[0]}"
    return done.stdout, ""


def query_gpus(timeout_s: float = 30.0) -> tuple[list[Gpu] | None, str]:
    """Run nvidia-smi; (GPUs, '') or (None, why it could not be asked)."""
    out, why = _nvidia_smi(QUERY, timeout_s)
    return (parse_csv(out), "") if out is not None else (None, why)


def check_hardware(spec: Spec, timeout_s: float = 30.0) -> HardwareCheck:
    """Compare this node's GPUs with `spec.hardware`; never raises for a missing nvidia-smi."""
    gpus, why = query_gpus(timeout_s)
    if gpus is None:
        asked = " and ".join(f"{h.count}x {h.gpu}" for h in spec.hardwares)
        found = f"cannot check that this node has {asked}: {why}"
        return HardwareCheck(
            ok=False,
            gpus=[],
            available=False,
            message=f"{found}; run on the GPU node or pass --ignore-hardware",
            finding=found,
        )
    return compare(spec.hardwares, visible(gpus, os.environ.get("CUDA_VISIBLE_DEVICES")))


def gpu_serials(timeout_s: float = 30.0) -> list[str]:
    """Serials (else UUIDs) of the GPUs this process may use, from nvidia-smi; [] where there is
    none. Slurm's SLURM_JOB_GPUS names the node's GPU indices it allocated (else
    CUDA_VISIBLE_DEVICES, when it lists indices); without either, every GPU nvidia-smi shows.
    Lines that are not `index, serial, uuid` are ignored."""
    text, _ = _nvidia_smi(["--query-gpu=index,serial,uuid", "--format=csv,noheader"], timeout_s)
    if text is None:
        return []
    visible = os.environ.get("SLURM_JOB_GPUS") or os.environ.get("CUDA_VISIBLE_DEVICES", "")
    allocated = {g.strip() for g in visible.split(",") if g.strip()}
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        if allocated and parts[0] not in allocated and parts[2] not in allocated:
            continue
        serial, uuid = parts[1], parts[2]
        out.append(serial if serial and not serial.startswith("[") else uuid)
    return out
