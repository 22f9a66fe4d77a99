"""What `run`, `report`, `plan` and `post` need to live in CI: the GitHub Actions job summary,
the verdict gate (`--fail-on`), and how `post` gets a verdict document for a run directory
(its identity, and rendering one when the directory has none).

Kept apart from the commands so the CLI stays wiring, and so the one call into the report
renderer (`render_report`) is a single place to change when the analysis stages move.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.core.words import plural
from matrixrun.publish.github import (
    Kind,
    Target,
    check_key,
    post_comment,
    resolve_api_url,
    safe_key,
)
from matrixrun.publish.github import (
    dry_run as render_dry_run,
)
from matrixrun.rundir.results import RunDir

#: Overall verdicts a candidate can get, as the report words them, for `--fail-on`.
VERDICTS = ("better", "worse", "mixed", "same", "undecided")
#: The older word for "undecided" (verdict.json stored it before format version 2), which
#: `--fail-on` still accepts.
ALIASES = {"inconclusive": "undecided"}
#: GitHub's limit for one step's job summary (1 MiB); a longer write is refused by Actions.
SUMMARY_LIMIT = 1024 * 1024


def write_step_summary(markdown: str) -> str | None:
    """Append `markdown` to the job summary when `GITHUB_STEP_SUMMARY` names one (GitHub
    Actions sets it per step); returns a one-sentence warning when it could not, else None.

    A warning rather than an error: the run, report or plan already succeeded and is on disk;
    a summary that cannot be written must not turn that into a failure.
    """
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    if len(text.encode()) > SUMMARY_LIMIT:
        return (
            f"the Markdown is {len(text.encode())} bytes, over the job summary's 1 MiB; "
            "it was not written to GITHUB_STEP_SUMMARY (the file itself is complete)"
        )
    try:
        with Path(target).open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        return f"could not append to GITHUB_STEP_SUMMARY ({target}: {exc.strerror})"
    return None


def parse_fail_on(value: str) -> frozenset[str]:
    """`worse`, `worse,mixed`, or `never` -> the overall verdicts that fail the command."""
    if value.strip().lower() in ("", "never", "none"):
        return frozenset()
    words = {ALIASES.get(w, w) for w in (w.strip().lower() for w in value.split(",")) if w}
    bad = sorted(words - set(VERDICTS))
    if bad:
        raise InputError(
            f"--fail-on {value!r}: {', '.join(bad)} is not a verdict; use a comma-separated "
            f"list of {', '.join(VERDICTS)}, or never"
        )
    return frozenset(words)


def failing_candidates(run_dir: str | Path, fail_on: frozenset[str]) -> list[tuple[str, str]]:
    """(candidate, what fails it) for each candidate whose overall verdict on the primary
    metric (verdict.json `overall`) is in `fail_on`, in the report's words.

    `worse` fails a candidate with any worse cell, whatever its overall word: a gate on
    regressions that let a `mixed` candidate with cells 28% and 50% worse through would be
    no gate (issue 33). The reason then says how many cells were worse."""
    path = Path(run_dir) / "verdict.json"
    try:  # through RunDir: an older verdict.json is migrated (core.migrate), words included
        overall = RunDir(run_dir).read_json("verdict.json").get("overall") or {}
    except (OSError, ValueError, InputError) as exc:
        raise InputError(
            f"{path} is missing or unreadable, so --fail-on cannot judge the run; render the "
            f"report first (`matrixrun report {run_dir}`)"
        ) from exc
    out = []  # verdict.json stores each verdict as the report prints it
    for candidate, result in overall.items():
        if not isinstance(result, dict):
            continue
        verdict = result.get("verdict")
        worse = result.get("worse") if isinstance(result.get("worse"), int) else 0
        if verdict in fail_on:
            out.append((str(candidate), str(verdict)))
        elif "worse" in fail_on and worse:
            cells = result.get("cells") if isinstance(result.get("cells"), int) else None
            of = f"{worse} of {plural(cells, 'cell')}" if cells else plural(worse, "cell")
            out.append((str(candidate), f"{verdict}, with {of} worse"))
    return out


def experiment_of(run_dir: str | Path) -> str:
    """The comment key of a run directory, the same however often and wherever it is re-run.

    A `matrixrun run` directory: the spec's experiment (plan.json). An ingested one has no
    experiment name, and its directory name changes from one ingest to the next, so its key
    is what defines the comparison: `ingest:` + baseline + the candidates (settings.json).
    """
    rd = Path(run_dir)
    plan = _read(rd / "plan.json")
    if isinstance(plan, dict) and plan.get("experiment"):
        return check_key(str(plan["experiment"]))
    settings = _read(rd / "settings.json")
    if isinstance(settings, dict):  # RunSettings: the analysis settings are under `analysis`
        settings = settings.get("analysis", settings)
    if isinstance(settings, dict) and settings.get("baseline"):
        arms = [str(settings["baseline"]), *sorted(str(c) for c in settings.get("candidates", []))]
        return "ingest." + safe_key("-vs-".join(arms))
    raise InputError(
        f"{rd} has neither plan.json nor settings.json, so its experiment is unknown; give a "
        "directory written by `matrixrun run` or `matrixrun ingest`, or pass --experiment"
    )


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not readable JSON; was it edited by hand?") from exc


def render_report(run_dir: str | Path) -> Path:
    """Analyse the run directory and write its report.md (what `matrixrun report RUN_DIR`
    does): the one place `post` calls the report renderer."""
    rd = RunDir(run_dir)
    if not rd.results_file.exists():
        raise InputError(
            f"{rd.path} has no results.jsonl and no report.md; give a directory written by "
            "`matrixrun run` or `matrixrun ingest`"
        )
    # imported here, not at the top: analysis pulls in scipy (~2 s), which posting a report
    # that is already written never needs (every CI workflow step pays the startup)
    from matrixrun.run import outputs

    if not (rd.path / "verdict.json").exists():
        outputs.analyse_run(rd)
    return outputs.render_run(rd)


@dataclass(frozen=True)
class PostOutcome:
    """What `matrixrun post` did (one line to print) and the candidates that fail --fail-on."""

    message: str
    failing: list[tuple[str, str]] = field(default_factory=list)


def post(
    *,
    run_dir: str | None,
    plan: str | None,
    repo: str,
    number: int,
    history: Sequence[str] = (),
    experiment: str | None = None,
    token_env: str = "GITHUB_TOKEN",
    api_url: str | None = None,
    dry_run: bool = False,
    fail_on: str = "never",
) -> PostOutcome:
    """`matrixrun post`: the verdict of `run_dir` (rendered first when it has no report.md),
    or the proposal of the spec `plan`, as that kind's one comment on the pull request.

    Every input is checked before anything is sent, so a typo in --fail-on or --repo never
    leaves a half-done post behind; --fail-on is judged after posting, so the comment that
    explains the failure is there when the check goes red.
    """
    if (run_dir is None) == (plan is None):
        raise InputError(
            "give a run directory (to post its verdict) or --plan SPEC (to post its "
            "proposal), exactly one of them"
        )
    gate = parse_fail_on(fail_on)
    target = Target(repo, number, resolve_api_url(api_url))
    kind: Kind
    if plan is not None:
        if gate:
            raise InputError("--fail-on judges a run's verdict; it does not apply to --plan")

        kind = "proposal"
        from matrixrun.publish.proposal import render_proposal  # scipy: only for a plan

        body, _, name = render_proposal(plan, history)
        # the name of a spec that did not validate is free text: make it a key
        key = check_key(experiment) if experiment else safe_key(name)
    else:
        assert run_dir is not None
        kind = "verdict"
        if not Path(run_dir).is_dir():
            raise InputError(
                f"{run_dir} is not a directory; give a run directory written by "
                "`matrixrun run` or `matrixrun ingest`"
            )
        key = check_key(experiment) if experiment else experiment_of(run_dir)
        report = Path(run_dir) / "report.md"
        if not report.exists():
            render_report(run_dir)
        body = report.read_text(encoding="utf-8")
    if dry_run:
        message = render_dry_run(body, target, experiment=key, kind=kind, token_env=token_env)
    else:
        posted = post_comment(
            body,
            repo=target.repo,
            number=target.number,
            experiment=key,
            kind=kind,
            token_env=token_env,
            api_url=target.api_url,
        )
        message = f"{'updated' if posted.updated else 'posted'} the {kind} comment {posted.url}"
    failing = failing_candidates(run_dir, gate) if gate and run_dir is not None else []
    return PostOutcome(message, failing)
