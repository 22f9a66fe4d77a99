"""The exception tree. Library code raises these; only `cli/main.py` prints them and picks exit
codes.

    MatrixError                 anything matrixrun can explain in one sentence
     ├── SpecError              bad spec: carries file:line entries, exit 2
     ├── InputError             other bad input (ingest files, options, run directories), exit 2
     ├── EngineError            a server would not start, died or answered wrongly
     │    └── StartupTimeout    not healthy within startup_timeout
     └── LoadError              the load client could not measure a cell

Each message says what went wrong, where (file:line, cell id, log tail) and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass


class MatrixError(Exception):
    """Base class: `str(err)` is the one sentence the user sees."""

    exit_code = 1


class InputError(MatrixError):
    """Bad input other than a spec: an ingest file, a CLI option, a run directory."""

    exit_code = 2


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec file, located by line."""

    path: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class SpecError(MatrixError):
    """A spec that does not load or validate; `issues` lists every problem found."""

    exit_code = 2

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


class EngineError(MatrixError):
    """A server process failed: launch, health, server info, or it died mid-run."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        text = (
            message
            if not log_tail
            else f"{message}\n--- last lines of the server log ---\n{log_tail}"
        )
        super().__init__(text)


class StartupTimeout(EngineError):
    """The server did not become healthy within the spec's startup_timeout."""


class LoadError(MatrixError):
    """The load client could not measure a cell (not per-request errors, which are data)."""
