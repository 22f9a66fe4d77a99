"""Extending a finished run (issue 44, "settle it means starting over"): resuming with a raised
`verify.max_runs` (or `verify.budget`) keeps every measurement and measures what the policy
then asks for; the amendment is in events.jsonl and the report's Setup; any other change, a
lowered limit or an edited run copy is refused with the one sentence resuming always gave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_runner import TINY, mr, read_results

from matrixrun.core.errors import InputError
from matrixrun.plan import expand
from matrixrun.report.sections.headline import settle_command
from matrixrun.report.sections.setup import extensions
from matrixrun.run.amend import Change, amendment, record_amendment, sha256
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import run_settings
from matrixrun.spec.loader import parse_spec

#: tiny.yaml with one run per cell allowed, a candidate about 30% faster and a declared noise
#: floor of 15% per run: at one run per arm the interval (±40%) cannot clear the 3% margin, so
#: every cell is undecided after stage 1 whatever the host's load, while a few runs per arm
#: would settle it (the report's settle line gives the command), so the extension has work
START = TINY.replace(
    "verify: {threshold: 3%, surprise: 10%, max_runs: 2, noise: 2%}",
    "verify: {threshold: 3%, surprise: 50%, max_runs: 1, noise: 15%}",
).replace("set: {step_ms: [[1, 10], [8, 12]]}", "set: {step_ms: [[1, 15], [8, 18]]}")
REFUSED = "differs from the spec this run started with"


def _run_dir(tmp_path: Path, text: str = START) -> RunDir:
    """A run directory as the runner leaves it: the spec copy and its sha256."""
    rd = RunDir(tmp_path / "run").create()
    rd.write_text("spec.yaml", text)
    rd.write_text("spec.sha256", sha256(text) + "\n")
    return rd


def _refusal(rd: RunDir, text: str) -> str:
    with pytest.raises(InputError) as caught:
        amendment(rd, Path("new.yaml"), text)
    return str(caught.value)


def test_the_same_spec_is_no_amendment(tmp_path: Path) -> None:
    assert amendment(_run_dir(tmp_path), Path("new.yaml"), START) is None


def test_raising_max_runs_or_the_budget_is_an_amendment(tmp_path: Path) -> None:
    rd = _run_dir(tmp_path, START.replace("max_runs: 1,", "max_runs: 1, budget: 1h,"))
    raised = START.replace("max_runs: 1,", "max_runs: 13, budget: 2h,")
    amended = amendment(rd, Path("new.yaml"), raised)
    assert amended is not None
    assert amended.changes == (Change("max_runs", 1, 13), Change("budget", 3600.0, 7200.0))
    assert amended.sha_before == sha256(START.replace("max_runs: 1,", "max_runs: 1, budget: 1h,"))
    assert amended.sha_after == sha256(raised)
    # no budget at all is the most a budget can be
    unlimited = amendment(rd, Path("new.yaml"), START)
    assert unlimited is not None and unlimited.changes == (Change("budget", 3600.0, None),)


def test_a_comment_is_no_change_of_setting(tmp_path: Path) -> None:
    amended = amendment(_run_dir(tmp_path), Path("new.yaml"), START + "# why: see PR 12\n")
    assert amended is not None and amended.changes == ()


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("output_len: 8", "output_len: 9", "workload.output_len"),  # other cells
        ("threshold: 3%", "threshold: 5%", "verify.threshold"),  # the standard, after the data
        ("concurrency: [1, 4]", "concurrency: [1, 4, 8]", "sweep.concurrency"),
        ("max_runs: 1,", "max_runs: 3, confidence: 90%,", "verify.confidence"),  # with a raise
        ("path: /models/tiny", "path: /models/other", "model.path"),
        ("kind: sglang", "kind: vllm", "engine.kind"),
        ("  fast: {moe", "  faster: {moe", "arms.faster"),
    ],
)
def test_anything_else_is_refused_with_the_sentence(
    tmp_path: Path, old: str, new: str, named: str
) -> None:
    rd = _run_dir(tmp_path)
    changed = START.replace(old, new)
    assert changed != START
    text = _refusal(rd, changed)
    assert REFUSED in text and f"--resume {rd.path}" in text and f"({named} changed)" in text
    assert "only raising verify.max_runs or verify.budget extends a run" in text


def test_a_lowered_limit_is_refused(tmp_path: Path) -> None:
    rd = _run_dir(tmp_path, START.replace("max_runs: 1,", "max_runs: 3, budget: 1h,"))
    text = _refusal(rd, START.replace("max_runs: 1,", "max_runs: 2, budget: 1h,"))
    assert "verify.max_runs 2 is below the 3 this run started with" in text
    text = _refusal(rd, START.replace("max_runs: 1,", "max_runs: 3, budget: 30m,"))
    assert "verify.budget is lower" in text


def test_an_edited_run_copy_is_refused(tmp_path: Path) -> None:
    """Editing RUN/spec.yaml in place loses what the run started with: refused, even when the
    resume names that same file (which used to resume silently with whatever it now says)."""
    rd = _run_dir(tmp_path)
    edited = START.replace("output_len: 8", "output_len: 9")
    (rd.path / "spec.yaml").write_text(edited)
    text = _refusal(rd, edited)
    assert REFUSED in text and "was edited after the run wrote it" in text


def test_the_record_and_the_setup_line(tmp_path: Path) -> None:
    rd = _run_dir(tmp_path)
    raised = START.replace("max_runs: 1,", "max_runs: 4,")
    amended = amendment(rd, Path("new.yaml"), raised)
    assert amended is not None
    record_amendment(rd, amended, Path("new.yaml"), raised)
    # the copy is the amended spec now: resuming again with it is no second amendment
    assert amendment(rd, Path("new.yaml"), raised) is None
    (event,) = [e for e in rd.events() if e["event"] == "amend"]
    assert event["changes"] == [{"setting": "verify.max_runs", "old": 1, "new": 4}]
    assert event["spec_sha256_before"] == sha256(START)
    assert event["spec_sha256_after"] == sha256(raised)
    (line,) = extensions(rd.events())
    day = str(event["t"])[:10]
    assert line.startswith(f"`verify.max_runs` 1 → 4 on {day} ")
    assert f"{sha256(START)[:12]} → {sha256(raised)[:12]}" in line
    budget = [{"event": "amend", "t": event["t"], "changes": [
        {"setting": "verify.budget", "old": 3600.0, "new": None}]}]  # fmt: skip
    assert extensions(budget)[0].startswith("`verify.budget` 60m → no limit on")


def test_the_settle_command_resumes_the_run(tmp_path: Path) -> None:
    spec = parse_spec(START.replace("max_runs: 1,", "max_runs: 3,"))
    at = run_settings(spec, expand(spec), rehearsal=True)
    command = settle_command(at, "runs/x/1", "spec/x.yaml", None, [7, 40])
    assert command == (
        "matrixrun run spec/x.yaml --rehearse --resume runs/x/1  # after raising "
        "verify.max_runs to 7 in spec/x.yaml"
    )
    slurm = settle_command(at, "runs/x/1", "spec/x.yaml", None, [], slurm_run=True)
    assert slurm is not None and "--rehearse --executor slurm --resume" in slurm
    assert "to 4 in" in slurm  # at least one run more than the spec allowed
    assert at.spec is not None
    most = at.model_copy(update={"spec": at.spec.model_copy(update={"max_runs": 20})})
    assert settle_command(most, "runs/x/1", "spec/x.yaml", None, [30]) is None
    own = settle_command(at, "runs/x/1", "runs/x/1/spec.yaml", None, [5])
    assert own == (  # the run's own copy is never edited (an edited copy is refused)
        "matrixrun run extended.yaml --rehearse --resume runs/x/1  # extended.yaml: a copy of "
        "runs/x/1/spec.yaml with verify.max_runs: 5"
    )


@pytest.mark.slow
def test_a_finished_rehearsal_extended_keeps_its_measurements_and_measures_more(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "extend.yaml"
    spec.write_text(START)
    run_dir = tmp_path / "run"
    first = mr("run", str(spec), "--rehearse", "--out", str(run_dir), "--report",
               str(tmp_path / "r1.md"), timeout=900)  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    report = (run_dir / "report.md").read_text()
    assert "**Verdict on `output_throughput`: undecided.**" in report
    assert "--resume " in report and "after raising verify.max_runs to" in report  # settle it
    kept = (run_dir / "results.jsonl").read_bytes()
    before = read_results(run_dir)

    spec.write_text(START.replace("max_runs: 1,", "max_runs: 3,"))
    again = mr("run", str(spec), "--rehearse", "--resume", str(run_dir), "--report",
               str(tmp_path / "r2.md"), timeout=900)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert (run_dir / "results.jsonl").read_bytes().startswith(kept)  # byte for byte
    after = read_results(run_dir)
    assert len(after) > len(before)  # the policy asked for more: every cell was undecided
    assert all(m.reason != "first" for m in after[len(before) :])  # nothing measured twice
    assert "**extended:** `verify.max_runs` 1 → 3 on " in (run_dir / "report.md").read_text()
    settings = json.loads((run_dir / "settings.json").read_text())
    assert settings["spec"]["max_runs"] == 3 and settings["analysis"]["looks"] == 3

    spec.write_text(START.replace("max_runs: 1,", "max_runs: 5,").replace("seed: 3", "seed: 4"))
    refused = mr("run", str(spec), "--rehearse", "--resume", str(run_dir), timeout=900)
    assert refused.returncode == 2 and REFUSED in refused.stderr
    (line,) = [x for x in refused.stderr.splitlines() if REFUSED in x]  # one sentence
    assert "(workload.seed changed)" in line and line == refused.stderr.strip().splitlines()[-1]
    assert read_results(run_dir) == after
