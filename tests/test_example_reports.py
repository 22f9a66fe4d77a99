"""The committed example reports are what the code renders from their run directories today."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from scripts_module import load_script

ROOT = Path(__file__).resolve().parent.parent


SCRIPT = load_script("example_reports")


def committed_text(report: str) -> str:
    """The report as committed (git's HEAD), not as the working tree has it: a hand-made
    `--report reports/glm5_cutedsl.rehearsal.md` re-renders it from a fresh rehearsal (the
    README's first command writes runs/glm5_cutedsl.rehearsal.md, which git ignores), and this
    suite must still pass after it. Outside a git checkout: the file itself."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"HEAD:{report}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else (ROOT / report).read_text()


@pytest.mark.parametrize(("report", "run"), sorted(SCRIPT.EXAMPLES.items()))
def test_committed_report_is_not_stale(report: str, run: str) -> None:
    committed = committed_text(report)
    assert SCRIPT.rendered(ROOT / run) == committed, (
        f"{report} is stale: run `nox -s reports` and commit it"
    )


def test_a_stale_report_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--check fails on a committed report that differs by one character."""
    report, run = next(iter(SCRIPT.EXAMPLES.items()))
    stale = tmp_path / "stale.md"
    stale.write_text((ROOT / report).read_text() + " ")
    monkeypatch.setattr(SCRIPT, "EXAMPLES", {str(stale): run})
    assert SCRIPT.main(["--check"]) == 1
