"""Why a server died, from its log: the first error, not the teardown after it.

A dying SGLang prints its real cause first and its teardown last: when the scheduler hits
`IndexError: index out of range in self` (a prompt id past the vocabulary), the traceback
sits ~40 lines above the end, and the last lines are "SIGQUIT received" and
"kill_process_tree called" from the processes being torn down
(../shared/sglang-cpu/NOTES.md). A log's tail therefore names the wrong thing; this module
finds the first traceback (or the first line that reads as an error) and returns that block
short enough for an error message: the line that opened it, its innermost frame and the
exception. Pure text in, text out: the caller reads the file and redacts.
"""

from __future__ import annotations

import re

#: Lines the teardown prints after the cause: never the cause themselves.
TEARDOWN = re.compile(
    r"SIGQUIT|SIGTERM|SIGKILL|kill_process_tree|Killed|Received sig|Shutting down|"
    r"Finished server process|Waiting for application shutdown",
    re.IGNORECASE,
)
_TRACEBACK = "Traceback (most recent call last):"
#: A line that states an error by itself (a logged exception without a traceback).
_ERROR_LINE = re.compile(
    r"(^|[\s\]:])(\w+(Error|Exception)|CRITICAL|FATAL|Fatal Python error|"
    r"hit an exception|RuntimeError)\b"
)
_FRAME = re.compile(r'^\s*File "')
#: Python's warnings ("...: UserWarning: ...") name an Error-like class without being one.
_WARNING = re.compile(r"\w*Warning\b|warnings\.warn")


def _exception_after(lines: list[str], start: int) -> tuple[int, str | None]:
    """From a traceback's first line, (index of its exception line, innermost frame)."""
    frame: str | None = None
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if _FRAME.match(line):
            frame = line.strip()
            continue
        if line.startswith((" ", "\t")) or not line.strip() or set(line.strip()) <= {"^", "~"}:
            continue
        return i, frame
    return len(lines) - 1, frame


def first_error(text: str, max_lines: int = 6) -> str | None:
    """The first error block of a server log, or None when it holds none.

    A traceback gives its opening line (which names the process that failed, e.g. SGLang's
    "Scheduler hit an exception: Traceback ..."), its innermost frame and the exception with
    up to two lines of its message; a bare error line gives itself. Teardown lines and
    Python warnings are never chosen.
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if TEARDOWN.search(line):
            continue
        if _TRACEBACK in line:
            end, frame = _exception_after(lines, i)
            block = [line.strip()]
            if frame:
                block.append(frame)
            block += [s.strip() for s in lines[end : end + 2] if s.strip()]
            return "\n".join(block[:max_lines])
        if _ERROR_LINE.search(line) and not _WARNING.search(line):
            return "\n".join(s.strip() for s in lines[i : i + 2] if s.strip())[:2000]
    return None
