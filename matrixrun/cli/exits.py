"""The exit codes every command returns, and the one way a command speaks to stderr.

Kept apart from `cli/main.py` (the dispatch) so that the command modules can use them without
importing the module that imports them: 0 ok, 1 ran but cells failed (or a check failed),
2 bad input, 130 interrupted.
"""

from __future__ import annotations

import sys

from matrixrun.core.errors import SpecError

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def say(text: str) -> None:
    """One line on stderr, prefixed `matrixrun:` (errors, warnings, notes)."""
    print(f"matrixrun: {text}", file=sys.stderr)


def print_spec_issues(exc: SpecError) -> None:
    """One `path:line: key: message` line per issue, unprefixed, so editors and CI annotators
    can jump to the line (the format the README promises for `validate`)."""
    for issue in exc.issues:
        print(str(issue), file=sys.stderr)
