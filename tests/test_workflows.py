"""The GitHub Actions workflows in `.github/workflows/`: parsed as YAML (the jobs and steps they
must have), then their jobs played step by step the way a runner would, with every matrixrun
command really run — against the simulator (`matrixrun run` gets `--rehearse`, there is no GPU
here) and a local stand-in for the GitHub API on 127.0.0.1.

What the runner does is mimicked closely enough to catch a broken workflow: `${{ }}`
expressions are looked up in a table of the exact expressions these workflows may use (an
unknown one fails the test, so a changed workflow needs its test changed too), a step without
`if:` runs only while every earlier step succeeded, `if: ${{ !cancelled() }}` always runs, and
the step environment is the runner's (GITHUB_API_URL, GITHUB_REPOSITORY, a fresh
GITHUB_STEP_SUMMARY file per step) plus the job's `env:`. Shell lines that are not matrixrun
(pip, git diff) are not run; matrixrun lines must be simple commands with quoted variables.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakegithub import TOKEN, State, fake_github
from ruamel.yaml import YAML

from matrixrun.publish.github import marker

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
TINY = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()
GATE = "contains(github.event.pull_request.labels.*.name, 'matrixrun-gate') && 'worse' || 'never'"


def load(name: str) -> dict[str, Any]:
    data = YAML(typ="safe").load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict)
    return data


def steps_named(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(s.get("name") or s.get("uses")): s for s in job["steps"]}


# ------------------------------------------------------------------------------ structure


def test_plan_workflow_has_the_jobs_and_steps_it_needs() -> None:
    wf = load("matrixrun-plan.yml")
    assert "spec/**.yaml" in wf["on"]["pull_request"]["paths"]  # `on` is a key (YAML 1.2)
    assert wf["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert set(wf["jobs"]) == {"changed", "proposal"}
    diff = steps_named(wf["jobs"]["changed"])["List the specs this pull request adds or changes"]
    assert "--diff-filter=AMR" in diff["run"] and "GITHUB_OUTPUT" in diff["run"]
    job = wf["jobs"]["proposal"]
    assert job["needs"] == "changed" and "ubuntu" in job["runs-on"]
    assert job["strategy"]["matrix"]["spec"] == "${{ fromJSON(needs.changed.outputs.specs) }}"
    steps = steps_named(job)
    assert steps["Validate"]["run"].startswith("matrixrun validate")
    assert "--markdown" in steps["Plan"]["run"]
    assert "post --plan" in steps["Post the proposal"]["run"]
    # the proposal is posted even when validation failed (it shows the errors)
    assert steps["Post the proposal"]["if"] == "${{ !cancelled() }}"
    assert job["env"]["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"


def test_run_workflow_has_the_jobs_and_steps_it_needs() -> None:
    wf = load("matrixrun-run.yml")
    assert wf["on"]["pull_request"]["types"] == ["labeled"]
    assert wf["permissions"]["pull-requests"] == "write"
    assert "matrixrun-run" in wf["jobs"]["changed"]["if"]
    job = wf["jobs"]["run"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    assert job["strategy"]["max-parallel"] == 1
    steps = steps_named(job)
    names = list(steps)
    order = ["Validate", "Run", "Upload the run directory", "Post the verdict"]
    assert [n for n in names if n in order] == order
    upload = steps["Upload the run directory"]
    assert str(upload["uses"]).startswith("actions/upload-artifact@")
    assert upload["if"] == "${{ !cancelled() }}" and upload["with"]["path"] == "${{ env.RUN_DIR }}"
    assert steps["Post the verdict"]["if"] == "${{ !cancelled() }}"
    assert '--fail-on "$FAIL_ON"' in steps["Post the verdict"]["run"]
    assert job["env"]["FAIL_ON"] == "${{ " + GATE + " }}"


# ------------------------------------------------------------------------------ playing a job


@dataclass
class Played:
    ok: bool
    codes: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)
    uploaded: list[Path] = field(default_factory=list)


def expression(text: str, context: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        expr = m.group(1).strip()
        assert expr in context, f"the workflow uses ${{{{ {expr} }}}}: add it to the test"
        return context[expr]

    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


def shell_words(line: str, env: dict[str, str]) -> list[str]:
    """A matrixrun line as bash would split it: every variable must be double-quoted."""
    assert not re.search(r"[|;&<>`]|\$\(", line), f"not a simple command: {line}"
    unquoted = re.sub(r'"[^"]*"', "", line)
    assert "$" not in unquoted, f"unquoted variable in: {line}"

    def var(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        assert name in env, f"${name} is not set for: {line}"
        return env[name]

    return [re.sub(r"\$\{(\w+)\}|\$(\w+)", var, w) for w in shlex.split(line)]


def play(
    workflow: str, job_name: str, context: dict[str, str], gh: State, workspace: Path
) -> Played:
    job = load(workflow)["jobs"][job_name]
    job_env = {k: expression(str(v), context) for k, v in (job.get("env") or {}).items()}
    played = Played(ok=True)
    for index, step in enumerate(job["steps"]):
        name = str(step.get("name") or step.get("uses"))
        condition = step.get("if")
        if condition is None and not played.ok:
            continue
        if condition is not None:
            assert condition == "${{ !cancelled() }}", f"{name}: unexpected if: {condition}"
        env = {
            "PATH": os.environ["PATH"],
            "GITHUB_API_URL": gh.url,
            "GITHUB_REPOSITORY": "o/r",
            "GITHUB_STEP_SUMMARY": str(workspace / f".summary-{index}"),
            **job_env,
        }
        env.update({k: expression(str(v), context) for k, v in (step.get("env") or {}).items()})
        if "uses" in step:
            if str(step["uses"]).startswith("actions/upload-artifact"):
                path = expression(str(step["with"]["path"]), {**context, **_env_ctx(env)})
                played.uploaded.append(workspace / path)
            continue
        for line in expression(str(step["run"]), context).splitlines():
            if not line.strip().startswith("matrixrun "):
                continue
            words = shell_words(line.strip(), env)
            if words[1] == "run":
                words.append("--rehearse")  # no GPU here: the simulator stands in
            res = subprocess.run(
                [sys.executable, "-m", "matrixrun", *words[1:]],
                cwd=workspace, env=env, capture_output=True, text=True, timeout=240, check=False,
            )  # fmt: skip
            assert "Traceback" not in res.stderr, res.stderr
            assert TOKEN not in res.stdout + res.stderr
            played.codes[name] = res.returncode
            played.outputs[name] = res.stdout + res.stderr
            if res.returncode != 0:
                played.ok = False
                break
        summary = Path(env["GITHUB_STEP_SUMMARY"])
        if summary.exists():
            played.summaries[name] = summary.read_text()
    return played


def _env_ctx(env: dict[str, str]) -> dict[str, str]:
    return {f"env.{k}": v for k, v in env.items()}


def context_for(spec: Path, labels: tuple[str, ...] = ()) -> dict[str, str]:
    return {
        "matrix.spec": str(spec),
        "github.event.pull_request.number": "7",
        "secrets.GITHUB_TOKEN": TOKEN,
        "github.run_id": "4242",
        "strategy.job-index": "0",
        "!cancelled()": "true",
        GATE: "worse" if "matrixrun-gate" in labels else "never",
    }


@pytest.fixture
def gh() -> Any:
    with fake_github(unrelated=3) as state:
        yield state


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The runner's checkout: a copy of the specs (matrixrun itself is the installed one)."""
    ws = tmp_path / "ws"
    (ws / "spec").mkdir(parents=True)
    return ws


@pytest.mark.slow
def test_plan_workflow_posts_one_proposal_per_spec_updated_by_each_push(
    workspace: Path, gh: State
) -> None:
    spec = workspace / "spec" / "tiny.yaml"
    spec.write_text(TINY)
    first = play("matrixrun-plan.yml", "proposal", context_for(spec), gh, workspace)
    assert first.ok, first.outputs
    assert first.codes["Validate"] == 0
    assert first.summaries["Plan"].startswith("## Proposal: tiny")
    proposals = gh.ours(marker("tiny", "proposal"))
    assert len(proposals) == 1 and "--moe-runner-backend flashinfer_cutedsl" in proposals[0]["body"]
    assert all(r.auth == f"Bearer {TOKEN}" for r in gh.requests)

    spec.write_text(
        TINY.replace("concurrency: [1, 4]", "concurrency: [1, 4, 16]").replace(
            "num_prompts: 8", "num_prompts: 16"
        )
    )
    second = play("matrixrun-plan.yml", "proposal", context_for(spec), gh, workspace)
    assert second.ok and "updated the proposal comment" in second.outputs["Post the proposal"]
    proposals = gh.ours(marker("tiny", "proposal"))
    assert len(proposals) == 1 and "1, 4, 16" in proposals[0]["body"]
    assert len(gh.comments) == 4


@pytest.mark.slow
def test_plan_workflow_fails_an_invalid_spec_and_still_posts_why(
    workspace: Path, gh: State
) -> None:
    spec = workspace / "spec" / "tiny.yaml"
    spec.write_text(TINY.replace("max_runs: 2", "max_runz: 2"))
    played = play("matrixrun-plan.yml", "proposal", context_for(spec), gh, workspace)
    assert not played.ok and played.codes["Validate"] == 2
    assert played.codes["Plan"] == 2 and played.codes["Post the proposal"] == 0
    (proposal,) = gh.ours(marker("tiny", "proposal"))
    assert "Validation failed" in proposal["body"] and "max_runz" in proposal["body"]
    # an experiment name that is not a slug (so the spec is invalid) still keys one comment
    spec.write_text(TINY.replace("experiment: tiny", "experiment: tiny run"))
    again = play("matrixrun-plan.yml", "proposal", context_for(spec), gh, workspace)
    assert again.codes["Post the proposal"] == 0, again.outputs
    assert len(gh.ours(marker("tiny_run", "proposal"))) == 1


@pytest.mark.slow
def test_run_workflow_runs_posts_the_verdict_and_uploads_the_run_directory(
    workspace: Path, gh: State
) -> None:
    spec = workspace / "spec" / "tiny.yaml"
    spec.write_text(TINY)
    played = play("matrixrun-run.yml", "run", context_for(spec), gh, workspace)
    assert played.ok, played.outputs
    run_dir = workspace / "runs" / "ci" / "4242-0"
    assert played.uploaded == [run_dir]
    assert (run_dir / "results.jsonl").exists() and (run_dir / "report.md").exists()
    report = (run_dir / "report.md").read_text()
    assert played.summaries["Run"] == report + "\n"  # the job summary is the verdict
    (verdict,) = gh.ours(marker("tiny"))
    assert verdict["body"] == f"{marker('tiny')}\n{report}"
    assert "SIMULATED" in verdict["body"]
    for f in workspace.rglob("*"):  # the token reached no file: run directory, logs, summaries
        if f.is_file():
            assert TOKEN not in f.read_text(errors="replace"), f


@pytest.mark.slow
def test_run_workflow_with_the_gate_label_fails_on_a_worse_candidate_after_posting(
    workspace: Path, gh: State
) -> None:
    # swap the arms: the slow backend becomes the candidate, and it is worse
    worse = TINY.replace("  slow: {moe_runner_backend: flashinfer_cutlass}\n", "").replace(
        "  fast: {moe_runner_backend: flashinfer_cutedsl}\n",
        "  fast: {moe_runner_backend: flashinfer_cutedsl}\n"
        "  slow: {moe_runner_backend: flashinfer_cutlass}\n",
    )
    assert worse.index("fast:") < worse.index("slow:")
    spec = workspace / "spec" / "tiny.yaml"
    spec.write_text(worse)
    ungated = play("matrixrun-run.yml", "run", context_for(spec), gh, workspace)
    assert ungated.ok, ungated.outputs  # no gate label: a worse verdict is reported, not failed
    shutil.rmtree(workspace / "runs")
    gated = play("matrixrun-run.yml", "run", context_for(spec, ("matrixrun-gate",)), gh, workspace)
    assert not gated.ok and gated.codes["Post the verdict"] == 1
    assert "slow is worse" in gated.outputs["Post the verdict"]
    (verdict,) = gh.ours(marker("tiny"))  # posted (and updated) before the check failed
    assert "worse" in verdict["body"]
    assert gated.uploaded == [workspace / "runs" / "ci" / "4242-0"]
