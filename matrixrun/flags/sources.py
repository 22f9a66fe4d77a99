"""Where a spec's flag list comes from, in this order:

1. `engine.help_command`: the argv that prints the engine's argparse help (any launched kind;
   the only source for `kind: command`), run and parsed.
2. `engine.version` pinned: the shipped list of that version; else an installed engine of
   exactly that version; else the flags are not checked (another version would check the wrong
   thing).
3. An installed engine, found without importing it: for SGLang, the launch prefix's python
   (`python -m sglang.launch_server`, the default) has the `sglang` distribution; for vLLM, the
   `vllm` executable of `vllm serve` is on PATH (its version is read from the metadata of the
   python its script line names). Its `--help` is run (a container prefix is never started for
   this). `MATRIXRUN_FLAGS=shipped` skips this step.
4. The newest shipped list (what a PR job without an engine uses).

`kind: openai` launches nothing, so there is nothing to check; `kind: sim` is checked as SGLang
(the simulator stands in for it). Every outcome carries one sentence for the user: what the
flags were checked against, or why they were not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import PurePath

from matrixrun.engines.sglang import DEFAULT_LAUNCH
from matrixrun.flags.helptext import parse_help, run_help
from matrixrun.flags.model import FlagSet
from matrixrun.flags.shipped import shipped, shipped_versions
from matrixrun.spec import EngineSpec

#: Run by the engine's python with the distribution name: finds the package without importing
#: it (find_spec of a top-level package executes nothing) and reads its version from metadata.
_PROBE = """
import importlib.metadata as md, importlib.util, sys
name = sys.argv[1]
if importlib.util.find_spec(name) is None:
    print("")
else:
    try:
        print(md.version(name))
    except md.PackageNotFoundError:
        print("unknown")
"""
_CONTAINER_CLIS = {"docker", "podman", "nerdctl", "apptainer", "singularity", "enroot"}


@dataclass(frozen=True)
class Source:
    """A flag list and the sentence saying what it is, or (flags None) why there is none."""

    flags: FlagSet | None
    says: str


def family(kind: str) -> str | None:
    """The flag list family of an engine kind; None where matrixrun passes no flags."""
    return {"sglang": "sglang", "vllm": "vllm", "command": "command"}.get(kind)


_cache: dict[tuple[str, ...], Source] = {}


def source_for(engine: EngineSpec, launch: list[str] | None = None) -> Source:
    """The flag list for a launch (`launch` is an arm's own prefix, else the engine's)."""
    kind = family(engine.kind)
    if kind is None:
        return Source(None, f"kind {engine.kind} launches no server, so no flags are passed")
    if engine.help_command:
        return _from_help(kind, list(engine.help_command), engine.version, "engine.help_command")
    if kind == "command":
        return Source(
            None,
            "kind command has no flag list; set engine.help_command (e.g. [llama-server, "
            "--help]) to check them against the server's own --help",
        )
    use_local = os.environ.get("MATRIXRUN_FLAGS") != "shipped"
    if engine.version is not None:
        found = shipped(kind, engine.version)
        if found is not None:
            return Source(found, f"{found.label} (shipped list, engine.version)")
        local = _local(kind, launch or engine.launch) if use_local else None
        if local is not None and local.flags is not None and local.flags.version == engine.version:
            return local
        versions = ", ".join(shipped_versions(kind)) or "none"
        installed = (
            f"no {kind} {engine.version} is installed"
            if use_local
            else "installed engines were not consulted (MATRIXRUN_FLAGS=shipped)"
        )
        return Source(
            None,
            f"no flag list is shipped for {kind} {engine.version} (shipped: {versions}) and "
            f"{installed}; generate the list with scripts/flag_lists.py or set "
            "engine.help_command",
        )
    # unpinned: the newest shipped list, so a laptop, a GPU node and the CI job that
    # validates PRs all check against the same release; an installed engine only where
    # nothing is shipped
    newest = shipped(kind)
    local = _local(kind, launch or engine.launch) if use_local else None
    if newest is None:
        if local is not None and local.flags is not None:
            return local
        return local or Source(None, f"no flag list is shipped for {kind} and none is installed")
    if local is not None and local.flags is not None and local.flags.version == newest.version:
        return local  # the target release itself, installed: its own --help
    also = ""
    if local is not None and local.flags is not None:
        also = f"; the installed one is {local.flags.version or 'of unknown version'}"
    return Source(
        newest, f"{newest.label} (newest shipped list; pin engine.version to choose{also})"
    )


def _local(kind: str, launch: list[str] | None) -> Source | None:
    """An installed engine's --help, when the launch prefix is one we can recognise."""
    if kind == "sglang":
        prefix = list(launch or DEFAULT_LAUNCH)
        if len(prefix) != 3 or prefix[1:] != ["-m", "sglang.launch_server"]:
            return None
        if PurePath(prefix[0]).name in _CONTAINER_CLIS:
            return None
        version = _probe(prefix[0], "sglang")
        if not version:
            return None
        known = None if version == "unknown" else version
        return _from_help(kind, [*prefix, "--help"], known, f"the sglang installed for {prefix[0]}")
    if kind == "vllm":
        prefix = list(launch or ["vllm", "serve"])
        if len(prefix) != 2 or prefix[1] != "serve" or PurePath(prefix[0]).name != "vllm":
            return None
        exe = shutil.which(prefix[0])
        if exe is None:
            return None
        python = _script_python(exe)
        version = _probe(python, "vllm") if python else ""
        known = version if version not in ("", "unknown") else None
        return _from_help(kind, [exe, "serve", "--help=all"], known, f"the vllm at {exe}")
    return None


def _script_python(exe: str) -> str | None:
    """The interpreter a console script's `#!` line names (pip writes one), if any."""
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    return parts[0] if parts and "python" in PurePath(parts[0]).name else None


def _probe(python: str, dist: str) -> str:
    """The version of `dist` installed for `python` ('' if none, 'unknown' if no metadata)."""
    try:
        done = subprocess.run(  # noqa: S603 - argv list, no shell
            [python, "-c", _PROBE, dist],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _from_help(kind: str, argv: list[str], version: str | None, what: str) -> Source:
    key = (kind, version or "", *argv)
    if key in _cache:
        return _cache[key]
    try:
        text = run_help(argv)
    except (OSError, subprocess.SubprocessError) as exc:
        source = Source(None, f"{what} ({' '.join(argv)}) could not be run: {exc}")
    else:
        flags = parse_help(text, kind, version, f"{' '.join(argv)}")
        label = f"{kind} {version}" if version else kind
        source = Source(flags, f"{label} --help ({what}, {len(flags.flags)} flags)")
        if not flags.flags:
            source = Source(None, f"{' '.join(argv)} printed no options that could be read")
    _cache[key] = source
    return source
