"""Issue 44's smaller items: Ctrl-C names the run directory; progress after --resume counts
the runs already done; --resume of a missing directory is bad input (exit 2) in one sentence;
`history` says "undecided" and shows flags as launches give them; a note repeated in many
measurements is one line with its count and range."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from test_report import SPEC_TEXT, measurement, plan_of

from matrixrun.cli.exits import EXIT_INPUT
from matrixrun.cli.history_view import experiments_table, launch_flag
from matrixrun.cli.main import interrupted_sentence, main
from matrixrun.core.errors import InputError
from matrixrun.report.sections.failures import COLLAPSE_AFTER, limits_of
from matrixrun.run.progress import PlainObserver
from matrixrun.run.resume import require_run_dir
from matrixrun.store.queries import ArmSummary, Experiment

ROOT = Path(__file__).resolve().parent.parent


def test_ctrl_c_names_the_run_directory_and_how_to_go_on() -> None:
    line = interrupted_sentence("runs/x/20261201-1", "spec/x.yaml")
    assert "kept in runs/x/20261201-1" in line
    assert "`matrixrun run spec/x.yaml --resume runs/x/20261201-1`" in line
    assert "the run directory" in interrupted_sentence(None, None)  # before one was chosen


def test_progress_after_resume_counts_the_runs_already_done(tmp_path: Path) -> None:
    plan = plan_of(SPEC_TEXT)
    group = plan.groups[0]
    stream = io.StringIO()
    obs = PlainObserver(stream)
    obs.start(10, 30, done=4)
    obs.measured(measurement(group.cells[0], group.group_id, 100.0), "")
    line = stream.getvalue()
    assert "] 5/10, at most 30" in line and "1/10" not in line


def test_resume_of_a_missing_directory_is_bad_input_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(InputError, match="no such directory"):
        require_run_dir(missing)
    spec = str(ROOT / "tests" / "specs" / "tiny.yaml")
    assert main(["run", spec, "--rehearse", "--resume", str(missing)]) == EXIT_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such directory" in err[0], err
    tmp_path.joinpath("empty").mkdir()
    with pytest.raises(InputError, match="not a run directory"):
        require_run_dir(tmp_path / "empty")


def test_history_says_undecided_and_flags_as_launches_give_them() -> None:
    assert launch_flag("sglang", "tp") == "--tp-size"
    assert launch_flag("vllm", "tp") == "--tensor-parallel-size"
    assert launch_flag("sglang", "chunked_prefill_size") == "--chunked-prefill-size"
    arms = [
        ArmSummary("base", True, "0.5.23", {"tp": 8}, None),
        ArmSummary("cand", False, "0.5.23", {"tp": 8}, "undecided"),
    ]
    e = Experiment("runs/x", "run", "x", "sglang", False, None, "m", "8x H200", 10, arms)
    table = experiments_table(1, [e])
    assert "cand (undecided; --tp-size 8)" in table
    assert "--tp 8" not in table


def test_a_note_repeated_in_many_measurements_is_one_line_with_count_and_range() -> None:
    plan = plan_of(SPEC_TEXT)
    group = plan.groups[1]
    ms = []
    for i, cell in enumerate(group.cells * 6):
        m = measurement(cell, group.group_id, 100.0, attempt=1 + i // len(group.cells))
        m.extra["client_check"] = {
            "client_bound": True,
            "lag_p99_ms": 10.0 + i,
            "coalesced_share": 0.1,
            "affected": {"mean_ttft_ms": 0.05 + i / 1000},
        }
        ms.append(m)
    lines = limits_of(ms, "concurrency")
    assert len(ms) > COLLAPSE_AFTER and len(lines) == 1, lines
    xs = sorted(c.x for c in group.cells)
    assert f"fell behind in {len(ms)} measurements of `{group.arm}`" in lines[0]
    assert f"at concurrency {xs[0]:g}–{xs[-1]:g}" in lines[0]
    assert f"loop lag p99 10–{10 + len(ms) - 1} ms" in lines[0]
    few = limits_of(ms[:COLLAPSE_AFTER], "concurrency")
    assert len(few) == COLLAPSE_AFTER  # a few are still said one by one
