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
(BooleanOptionalAction) and a help text that says "deprecated". argparse prints no types, so
a list from its `--help` checks names, arity and choices only.

click (and typer without rich) print `Usage:` and the value's type as the metavar:

      --continuous-batching / --no-continuous-batching
                                      Enable continuous batching ...
      --port INTEGER                  Server listen port.
      --reasoning [on|off|auto]       Reasoning mode.

`--x / --no-x` is one switch with a `--no-` twin (it takes no value); TEXT, INTEGER, FLOAT,
PATH, BOOLEAN and `[a|b]` are the type or the choices. typer with rich draws the options in a
box, one row per option, columns two or more spaces apart:

    │ --reload                   --no-reload           <bool>  Enable auto-reload ...     │
    │ --port                                           <int>   The port to serve on.     │
    │ --entrypoint           -e                        <str>   The FastAPI app import ...│

(names, the `--no-` twin or a short alias, the type in angle brackets, or TEXT/INTEGER in
older typer, `<bool>` or nothing for a switch). All three forms are tested against help texts
captured from released tools (tests/golden/help/, PROVENANCE.md).
"""

from __future__ import annotations

import re
import subprocess

from matrixrun.flags.model import Flag, FlagSet, Takes, ValueType

_OPTION_LINE = re.compile(r"^ {1,8}(-{1,2}[A-Za-z0-9][^\s,]*)(.*)$")
#: A help text that announces its own flag's deprecation ("Deprecated. Use ...", "(Deprecated:
#: ...)", "... is deprecated"), not one that merely mentions another deprecated option.
_DEPRECATED = re.compile(r"^\W*deprecated\b|\bis deprecated\b|\[deprecated\]", re.IGNORECASE)
_USE = re.compile(r"[Uu]se\s+[`'\"]?(--[a-z0-9][\w{},.<>=-]*)")


def parse_help(text: str, engine: str, version: str | None, origin: str) -> FlagSet:
    """Every option in an argparse, click or typer help text (`-h/--help` itself excluded)."""
    if any(line.lstrip().startswith(_BOX) for line in text.splitlines()):
        return FlagSet(engine, version, origin, _rich_flags(text))
    click = any(line.startswith("Usage:") for line in text.splitlines())
    flags: list[Flag] = []
    current: tuple[str, str] | None = None
    help_lines: list[str] = []

    def close() -> None:
        if current is not None:
            make = _click_flag if click else _flag
            flag = make(current[0], " ".join([current[1], *help_lines]).strip())
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


# ------------------------------------------------------------------------------ click, typer

_BOX = ("│", "┃", "╭", "╰")
#: click's and typer's type names (`click.types`' `name` upper-cased; typer >= 0.2x with rich
#: writes `<int>` etc.) -> (takes, type).
_CLICK_TYPES: dict[str, tuple[Takes, ValueType | None]] = {
    "TEXT": ("one", "str"),
    "<str>": ("one", "str"),
    "INTEGER": ("one", "int"),
    "INTEGER RANGE": ("one", "int"),
    "<int>": ("one", "int"),
    "FLOAT": ("one", "float"),
    "FLOAT RANGE": ("one", "float"),
    "<float>": ("one", "float"),
    "<bool>": ("none", None),
}
#: What click's BOOLEAN type converts (`click.types.BoolParamType`), any case.
_CLICK_BOOLEAN = ("true", "false", "1", "0", "yes", "no", "y", "n", "t", "f", "on", "off")


def _click_value(names: list[str], metavar: str, help_text: str) -> Flag:
    """A click/typer option from its names, its type column and its help."""
    negatable = False
    negatives = [n for n in names if n.startswith("--no-")]
    positives = [n for n in names if not n.startswith("--no-")]
    if negatives and positives and all("--" + n[5:] in positives for n in negatives):
        names, negatable = positives, True
    metavar = metavar.strip()
    takes: Takes = "one"
    vtype: ValueType | None = None
    choices: tuple[str, ...] | None = None
    fold = False
    if negatable or not metavar:
        takes = "none"
    elif metavar in _CLICK_TYPES:
        takes, vtype = _CLICK_TYPES[metavar]
    elif metavar.upper() in ("BOOLEAN", "<boolean>"):
        vtype, choices, fold = "str", _CLICK_BOOLEAN, True
    elif m := re.fullmatch(r"[\[<]([^\]>]*\|[^\]>]*)[\]>]", metavar):
        vtype, choices = "str", tuple(c.strip() for c in m.group(1).split("|"))
    elif metavar in ("PATH", "FILENAME", "FILE", "DIRECTORY", "<path>", "<file>"):
        vtype = "str"
    deprecated = None
    if _DEPRECATED.search(help_text):
        use = _USE.search(help_text)
        deprecated = (
            f"use {use.group(1).rstrip('.,')} instead" if use else " ".join(help_text.split())
        )
    return Flag(
        names=tuple(names),
        takes="none" if takes == "none" else takes,
        type=vtype if takes != "none" else None,
        choices=choices if takes != "none" else None,
        negatable=negatable,
        deprecated=deprecated,
        fold_case=fold,
    )


def _click_flag(invocation: str, help_text: str) -> Flag | None:
    """`--x / --no-x`, `-p, --port INTEGER`, `--loop [auto|asyncio]` (click's plain help)."""
    names: list[str] = []
    metavar = ""
    for part in re.split(r",\s+|\s+/\s+", invocation.strip()):
        name, _, rest = part.partition(" ")
        if name.startswith("-"):
            names.append(name.split("=", 1)[0])
            metavar = metavar or rest.strip()
    if not names or "--help" in names:
        return None
    return _click_value(names, metavar, help_text)


def _rich_flags(text: str) -> list[Flag]:
    """The options of typer's rich-boxed help (see the module docstring)."""
    flags: list[Flag] = []
    row: tuple[list[str], str, list[str]] | None = None

    def close() -> None:
        if row is not None and "--help" not in row[0]:
            flags.append(_click_value(row[0], row[1], " ".join(row[2])))

    in_options = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("╭", "┏")):
            close()
            row = None
            in_options = "Option" in line or "option" in line
            continue
        if line.startswith(("╰", "┗")) or not line.startswith(("│", "┃")):
            close()
            row = None
            continue
        if not in_options:
            continue
        body = line.strip("│┃").strip().lstrip("*").strip()
        cells = [c for c in re.split(r"\s{2,}", body) if c]
        if cells and cells[0].startswith("-"):
            close()
            names: list[str] = []
            while cells and re.fullmatch(r"-{1,2}[\w][\w-]*(,)?", cells[0]):
                names.append(cells.pop(0).rstrip(","))
            metavar = ""
            if cells and _is_type_cell(cells[0]):
                metavar = cells.pop(0)
            row = (names, metavar, cells)
        elif row is not None:
            row[2].extend(cells)
    close()
    return flags


def _is_type_cell(cell: str) -> bool:
    return cell in _CLICK_TYPES or bool(
        re.fullmatch(r"<[\w ]+>|[A-Z][A-Z ]*|\[[^\]]*\|[^\]]*\]", cell)
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
