"""The command line: `main` (commands and exit codes) and `options` (argument parsing)."""

from matrixrun.cli.main import main

__all__ = ["main"]
