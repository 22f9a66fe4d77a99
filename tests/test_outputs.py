"""A run ends with exactly one analysis and one render, both from the run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrixrun.run import outputs
from matrixrun.run.experiment import run_experiment

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_a_run_analyses_once_and_renders_once_from_the_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def counted(name: str) -> Any:
        real = getattr(outputs, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(outputs, "analyse_run", counted("analyse_run"))
    monkeypatch.setattr(outputs, "render_run", counted("render_run"))
    summary = run_experiment(
        ROOT / "tests" / "specs" / "tiny.yaml", out=tmp_path / "run", rehearse=True
    )
    assert calls == ["analyse_run", "render_run"]
    run_dir = summary.run_dir
    settings = json.loads((run_dir / "settings.json").read_text())
    assert settings["rehearsal"] is True and settings["spec"]["engine"]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["settings"] == settings["analysis"]  # judged by what settings.json says
    assert summary.report is not None
    # the report is a pure function of the run directory: rendering it again gives the same
    (run_dir / "spec.yaml").unlink()
    assert outputs.report_text(run_dir) == summary.report.read_text()
