"""Flag lists from an installed engine's `--help`, run as a subprocess and parsed.

argparse prints each option as an invocation line followed by its help:

      --tp-size TP_SIZE, --tensor-parallel-size TP_SIZE
                            The tensor parallelism size.
      --moe-runner-backend {auto,triton,flashinfer_cutlass}
      --enable-prefix-caching, --no-enable-prefix-caching
      --served-model-name SERVED_MODEL_NAME [SERVED_MODEL_NAME ...]
      --kv-offloading-size [KV_OFFLOADING_SIZE]

From that we get the option strings, whether a value follows (a metavar), several values
(`X [X ...]`), an optional one (`[X]`), the choices (`{a,b}`), a `--no-` twin
(BooleanOptionalAction) and a help text that says "deprecated". Types are not printed, so a
list from `--help` checks names, arity and choices only.
"""

from __future__ import annotations

import re
import subprocess

from matrixrun.flags.model import Flag, FlagSet, Takes

_OPTION_LINE = re.compile(r"^ {1,8}(-{1,2}[A-Za-z0-9][^\s,]*)(.*)$")
#: A help text that announces its own flag's deprecation ("Deprecated. Use ...", "(Deprecated:
#: ...)", "... is deprecated"), not one that merely mentions another deprecated option.
_DEPRECATED = re.compile(r"^\W*deprecated\b|\bis deprecated\b|\[deprecated\]", re.IGNORECASE)
_USE = re.compile(r"[Uu]se\s+[`'\"]?(--[a-z0-9][\w{},.<>=-]*)")


def parse_help(text: str, engine: str, version: str | None, origin: str) -> FlagSet:
    """Every option in an argparse help text (`-h/--help` itself excluded)."""
    flags: list[Flag] = []
    current: tuple[str, str] | None = None
    help_lines: list[str] = []

    def close() -> None:
        if current is not None:
            flag = _flag(current[0], " ".join([current[1], *help_lines]).strip())
            if flag is not None and "--help" not in flag.names:
                flags.append(flag)

    for raw in text.splitlines():
        m = _OPTION_LINE.match(raw)
        if m:
            close()
            invocation, rest = _split_invocation(raw.strip())
            current, help_lines = (invocation, rest), []
        elif current is not None and raw.strip():
            if raw.startswith(" "):
                help_lines.append(raw.strip())
            else:
                close()
                current = None
        elif not raw.strip():
            # Blank lines end an option's help (and separate argument groups).
            close()
            current = None
    close()
    return FlagSet(engine, version, origin, flags)


def _split_invocation(line: str) -> tuple[str, str]:
    """`--x X, --y X    help text` -> (invocation, help); argparse puts 2+ spaces between."""
    depth = 0
    for i, ch in enumerate(line):
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif depth == 0 and line.startswith("  ", i):
            return line[:i], line[i:].strip()
    return line, ""


def _items(invocation: str) -> list[str]:
    """Split at the commas between option strings, not those inside `{a,b}`."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(invocation):
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 0 and invocation[i + 1 : i + 3].lstrip().startswith("-"):
            out.append(invocation[start:i].strip())
            start = i + 1
    out.append(invocation[start:].strip())
    return [o for o in out if o]


def _flag(invocation: str, help_text: str) -> Flag | None:
    names: list[str] = []
    metavar = ""
    for item in _items(invocation):
        name, _, rest = item.partition(" ")
        if not name.startswith("-"):
            continue
        name = name.split("=", 1)[0]
        names.append(name)
        metavar = metavar or rest.strip()
    if not names:
        return None
    negatable = False
    positives = [n for n in names if not n.startswith("--no-")]
    negatives = [n for n in names if n.startswith("--no-")]
    if negatives and positives and all("--" + n[5:] in positives for n in negatives):
        names, negatable = positives, True
    takes: Takes
    choices: tuple[str, ...] | None = None
    if not metavar:
        takes = "none"
    elif re.fullmatch(r"\[[^\]]*\]", metavar) and "..." not in metavar:
        takes = "optional"
    elif "..." in metavar:
        takes = "many"
    else:
        takes = "one"
    m = re.search(r"\{([^{}]*)\}", metavar)
    if m and takes != "none":
        choices = tuple(c.strip() for c in m.group(1).split(",") if c.strip())
    deprecated = None
    if _DEPRECATED.search(help_text):
        use = _USE.search(help_text)
        deprecated = (
            f"use {use.group(1).rstrip('.,')} instead" if use else " ".join(help_text.split())
        )
    return Flag(
        names=tuple(names),
        takes=takes,
        type=None,
        choices=choices,
        negatable=negatable,
        deprecated=deprecated,
    )


def run_help(argv: list[str], timeout: float = 180.0) -> str:
    """The help text an engine prints (no shell; stdin closed). Raises OSError or
    subprocess.SubprocessError when it cannot be run or fails."""
    done = subprocess.run(  # noqa: S603 - argv list from the spec or the engine default
        argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0 or "--" not in done.stdout:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise subprocess.SubprocessError(
            f"exited {done.returncode}" + (f": {' / '.join(tail)}" if tail else "")
        )
    return done.stdout
