"""Hardware check: parsing and matching as tables, then `check_hardware` with a fake
`nvidia-smi` on PATH (matching, mismatching, failing) and with none at all."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from matrixrun.rundir.hardware import Gpu, check_hardware, compare, name_matches, parse_csv, visible
from matrixrun.spec import HardwareSpec, Spec, load_spec

ROOT = Path(__file__).resolve().parent.parent
HEADER = "name, driver_version, memory.total [MiB]\n"


def smi_rows(name: str, n: int) -> str:
    return "".join(f"{name}, 570.124.06, 143771 MiB\n" for _ in range(n))


def fake_smi(tmp_path: Path, output: str, code: int = 0) -> Path:
    """A `nvidia-smi` that checks its arguments and prints `output` (exit `code`)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    out = tmp_path / "smi_output.txt"
    out.write_text(output)
    script = bindir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "--query-gpu=name,driver_version,memory.total" ] && [ "$2" = "--format=csv" ]'
        ' || { echo "bad args: $*" >&2; exit 9; }\n'
        f'cat "{out}"\n'
        f"exit {code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


@pytest.fixture
def tiny_spec() -> Spec:
    return load_spec(ROOT / "tests" / "specs" / "tiny.yaml")  # 1x NVIDIA H200


@pytest.fixture
def multi_spec() -> Spec:
    return load_spec(ROOT / "tests" / "specs" / "multi.yaml")  # 8x and 4x NVIDIA H200


def test_parse_csv() -> None:
    gpus = parse_csv(HEADER + smi_rows("NVIDIA H100 80GB HBM3", 2) + "\n")
    assert gpus == [Gpu(name="NVIDIA H100 80GB HBM3", driver_version="570.124.06",
                        memory_total="143771 MiB")] * 2  # fmt: skip
    assert parse_csv(HEADER) == []
    assert parse_csv("garbage line\n") == []


@pytest.mark.parametrize(
    ("wanted", "actual", "ok"),
    [
        ("NVIDIA H200", "NVIDIA H200", True),
        ("H200", "NVIDIA H200", True),
        ("nvidia h200", "NVIDIA H200", True),
        ("H100", "NVIDIA H100 80GB HBM3", True),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", True),
        ("H20", "NVIDIA H200", False),
        ("H200", "NVIDIA H20", False),
        ("H100 NVL", "NVIDIA H100 80GB HBM3", False),
        ("NVIDIA B200", "NVIDIA H200", False),
        ("", "NVIDIA H200", False),
    ],
)
def test_name_matches(wanted: str, actual: str, ok: bool) -> None:
    assert name_matches(wanted, actual) is ok


def test_count_is_at_least() -> None:
    gpus = parse_csv(HEADER + smi_rows("NVIDIA H200", 8))
    want4 = [HardwareSpec(gpu="NVIDIA H200", count=4)]
    want8 = [HardwareSpec(gpu="H200", count=8)]
    assert compare(want4, gpus).ok and compare(want8, gpus).ok
    assert not compare([HardwareSpec(gpu="H200", count=9)], gpus).ok


def test_mismatch_message() -> None:
    gpus = parse_csv(HEADER + smi_rows("NVIDIA H100 80GB HBM3", 4))
    check = compare([HardwareSpec(gpu="NVIDIA H200", count=8)], gpus)
    assert not check.ok and check.available
    assert check.message == (
        "spec asks for 8x NVIDIA H200 but nvidia-smi shows 4x NVIDIA H100 80GB HBM3; "
        "fix hardware: in the spec or pass --ignore-hardware"
    )


def test_visible_devices() -> None:
    gpus = [Gpu(name=f"G{i}", driver_version="1", memory_total="1 MiB") for i in range(4)]
    assert [g.name for g in visible(gpus, "0,2")] == ["G0", "G2"]
    assert visible(gpus, None) == gpus
    assert visible(gpus, "GPU-8f3e,GPU-11aa") == gpus  # UUIDs: not resolved, all count
    assert visible(gpus, "") == []


def test_check_with_matching_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  multi_spec: Spec) -> None:  # fmt: skip
    bindir = fake_smi(tmp_path, HEADER + smi_rows("NVIDIA H200", 8))
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    check = check_hardware(multi_spec)
    assert check.ok and check.available and len(check.gpus) == 8
    assert check.gpus[0].driver_version == "570.124.06"
    assert "8x NVIDIA H200" in check.message
    # the whole result is plain data for env.json
    assert type(check).model_validate_json(check.model_dump_json()) == check


def test_check_respects_cuda_visible_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             multi_spec: Spec) -> None:  # fmt: skip
    bindir = fake_smi(tmp_path, HEADER + smi_rows("NVIDIA H200", 8))
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    check = check_hardware(multi_spec)
    assert not check.ok and len(check.gpus) == 4
    assert check.message.startswith("spec asks for 8x NVIDIA H200 but nvidia-smi shows 4x")


def test_check_with_other_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               tiny_spec: Spec) -> None:  # fmt: skip
    bindir = fake_smi(tmp_path, HEADER + smi_rows("NVIDIA H100 80GB HBM3", 4))
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    check = check_hardware(tiny_spec)
    assert not check.ok and check.available and len(check.gpus) == 4
    assert check.message == (
        "spec asks for 1x NVIDIA H200 but nvidia-smi shows 4x NVIDIA H100 80GB HBM3; "
        "fix hardware: in the spec or pass --ignore-hardware"
    )


def test_check_when_nvidia_smi_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     tiny_spec: Spec) -> None:  # fmt: skip
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    bindir = fake_smi(tmp_path, msg + "\n", code=9)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    check = check_hardware(tiny_spec)
    assert not check.ok and not check.available and check.gpus == []
    assert "exit code 9" in check.message and "couldn't communicate" in check.message
    assert check.message.endswith("pass --ignore-hardware")


def test_check_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  tiny_spec: Spec) -> None:  # fmt: skip
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    check = check_hardware(tiny_spec)
    assert not check.ok and not check.available
    assert check.message == (
        "cannot check that this node has 1x NVIDIA H200: nvidia-smi is not on PATH (no NVIDIA "
        "driver on this machine?); run on the GPU node or pass --ignore-hardware"
    )
