"""The command line: the only module that prints or exits.

Every command is a function taking parsed arguments and returning an exit code; library errors
(`MatrixError` subclasses) are turned into one message and an exit code here and nowhere else:
0 ok, 1 ran but cells failed (or a check failed), 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matrixrun.cli.options as options
from matrixrun import __version__
from matrixrun.core.errors import MatrixError, SpecError
from matrixrun.core.redact import redact_file, redact_json, redact_text

from . import history as store_cli

if TYPE_CHECKING:
    from matrixrun.plan import Plan
    from matrixrun.rundir.jobs import JobRecord
    from matrixrun.spec import Spec

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

Handler = Callable[[argparse.Namespace], int]


def _err(text: str) -> None:
    print(f"matrixrun: {text}", file=sys.stderr)


# ---------------------------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace) -> int:
    from matrixrun.flags import check_file
    from matrixrun.plan import expand
    from matrixrun.report.wording.counts import plural
    from matrixrun.spec import load_spec

    bad = 0
    for path in args.specs:
        try:
            spec = load_spec(path)
        except SpecError as exc:
            bad += 1
            _print_spec_issues(exc)
            continue
        flags = check_file(spec, path)
        for issue in flags.warnings:
            print(str(issue), file=sys.stderr)
        if flags.errors:
            bad += 1
            print("\n".join(map(str, flags.errors)), file=sys.stderr)
            print(f"{path}: {flags.summary}", file=sys.stderr)
            continue
        plan = expand(spec)
        print(
            f"{path}: ok ({plural(len(spec.arms), 'arm')}, {plural(len(plan.slices), 'slice')}, "
            f"{plural(plan.cost.cells, 'cell')}, {plural(plan.cost.launches, 'launch', 'launches')}"
            f"); {flags.summary}"
        )
    return EXIT_INPUT if bad else EXIT_OK


# -------------------------------------------------------------------------------------- plan


def cmd_plan(args: argparse.Namespace) -> int:
    from matrixrun.plan import expand
    from matrixrun.plan.render import plan_text
    from matrixrun.spec import load_spec, spec_hash

    if args.markdown:
        return _plan_markdown(args)
    from matrixrun.flags import require_valid_flags

    spec = load_spec(args.spec)
    require_valid_flags(spec, args.spec)  # validate's flag check: a plan of a launch that fails
    plan = expand(spec, spec_hash(Path(args.spec).read_text()))
    if args.json:
        print(json.dumps(redact_json(plan.model_dump(mode="json")), indent=2))
    else:
        from matrixrun.report.wording.history import plan_noise_note
        from matrixrun.store.prior import plan_noise

        noise = plan_noise(spec, plan)
        note = plan_noise_note(spec.engine.kind, noise)
        print(redact_text(plan_text(spec, plan, noise.history, note)))
        if (warning := _margin_warning(spec, plan)) is not None:
            print(warning)
    _summary(_plan_summary(args.spec, args.history or ()))
    return EXIT_OK


def _margin_warning(spec: Spec, plan: Plan) -> str | None:
    """Before the run: can the margin be reached at all with the declared noise and
    max_runs? If even the narrowest interval the run can end with is wider than the margin,
    no cell can be called same, and only changes well beyond it better or worse."""
    import math

    from matrixrun.rundir.settings import analysis_settings
    from matrixrun.verify.chance import narrowest_half_width, runs_for_half_width

    v = spec.verify
    if v.noise is None or v.max_runs < 1:
        return None
    level = analysis_settings(spec, plan).level
    margin = math.log1p(v.threshold)
    half = narrowest_half_width(v.noise, v.max_runs, level)
    if half < margin:
        return None
    need = runs_for_half_width(v.noise, margin, level)
    return (
        f"warning: with the declared noise (verify.noise {100 * v.noise:g}%) and verify.max_runs "
        f"{v.max_runs}, a cell's interval cannot get narrower than ±{100 * math.expm1(half):.1f}% "
        f"— wider than the ±{100 * v.threshold:g}% margin — so no cell can be called same, and "
        f"only changes beyond about ±{100 * math.expm1(margin + half):.0f}% better or worse; "
        f"raise verify.max_runs to {need} or more, widen verify.threshold, or lower the noise"
    )


def _plan_markdown(args: argparse.Namespace) -> int:
    """The proposal (proposal.py); an invalid spec still gets one, showing its errors, exit 2."""
    from matrixrun.publish.proposal import render_proposal

    text, validation, _ = render_proposal(args.spec, args.history or ())
    sys.stdout.write(text)
    _summary(text)
    for error in validation.errors:
        print(error, file=sys.stderr)
    return EXIT_OK if validation.ok else EXIT_INPUT


def _plan_summary(spec: str, history: Sequence[str]) -> str | None:
    """The proposal for the job summary, only when there is one to write to."""
    import os

    if not os.environ.get("GITHUB_STEP_SUMMARY"):
        return None
    from matrixrun.publish.proposal import render_proposal

    return render_proposal(spec, history)[0]


def _summary(markdown: str | None) -> None:
    """Append to GitHub Actions' job summary when GITHUB_STEP_SUMMARY is set (ci.py)."""
    from matrixrun.publish.ci import write_step_summary

    if markdown is not None and (warning := write_step_summary(markdown)):
        _err(f"warning: {warning}")


# ------------------------------------------------------------------------------------ schema


def cmd_schema(args: argparse.Namespace) -> int:
    from matrixrun.spec import schema_text

    out = Path(args.out)
    text = schema_text()
    if args.check:
        current = out.read_text() if out.exists() else ""
        if current != text:
            _err(f"{out} is stale; run `matrixrun schema` (or `nox -s schema`) and commit it")
            return EXIT_FAILED
        print(f"{out}: up to date")
        return EXIT_OK
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return EXIT_OK


# --------------------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> int:
    from matrixrun.report.wording.counts import plural
    from matrixrun.run.executors import make_executor, refuse_local_resume
    from matrixrun.run.experiment import run_experiment
    from matrixrun.run.progress import observer_for

    if args.retry_failed and not args.resume:
        _err("--retry-failed measures again the failed cells of a run: give --resume RUN_DIR")
        return EXIT_INPUT
    executor = None
    if args.executor != "local" or args.partition or args.max_parallel or args.slurm_arg:
        executor = make_executor(
            args.executor,
            args.spec,
            partition=args.partition,
            max_parallel=args.max_parallel,
            slurm_args=args.slurm_arg or (),
            ignore_hardware=args.ignore_hardware,
            on_interrupt=_ask_cancel_jobs,
        )
    elif args.resume:
        refuse_local_resume(args.resume)
    if args.rehearse:
        _before_rehearsal(args.spec)
    summary = run_experiment(
        args.spec,
        out=args.out,
        resume=args.resume,
        rehearse=args.rehearse,
        observer=observer_for(),
        ignore_hardware=args.ignore_hardware,
        executor=executor,
        retry_failed=args.retry_failed,
    )
    for note in [*summary.notes, _record(summary.run_dir, before=summary.store_error)]:
        if note:
            _err(note)
    print(f"run directory: {summary.run_dir}")
    print(
        f"measured {summary.measured} (skipped {plural(summary.skipped, 'cell')} already "
        f"measured), failed measurements in the run: {summary.failed}"
    )
    if summary.report is not None:
        target = _publish(summary.report, args)
        print(f"report: {target}")
        _summary(summary.report.read_text(encoding="utf-8"))
    for sentence in summary.over_failure_rate:
        _err(sentence)
    return EXIT_FAILED if summary.failed or summary.over_failure_rate else EXIT_OK


def _before_rehearsal(spec_path: str) -> None:
    """What the rehearsal runs on, how long it takes, and each candidate the profile cannot
    tell from the baseline, said before the first launch (the same lines as `plan`)."""
    from matrixrun.plan import expand
    from matrixrun.plan.render import rehearsal_lines
    from matrixrun.spec import load_spec

    spec = load_spec(spec_path)
    for line in rehearsal_lines(spec, expand(spec)):
        _err(line)


def _ask_cancel_jobs(jobs: Sequence[JobRecord]) -> bool:
    """Ctrl-C during `run --executor slurm`: cancel the jobs still queued or running, or leave
    them? Without a terminal to ask, they are left running (and the message says so)."""
    ids = " ".join(j.job_id for j in jobs)
    if not sys.stdin.isatty():
        _err(f"interrupted; no terminal to ask, so Slurm jobs {ids} are left running")
        return False
    try:
        answer = input(
            f"\ncancel the {len(jobs)} Slurm jobs still queued or running ({ids})? [y/N] "
        )
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


def _publish(report: Path, args: argparse.Namespace) -> Path:
    """Copy the report to reports/<spec stem>.md, a rehearsal's to runs/<stem>.rehearsal.md
    (or --report). A rehearsal is a try-out: written where git ignores it, it never dirties
    the committed example reports (`nox -s reports` regenerates those)."""
    if args.report:
        target = Path(args.report)
    elif args.rehearse:
        target = Path("runs") / f"{Path(args.spec).stem}.rehearsal.md"
    else:
        target = Path("reports") / f"{Path(args.spec).stem}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(redact_text(report.read_text(encoding="utf-8")), encoding="utf-8")
    return target


# ------------------------------------------------------------------------------------ report


def cmd_analyse(args: argparse.Namespace) -> int:
    from matrixrun.run.outputs import analyse_run

    print(f"wrote {analyse_run(args.run_dir)}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from matrixrun.publish.ci import parse_fail_on
    from matrixrun.run.outputs import render_run, report_text

    parse_fail_on(args.fail_on)  # a misspelt gate is refused before anything is written

    if args.output == "-":
        text = redact_text(report_text(args.run_dir, templates=args.templates))
        sys.stdout.write(text)
    else:
        path = redact_file(render_run(args.run_dir, args.output, templates=args.templates))
        text = path.read_text(encoding="utf-8")
        print(f"wrote {path}")
    _summary(text)
    return _gate(args.run_dir, args.fail_on)


def _gate(run_dir: str, fail_on: str) -> int:
    """--fail-on: exit 1 when a candidate's overall verdict is one of those named, so CI can
    stop on it (the same verdict list as `post --fail-on`)."""
    from matrixrun.publish.ci import failing_candidates, parse_fail_on

    failing = failing_candidates(run_dir, parse_fail_on(fail_on))
    for cand, why in failing:
        _err(f"--fail-on {fail_on}: {cand} is {why}")
    return EXIT_FAILED if failing else EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    import shlex

    from matrixrun.ingest.compare import compare_runs
    from matrixrun.publish.ci import parse_fail_on

    parse_fail_on(args.fail_on)  # a misspelt gate is refused before anything is written
    out = compare_runs(
        args.run_a,
        args.run_b,
        args.out,
        labels=(args.labels[0], args.labels[1]) if args.labels else None,
        command=shlex.join(["matrixrun", *sys.argv[1:]]),
    )
    print(f"wrote {out} and its report {out / 'report.md'}")
    _record(out, show=True)
    return _gate(str(out), args.fail_on)


# ------------------------------------------------------------------------------------ ingest


def cmd_ingest(args: argparse.Namespace) -> int:
    from matrixrun.ingest.command import ingest

    out = ingest(
        args.files,
        baseline=args.baseline,
        out=args.out,
        threshold=args.threshold,
        noise=args.noise,
        arm_field=args.arm_field,
        axis_field=args.axis_field,
        point_fields=args.point_field or [],
        fresh_server=args.fresh_server,
        server_mode=args.servers,
        argv=sys.argv,
        format=args.format,
        mix_formats=args.mix_formats,
        sweep_serve=args.sweep_serve,
        metrics=args.metrics,
        allow_differences=args.allow_difference or [],
        dry_run=args.dry_run,
        show=print,
    )
    if out is None:
        print("dry run: nothing written")
        return EXIT_OK
    print(f"wrote {out} and its report {out / 'report.md'}")
    _record(out, show=True)
    return EXIT_OK


def _record(run_dir: Path, show: bool = False, before: Exception | None = None) -> str | None:
    """Index a finished run directory in the results store (`store.record_run`: never
    raises). One sentence when the store failed, here or already when the run asked it for
    a prior (`before`): printed, or returned."""
    from matrixrun.report.wording.history import store_failed
    from matrixrun.store.record import record_run

    failed = record_run(run_dir)
    note = store_failed(str(run_dir), before, failed) if (failed or before) else None
    if note and show:
        _err(note)
    return note


# -------------------------------------------------------------------------------------- post


def cmd_post(args: argparse.Namespace) -> int:
    """The verdict of RUN_DIR, or with --plan the proposal of SPEC, as one PR comment each."""
    from matrixrun.publish.ci import post

    outcome = post(
        run_dir=args.run_dir,
        plan=args.plan,
        history=args.history or (),
        repo=args.repo,
        number=args.pr,
        experiment=args.experiment,
        token_env=args.token_env,
        api_url=args.api_url,
        dry_run=args.dry_run,
        fail_on=args.fail_on,
    )
    print(outcome.message)
    if outcome.failing:
        which = ", ".join(f"{c} is {v}" for c, v in outcome.failing)
        _err(f"--fail-on {args.fail_on}: {which} (see the verdict comment)")
        return EXIT_FAILED
    return EXIT_OK


# ------------------------------------------------------------------------------ bench-client


def cmd_bench_client(args: argparse.Namespace) -> int:
    from matrixrun.load.command import client_warning, failure_summary
    from matrixrun.load.command import run as run_bench_client

    out = run_bench_client(args)
    print(json.dumps(out, indent=2))
    warning = client_warning(out)
    if warning:
        print(warning, file=sys.stderr)
    failures = failure_summary(out)
    if failures:
        _err(failures)
        return EXIT_FAILED
    return EXIT_OK


# ----------------------------------------------------------------------------------- parser


COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {
    "validate": ("check spec files (exit 2 on any error)", options.add_validate, cmd_validate),
    "plan": ("show the server groups, cells and cost of a spec", options.add_plan, cmd_plan),
    "schema": ("write the spec's JSON Schema to spec/schema.json", options.add_schema, cmd_schema),
    "run": ("launch, measure, verify, analyse and report a spec", options.add_run, cmd_run),
    "analyse": (
        "judge a run directory's results by its settings: write verdict.json",
        options.add_analyse,
        cmd_analyse,
    ),
    "report": (
        "render an analysed run directory's verdict document",
        options.add_report,
        cmd_report,
    ),
    "compare": (
        "the verdict document for two runs of one experiment, arms matched by name",
        options.add_compare,
        cmd_compare,
    ),
    "ingest": (
        "build a run directory from result files of bench_serving, vLLM, guidellm or aiperf",
        options.add_ingest,
        cmd_ingest,
    ),
    "post": (
        "post a run's verdict, or a spec's proposal, on a pull request (one comment each, "
        "updated in place)",
        options.add_post,
        cmd_post,
    ),
    "history": (
        "earlier runs in the results store: by engine, model, hardware, flag, arm; an arm "
        "across engine versions; --check for a regression (exit 1)",
        store_cli.add_history,
        store_cli.cmd_history,
    ),
    "store": (
        "the results store: rebuild it from run directories, or show its status",
        store_cli.add_store,
        store_cli.cmd_store,
    ),
    "bench-client": (
        "measure a running server with the built-in client; print JSON",
        options.add_bench_client,
        cmd_bench_client,
    ),
}


#: Other names a command answers to (American spelling).
ALIASES = {"analyse": ["analyze"]}

EPILOG = """\
exit codes: 0 ok; 1 ran, but some cells failed (or a --fail-on gate or a check failed);
2 bad input (the message says what, where and what to do); 130 interrupted (everything
measured is kept: `matrixrun run SPEC --resume RUN_DIR` continues).

Start with docs/getting-started.md; `matrixrun COMMAND --help` for one command."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="matrixrun",
        description="Compare LLM-serving configurations: spec -> plan -> run -> verdict.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"matrixrun {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add, handler) in COMMANDS.items():
        p = sub.add_parser(
            name, help=help_text, description=help_text, aliases=ALIASES.get(name, [])
        )
        add(p)
        p.set_defaults(handler=handler)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        _err("interrupted; everything measured so far is kept in the run directory")
        return EXIT_INTERRUPTED
    except SpecError as exc:
        _print_spec_issues(exc)
        return exc.exit_code
    except MatrixError as exc:
        _err(str(exc))
        return exc.exit_code
    except BrokenPipeError:  # `matrixrun plan | head`: the reader left; say nothing
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except OSError as exc:
        _err(os_error_sentence(exc))
        return EXIT_FAILED if exc.errno in _ENVIRONMENT_ERRNOS else EXIT_INPUT
    except UnicodeError as exc:
        reason = getattr(exc, "reason", "") or str(exc)
        _err(
            f"text that is not valid UTF-8 ({exc.__class__.__name__}: {reason}); files "
            "matrixrun reads must be UTF-8 and strings may not hold lone surrogates"
        )
        return EXIT_INPUT
    except RecursionError:
        _err("input nested too deeply to process; flatten it (a spec nests about 6 deep)")
        return EXIT_INPUT


#: errno values that are the machine's state, not the user's input: exit 1, not 2.
_ENVIRONMENT_ERRNOS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EIO,
    errno.EMFILE,
    errno.ENFILE,
}


def os_error_sentence(exc: OSError) -> str:
    """One sentence for a file-system error escaping a command: what, which file, what to do.
    Anything measured before it is already durable in results.jsonl (append + fsync), so a
    run that stops on a full disk continues with --resume once there is room."""
    where = f" {exc.filename}" if exc.filename else ""
    what = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        todo = (
            "free some space, then continue a run with `matrixrun run SPEC --resume RUN_DIR` "
            "(everything measured so far is kept)"
        )
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        todo = "choose a writable place (--out / -o / --report) or fix its permissions"
    elif exc.errno in (errno.EMFILE, errno.ENFILE):
        todo = "raise the open-file limit (ulimit -n) or lower the concurrency"
    elif exc.errno == errno.ENOENT:
        todo = "check the path"
    else:
        todo = "check the path and the disk"
    return f"cannot use{where}: {what}; {todo}"


def _print_spec_issues(exc: SpecError) -> None:
    """One `path:line: key: message` line per issue, unprefixed, so editors and CI annotators
    can jump to the line (the format the README promises for `validate`)."""
    for issue in exc.issues:
        print(str(issue), file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
