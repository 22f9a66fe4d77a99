"""matrixrun as a user installs it: the wheel built from this checkout, installed into a fresh
virtual environment outside it, then `--version`, `validate`, a rehearsal and `report` run from
a directory that is not the checkout. The bug this guards: the templates lived outside the
package, so only an editable install could render a report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{' '.join(argv)} exited {res.returncode}:\n{res.stderr[-3000:]}"
    return res


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the built wheel installed; returns its bin directory."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
         cwd=base)  # fmt: skip
    wheels = list(dist.glob("matrixrun-*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    for data in ("matrixrun/report/templates/verdict.md.j2", "matrixrun/py.typed"):
        assert data in names, f"{data} is not in the wheel"
    # every template the checkout has, the sections' partials included (a new directory of
    # templates needs its own package-data glob)
    templates = ROOT / "matrixrun" / "report" / "templates"
    missing = [
        p.relative_to(ROOT).as_posix()
        for p in templates.rglob("*.j2")
        if p.relative_to(ROOT).as_posix() not in names
    ]
    assert not missing, f"templates not in the wheel: {missing}"
    assert any(n.startswith("matrixrun/sim/profiles/") for n in names)
    assert any(n.startswith("matrixrun/flags/data/") for n in names)
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheels[0])], cwd=base)
    return venv / "bin"


def test_the_installed_wheel_validates_rehearses_and_reports(
    installed: Path, tmp_path: Path
) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    exe = str(installed / "matrixrun")
    version = _run([exe, "--version"], cwd=work).stdout
    assert version.startswith("matrixrun ")
    where = _run([str(installed / "python"), "-c", "import matrixrun; print(matrixrun.__file__)"],
                 cwd=work).stdout  # fmt: skip
    assert str(ROOT) not in where, "the test must import the installed package"
    spec = work / "tiny.yaml"
    shutil.copy(ROOT / "tests" / "specs" / "tiny.yaml", spec)
    _run([exe, "validate", str(spec)], cwd=work)
    _run([exe, "run", str(spec), "--rehearse", "--out", str(work / "run")], cwd=work)
    report = (work / "run" / "report.md").read_text()
    assert "SIMULATED" in report
    # a committed run directory renders to the committed document from the installed package
    copy = work / "reports" / "runs" / "golden-ingest"
    shutil.copytree(ROOT / "reports" / "runs" / "golden-ingest", copy)
    # written where the committed copy lies (reports/), as its links are relative to it
    out = work / "reports" / "golden.md"
    _run([exe, "report", str(copy.relative_to(work)), "-o", str(out)], cwd=work)
    expected = (ROOT / "reports" / "golden_bench_serving.ingested.md").read_text()
    assert out.read_text() == expected
