"""The CLI's start is light (issue 32: `history` under a second, most of it was start-up):
building the parser imports argparse and `cli/options.py`, nothing of the pipeline, and each
command's code is imported once, by the dispatch table, when that command runs. The lists of
choices `cli/options.py` writes as plain data must equal the ones the code reads."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from typing import get_args

import pytest

from matrixrun.cli import options
from matrixrun.cli.main import COMMANDS, build_parser, handler
from matrixrun.ingest.formats.checks import IDENTITY
from matrixrun.ingest.formats.run import FORMATS
from matrixrun.ingest.formats.vllm_sweep import SweepServe
from matrixrun.run.executors import EXECUTORS

#: What building the parser may import of matrixrun.
LIGHT = {
    "matrixrun",
    "matrixrun.cli",
    "matrixrun.cli.exits",
    "matrixrun.cli.main",
    "matrixrun.cli.options",
    "matrixrun.core",
    "matrixrun.core.errors",
}
#: Third-party packages that cost tenths of a second each to import.
HEAVY = {"httpx", "pydantic", "numpy", "scipy", "sqlalchemy", "jinja2", "ruamel", "rich"}

PROBE = """
import json, sys
from matrixrun.cli.main import build_parser
build_parser().format_help()
print(json.dumps(sorted(sys.modules)))
"""


def _imported_by(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout.splitlines()[-1]))  # the last line: a command may print


def test_building_the_parser_imports_nothing_of_the_pipeline() -> None:
    loaded = _imported_by(PROBE)
    ours = {m for m in loaded if m.split(".")[0] == "matrixrun"}
    assert ours <= LIGHT, f"the parser now imports {sorted(ours - LIGHT)}"
    heavy = {m for m in loaded if m.split(".")[0] in HEAVY}
    assert not heavy, f"the parser now imports {sorted(heavy)}"


def test_version_answers_without_importing_a_command() -> None:
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "matrixrun", "--version"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert res.returncode == 0 and res.stdout.startswith("matrixrun ")
    assert "matrixrun.cli.commands" not in res.stderr and "pydantic" not in res.stderr


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_target_is_a_function_of_the_commands_package(name: str) -> None:
    target = COMMANDS[name].target
    module, _, function = target.partition(":")
    assert module.startswith("matrixrun.cli.commands."), target
    assert callable(handler(target)) and function.startswith("cmd_")
    assert importlib.import_module(module).__name__ == module


def test_each_command_runs_its_own_module_only() -> None:
    """`validate` imports its own command module and no other (the table's point)."""
    loaded = _imported_by(
        "import json, sys\n"
        "from matrixrun.cli.main import main\n"
        "main(['validate', 'spec/glm5_cutedsl.yaml'])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    commands = {m for m in loaded if m.startswith("matrixrun.cli.commands.")}
    assert commands == {"matrixrun.cli.commands.validate"}


def test_the_options_data_equals_what_the_code_reads() -> None:
    assert tuple(options.INGEST_FORMATS) == FORMATS
    assert set(options.INGEST_REFUSED) <= set(FORMATS)
    assert options.IDENTITY_FIELDS == IDENTITY
    assert get_args(SweepServe) == options.SWEEP_SERVE
    assert tuple(EXECUTORS) == options.EXECUTORS


def test_every_command_parses_its_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(COMMANDS) <= set(sub.choices)
    for name in COMMANDS:
        assert sub.choices[name].format_help().startswith(f"usage: matrixrun {name}")
