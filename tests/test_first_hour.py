"""Issue 33, the newcomer's first hour: one word per outcome, honest counts and progress, a CI
gate that stops every regression, and the command line's small promises (aliases, help, a
misspelt gate refused before anything is written). Run directories are built with the
helpers of test_report.py (real analysis and rendering); the CLI runs in-process or as a real
subprocess where its help text is the subject."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_report import writeup_run
from test_report_decision import ratio_run

from matrixrun.cli.main import main
from matrixrun.report import render_run_dir
from matrixrun.run.progress import PlainObserver, progress_text


def mr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", *args], capture_output=True, text=True, check=False
    )


# --------------------------------------------------------------------------- one word


def test_the_report_never_says_inconclusive(tmp_path: Path) -> None:
    """The tables say "undecided"; so must every other line (headline, regimes, rerun log)."""
    flat = ratio_run(tmp_path / "u", [1.02] * 5)  # +2% against a 3% margin on σ 1%, n = 1
    doc = render_run_dir(flat)
    assert "undecided" in doc
    assert "inconclusive" not in doc.lower()


def test_fail_on_accepts_undecided_and_its_alias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flat = ratio_run(tmp_path / "u", [1.0, 1.0, 1.0, 1.0, 1.02])
    out = str(tmp_path / "r.md")
    assert main(["report", str(flat.path), "-o", out, "--fail-on", "undecided"]) in (0, 1)
    capsys.readouterr()
    for word in ("undecided", "inconclusive"):
        assert main(["report", str(flat.path), "-o", out, "--fail-on", word]) != 2


def test_fail_on_worse_stops_a_mixed_candidate_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = writeup_run(tmp_path / "m")
    out = str(tmp_path / "r.md")
    capsys.readouterr()
    assert main(["report", str(mixed.path), "-o", out, "--fail-on", "worse"]) == 1
    err = capsys.readouterr().err
    assert "is mixed, with 2 of 5 cells worse" in err


def test_a_misspelt_gate_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = writeup_run(tmp_path / "m")
    out = tmp_path / "r.md"
    assert main(["report", str(mixed.path), "-o", str(out), "--fail-on", "wrose"]) == 2
    assert not out.exists()
    assert "wrose is not a verdict" in capsys.readouterr().err
    cmp_out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                str(mixed.path),
                str(mixed.path),
                "--out",
                str(cmp_out),
                "--fail-on",
                "wrose",
            ]
        )
        == 2
    )
    assert not cmp_out.exists()


# --------------------------------------------------------------------------- the command line


def test_analyze_is_an_alias_and_report_takes_out(tmp_path: Path) -> None:
    run = writeup_run(tmp_path / "m")
    (run.path / "verdict.json").unlink()
    assert main(["analyze", str(run.path)]) == 0
    assert (run.path / "verdict.json").exists()
    out = tmp_path / "doc.md"
    assert main(["report", str(run.path), "--out", str(out)]) == 0
    assert out.read_text().startswith("# ")


def test_top_level_help_names_exit_codes_and_where_to_start() -> None:
    text = mr("--help").stdout
    assert "exit codes: 0 ok; 1 ran" in text and "130 interrupted" in text
    assert "docs/getting-started.md" in text


def test_ingest_help_names_genai_bench() -> None:
    assert "genai_bench" in mr("ingest", "--help").stdout.replace("\n", " ")


def test_validate_counts_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = Path(__file__).parent.parent / "spec" / "glm5_cutedsl.yaml"
    assert main(["validate", str(spec)]) == 0
    line = capsys.readouterr().out
    assert "(2 arms, 1 slice, 10 cells, 2 launches)" in line and "(s)" not in line


# --------------------------------------------------------------------------- progress


def test_progress_says_done_of_planned_and_the_most_with_an_eta() -> None:
    assert progress_text(0, 10, 30, 0.0) == "0/10, at most 30"
    assert progress_text(5, 10, 30, 50.0) == "5/10, at most 30, ETA 50s–4m"
    # past the first pass: planned grows with the reruns, never "23/10+"
    assert progress_text(23, 10, 30, 230.0) == "23/23, at most 30, ETA ≤ 70s"
    assert progress_text(10, 10, None, 100.0) == "10/10"


def test_plain_progress_line_uses_the_report_word(tmp_path: Path) -> None:
    from test_report import SPEC_TEXT, measurement, plan_of

    plan = plan_of(SPEC_TEXT)
    cell = plan.groups[0].cells[0]
    m = measurement(cell, plan.groups[0].group_id, 100.0).model_copy(update={"reason": "undecided"})
    out = tmp_path / "log"
    with out.open("w") as fh:
        obs = PlainObserver(fh)
        obs.start(4, 12)
        obs.measured(m, "")
    line = out.read_text()
    assert "1/4, at most 12" in line and "(undecided)" in line and "inconclusive" not in line


# --------------------------------------------------------------------------- compare


def test_compare_names_timestamped_runs_plainly_and_tells_every_chart_apart(tmp_path: Path) -> None:
    a, b = writeup_run(tmp_path / "a"), writeup_run(tmp_path / "b")
    assert a.path.name == b.path.name == "20260101-000000"  # the runner's naming
    out = tmp_path / "cmp"
    assert main(["compare", str(a.path), str(b.path), "-o", str(out)]) == 0
    doc = (out / "report.md").read_text()
    assert doc.startswith("# run B against run A (two runs compared)")
    assert "20260101-000000 (A)" not in doc
    assert f"`run A` is {a.path}" in doc
    # each chart is told apart by its title and the legend under it (the chart code keeps
    # titles short, since xychart cuts long ones; the legend names the arm compared)
    lines = doc.splitlines()
    charts = [
        (lines[i].strip(), next(x for x in lines[i:] if x.startswith("*")))
        for i, line in enumerate(lines)
        if line.strip().startswith("title ")
    ]
    assert len(charts) >= 4 and len(set(charts)) == len(charts), charts


def test_a_rehearsal_report_lands_where_git_ignores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --rehearse` copied its report over the committed reports/<stem>.rehearsal.md, so
    `git status` was dirty after the README's first command; it goes under runs/ now."""
    import argparse

    from matrixrun.cli.commands.run import publish_report

    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.md"
    report.write_text("# r\n")
    args = argparse.Namespace(report=None, rehearse=True, spec="myspec/x.yaml")
    assert publish_report(report, args) == Path("runs/x.rehearsal.md")
    assert not (tmp_path / "reports").exists()
    ignored = (Path(__file__).parent.parent / ".gitignore").read_text().splitlines()
    assert "runs/" in ignored
    real = argparse.Namespace(report=None, rehearse=False, spec="myspec/x.yaml")
    assert publish_report(report, real) == Path("reports/x.md")
    # issue 42: `run --out DIR` wrote reports/<experiment>.md into the working directory too
    (tmp_path / "reports" / "x.md").unlink()
    for rehearse in (True, False):
        named = argparse.Namespace(report=None, rehearse=rehearse, spec="x.yaml", out="d")
        assert publish_report(report, named) == report
    assert not any((tmp_path / "reports").iterdir())


# --------------------------------------------------------------------------- what was measured


def test_a_midpoint_with_one_arm_measured_says_so_under_the_table(tmp_path: Path) -> None:
    """Bisection measured only the candidate at a midpoint (its last round ended first): the
    analysis compares nothing there, so the point has no row; the report says what was
    measured instead of dropping it silently (docs/spec.md, verify.bisect)."""
    from test_report import SPEC_TEXT, measurement, plan_of, write_run

    from matrixrun.plan import added_cell
    from matrixrun.spec import parse_spec

    text = SPEC_TEXT
    plan, spec = plan_of(text), parse_spec(text)
    ms = [
        measurement(c, g.group_id, 100.0 * (1.3 if g.arm == plan.candidates[0] else 1.0))
        for g in plan.groups
        for c in g.cells
    ]
    cand = next(g for g in plan.groups if g.arm == plan.candidates[0])
    mid = added_cell(spec, cand, cand.cells[2], 128)
    ms.append(measurement(mid, cand.group_id, 250.0, reason="bisection"))
    doc = render_run_dir(write_run(tmp_path / "run", text, ms))
    assert (
        "concurrency 128 (added by bisection): only `flashinfer_cutedsl` was measured there — "
        "`flashinfer_cutlass` has no successful run of it" in doc
    )
    assert "| 128 (added by bisection) |" not in doc


# --------------------------------------------------------------------------- believable numbers


def _one_df_run(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Every cell once per arm, one warm repeat of the baseline at concurrency 1: σ on 1 df."""
    from test_report import SPEC_TEXT, measurement, plan_of, with_spec, write_run

    text = with_spec(SPEC_TEXT, verify={"threshold": "3%", "max_runs": 3})
    plan = plan_of(text)
    ms = [
        measurement(c, g.group_id, 100.0 * (1.02 if g.arm == plan.candidates[0] else 1.0))
        for g in plan.groups
        for c in g.cells
    ]
    base = plan.groups[0]
    ms.append(measurement(base.cells[0], base.group_id, 100.4, attempt=2, reason="undecided"))
    return write_run(tmp_path / "run", text, ms)


def test_no_interval_the_data_cannot_support(tmp_path: Path) -> None:
    """ "+2.0% [−99.3, +15041.5]" came from a t quantile on 1 df: past ×4 the cell says what it
    lacks and what would give it an interval, and gives no run count read off that σ."""
    doc = render_run_dir(_one_df_run(tmp_path))
    assert "| 10 | 100.0 | 102.0 | +2.0% (no usable interval: σ on 1 df) |" in doc
    assert "at concurrency 10, 64, 256 and 1024: its interval is too wide to read: a " in doc
    assert "calibration run (`verify.design: fixed`" in doc
    # σ on 1 df is not stated as a measurement
    assert "σ ≈ 0.3% on only 1 df" in doc and "σ = 0.3% (df = 1" not in doc
    assert "runs from half to 16 times this estimate" in doc


def test_confidence_is_printed_with_sensible_precision() -> None:
    from matrixrun.report import fmt

    assert fmt.confidence(0.981791) == "98.2%"
    assert fmt.confidence(0.95) == "95.0%"
    assert fmt.confidence(0.99951) == "99.95%"


def test_a_same_verdict_states_its_level_sensibly(tmp_path: Path) -> None:
    flat = ratio_run(tmp_path / "s", [1.0] * 5)
    doc = render_run_dir(flat)
    assert "% confidence" in doc
    assert not re.search(r"\d+\.\d{3,}% confidence", doc), "spurious precision"


def test_runs_needed_past_twenty_is_not_advice() -> None:
    from matrixrun.report.sections.headline import settle

    text = settle("nox -s matrix -- x.yaml", [188, 90], 2)
    assert "More runs will not settle it" in text and "more than 20 runs per arm" in text
    assert "max_runs" not in text and "`nox" not in text
    mixed = settle("nox -s matrix -- x.yaml", [4, 188], 2)
    assert "about 4 runs per arm would decide 1 of the 2" in mixed and "over 20" in mixed


def test_plan_warns_when_the_margin_is_out_of_reach() -> None:
    res = mr("plan", "tests/specs/tiny.yaml")  # noise 2%, max_runs 2, margin 3%
    assert res.returncode == 0
    assert "warning: with the declared noise (verify.noise 2%) and verify.max_runs 2" in res.stdout
    assert "no cell can be called same" in res.stdout and "raise verify.max_runs to 6" in res.stdout
    ok = mr("plan", "spec/glm5_cutedsl.yaml")  # no declared noise: nothing to promise
    assert "cannot get narrower" not in ok.stdout


# --------------------------------------------------------------------------- lines that agree


def test_the_checks_line_names_the_fresh_replicates_the_log_lists() -> None:
    from matrixrun.core.verdict import RerunKind
    from matrixrun.report.sections.checks import Checks, checks_line

    class R:  # the two fields checks_line reads of a routine replicate
        kind = RerunKind.FRESH_SERVER

    c = Checks([], {}, [], 0, 0, 10, replicates=[R()] * 9)  # type: ignore[list-item]
    line = checks_line(c, simulated=True, ingested=False, axis="concurrency")
    assert "not tested: warm-up or an odd server instance" in line
    assert "the 9 fresh-server replicates in the rerun log measured the launch-to-launch" in line


def test_the_proposal_cost_counts_bisection() -> None:
    from matrixrun.publish.proposal import render_proposal

    text = render_proposal("spec/glm5_cutedsl.yaml", ())[0]
    assert (
        "| + crossover bisection, at most (verify.bisect 1) | 0 (on those launches) | 24 |" in text
    )


def test_the_proposal_note_says_server_flags_once() -> None:
    from matrixrun.publish.proposal import render_proposal

    text = render_proposal("spec/glm5_cutedsl.yaml", ())[0]
    assert "Note: server flags checked against" in text
    assert "server flags: flags" not in text
