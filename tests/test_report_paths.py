"""The paths a report prints are ones its reader can type: the reproduce commands and the
spec copy's place, wherever the run directory lies."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrixrun.report.inputs import display_path, spec_stem


def test_display_path_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "reports" / "runs" / "x"
    run.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert display_path(run) == "reports/runs/x"


def test_display_path_outside_the_working_directory_starts_at_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "a"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run = tmp_path / "home" / "me" / "runs" / "glm5" / "20261201-1"
    assert display_path(run) == "runs/glm5/20261201-1"
    assert display_path(tmp_path / "b" / "c") == str(tmp_path / "b" / "c")


@pytest.mark.parametrize(
    ("run_dir", "stem"),
    [
        ("runs/glm5_cutedsl/20261201-065252", "glm5_cutedsl"),
        ("runs/glm5_cutedsl.rehearsal/20261201-065252", "glm5_cutedsl"),
        ("reports/runs/glm5_cutedsl.rehearsal/20261201-065252", "glm5_cutedsl"),
        ("reports/runs/h200_transformers_cb", None),  # no <id> level: not the runner's layout
        ("out/glm5", None),
    ],
)
def test_spec_stem_only_from_the_runners_layout(run_dir: str, stem: str | None) -> None:
    assert spec_stem(run_dir) == stem


def test_git_sha_given_for_a_copied_tree_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    from matrixrun.rundir import environment

    monkeypatch.setenv(environment.GIT_SHA_ENV, "0123abcd")
    assert environment.git_sha() == "0123abcd"
    monkeypatch.delenv(environment.GIT_SHA_ENV)
    found = environment.git_sha(str(Path(__file__).resolve().parent))
    assert found is None or found != "0123abcd"
