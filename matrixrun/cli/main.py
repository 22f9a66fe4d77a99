"""The command line: the only place that turns a library error into a message and an exit code.

Every command is a function taking parsed arguments and returning an exit code, one module per
command under `cli/commands/`. `COMMANDS` below is the one place that names them, as
"module:function" strings: building the parser (`--version`, `--help`, every start) imports
only argparse and `cli/options.py`, and a command's module, with everything it imports at its
top, is imported by importlib when that command runs. Library errors (`MatrixError`
subclasses) become one message and an exit code here and nowhere else: 0 ok, 1 ran but cells
failed (or a check failed), 2 bad input, 130 interrupted (cli/exits.py).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys
from collections.abc import Callable
from typing import NamedTuple, cast

import matrixrun.cli.options as options
from matrixrun import __version__
from matrixrun.cli.exits import EXIT_FAILED, EXIT_INPUT, EXIT_INTERRUPTED, print_spec_issues, say
from matrixrun.core.errors import MatrixError, SpecError

Handler = Callable[[argparse.Namespace], int]


class Command(NamedTuple):
    """One `matrixrun` command: its one-line help, its options, and where its function is."""

    help: str
    add_options: Callable[[argparse.ArgumentParser], None]
    #: "module:function", imported only when the command runs.
    target: str


_C = "matrixrun.cli.commands"

COMMANDS: dict[str, Command] = {
    "validate": Command(
        "check spec files (exit 2 on any error)",
        options.add_validate,
        f"{_C}.validate:cmd_validate",
    ),
    "plan": Command(
        "show the server groups, cells and cost of a spec",
        options.add_plan,
        f"{_C}.plan:cmd_plan",
    ),
    "schema": Command(
        "write the spec's JSON Schema to spec/schema.json",
        options.add_schema,
        f"{_C}.schema:cmd_schema",
    ),
    "run": Command(
        "launch, measure, verify, analyse and report a spec",
        options.add_run,
        f"{_C}.run:cmd_run",
    ),
    "analyse": Command(
        "judge a run directory's results by its settings: write verdict.json",
        options.add_analyse,
        f"{_C}.report:cmd_analyse",
    ),
    "report": Command(
        "render an analysed run directory's verdict document",
        options.add_report,
        f"{_C}.report:cmd_report",
    ),
    "compare": Command(
        "the verdict document for two runs of one experiment, arms matched by name",
        options.add_compare,
        f"{_C}.ingest:cmd_compare",
    ),
    "ingest": Command(
        options.ingest_description(),
        options.add_ingest,
        f"{_C}.ingest:cmd_ingest",
    ),
    "post": Command(
        "post a run's verdict, or a spec's proposal, on a pull request (one comment each, "
        "updated in place)",
        options.add_post,
        f"{_C}.post:cmd_post",
    ),
    "history": Command(
        "earlier runs in the results store: by engine, model, hardware, flag, arm; an arm "
        "across engine versions; --check for a regression (exit 1)",
        options.add_history_command,
        f"{_C}.history:cmd_history",
    ),
    "store": Command(
        "the results store: rebuild it from run directories, or show its status",
        options.add_store_command,
        f"{_C}.store:cmd_store",
    ),
    "bench-client": Command(
        "measure a running server with the built-in client; print JSON",
        options.add_bench_client,
        f"{_C}.bench_client:cmd_bench_client",
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
    for name, command in COMMANDS.items():
        p = sub.add_parser(
            name, help=command.help, description=command.help, aliases=ALIASES.get(name, [])
        )
        command.add_options(p)
        p.set_defaults(target=command.target)
    return parser


def handler(target: str) -> Handler:
    """The function a "module:function" target names, its module imported now: the one
    place a command's code is imported (see the module's docstring)."""
    module, _, name = target.partition(":")
    return cast(Handler, getattr(importlib.import_module(module), name))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(handler(args.target)(args))
    except KeyboardInterrupt as exc:
        say(interrupted_sentence(getattr(exc, "run_dir", None), getattr(args, "spec", None)))
        return EXIT_INTERRUPTED
    except SpecError as exc:
        print_spec_issues(exc)
        return exc.exit_code
    except MatrixError as exc:
        say(str(exc))
        return exc.exit_code
    except BrokenPipeError:  # `matrixrun plan | head`: the reader left; say nothing
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except OSError as exc:
        say(os_error_sentence(exc))
        return EXIT_FAILED if exc.errno in _ENVIRONMENT_ERRNOS else EXIT_INPUT
    except UnicodeError as exc:
        reason = getattr(exc, "reason", "") or str(exc)
        say(
            f"text that is not valid UTF-8 ({exc.__class__.__name__}: {reason}); files "
            "matrixrun reads must be UTF-8 and strings may not hold lone surrogates"
        )
        return EXIT_INPUT
    except RecursionError:
        say("input nested too deeply to process; flatten it (a spec nests about 6 deep)")
        return EXIT_INPUT


def interrupted_sentence(run_dir: str | None, spec: str | None) -> str:
    """Ctrl-C's one line: where everything measured so far is kept, and how to go on."""
    if run_dir is None:
        return "interrupted; everything measured so far is kept in the run directory"
    resume = f"; continue with `matrixrun run {spec} --resume {run_dir}`" if spec else ""
    return f"interrupted; everything measured so far is kept in {run_dir}{resume}"


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


if __name__ == "__main__":
    raise SystemExit(main())
