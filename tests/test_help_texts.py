"""Flag lists read from the `--help` of released tools (issue 28): click's plain help, typer's
rich-boxed help and argparse's, from texts captured verbatim (tests/golden/help/PROVENANCE.md).

The bug: against `transformers serve --help`, `--cb-use-cuda-graph / --no-cb-use-cuda-graph`
was read as a flag that takes a value, and `cb_use_cuda_graph: true`, which the server accepts,
was refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from matrixrun.flags import check_file
from matrixrun.flags.helptext import parse_help
from matrixrun.flags.model import FlagSet
from matrixrun.spec import read_spec

HELP = Path(__file__).resolve().parent / "golden" / "help"


def flags(name: str) -> FlagSet:
    return parse_help((HELP / f"{name}.txt").read_text(), "x", None, name)


def test_click_help_of_transformers_serve() -> None:
    fs = flags("transformers-serve")
    cuda_graph = fs.lookup("--cb-use-cuda-graph")
    assert cuda_graph is not None and cuda_graph.takes == "none" and cuda_graph.negatable
    assert fs.lookup("--no-cb-use-cuda-graph") is cuda_graph
    assert fs.lookup("--continuous-batching") is not None
    port, memory = fs.lookup("--port"), fs.lookup("--cb-max-memory-percent")
    assert port is not None and (port.takes, port.type) == ("one", "int")
    assert memory is not None and memory.type == "float"
    reasoning = fs.lookup("--reasoning")
    assert reasoning is not None and reasoning.choices == ("on", "off", "auto")
    quiet = fs.lookup("--quiet")
    assert quiet is not None and quiet.takes == "none" and "-q" in quiet.names
    assert fs.lookup("--help") is None and fs.lookup("-h") is None


def test_typer_rich_boxed_help_of_fastapi_run() -> None:
    fs = flags("fastapi-run")
    assert {f.name for f in fs.flags} == {
        "--host", "--port", "--reload", "--workers", "--root-path", "--app", "--entrypoint",
        "--proxy-headers", "--forwarded-allow-ips", "--verbose",
    }  # fmt: skip
    reload = fs.lookup("--no-reload")
    assert reload is not None and reload.name == "--reload" and reload.takes == "none"
    entry = fs.lookup("-e")
    assert entry is not None and entry.name == "--entrypoint" and entry.type == "str"
    port = fs.lookup("--port")
    assert port is not None and port.type == "int"
    verbose = fs.lookup("--verbose")
    assert verbose is not None and verbose.takes == "none" and not verbose.negatable


def test_typer_boxes_other_than_options_are_not_options() -> None:
    fs = flags("typer")
    assert {f.name for f in fs.flags} == {
        "--app", "--func", "--version", "--install-completion", "--show-completion"
    }  # fmt: skip
    version = fs.lookup("--version")
    assert version is not None and version.takes == "none"


def test_click_types_booleans_and_choices_of_uvicorn() -> None:
    fs = flags("uvicorn")
    loop = fs.lookup("--loop")
    assert loop is not None and loop.choices == ("auto", "asyncio", "uvloop", "zuvloop")
    deflate = fs.lookup("--ws-per-message-deflate")
    assert deflate is not None and deflate.takes == "one" and deflate.fold_case
    assert deflate.choices is not None and "true" in deflate.choices
    colors = fs.lookup("--no-use-colors")
    assert colors is not None and colors.name == "--use-colors" and colors.takes == "none"
    delay = fs.lookup("--reload-delay")
    assert delay is not None and delay.type == "float"
    reload = fs.lookup("--reload")
    assert reload is not None and reload.takes == "none" and not reload.negatable


def test_argparse_help_of_python_calendar() -> None:
    fs = flags("python-calendar")
    kind = fs.lookup("--type")
    assert kind is not None and kind.choices == ("text", "html") and "-t" in kind.names
    width = fs.lookup("-w")
    assert width is not None and width.takes == "one" and width.type is None  # argparse: no types


def test_validate_against_the_transformers_help(tmp_path: Path) -> None:
    """End to end: a spec whose flags list is `transformers serve --help` (here the captured
    text, printed by `cat` as the engine would print it)."""
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "experiment: t\ntitle: t\nmodel: {path: /m}\nhardware: {gpu: NVIDIA H200, count: 1}\n"
        "engine: {kind: command, launch: [transformers, serve, '{model}', --port, '{port}'], "
        f'help_command: [{sys.executable}, -c, "import sys; print(open(sys.argv[1]).read())", '
        f"{HELP / 'transformers-serve.txt'}]}}\n"
        "arms:\n  off: {}\n  on: {continuous_batching: true, cb_use_cuda_graph: true}\n"
        "  bad: {cb_use_cuda_graph: 1, reasoning: maybe, cb_num_blocks: many}\n"
    )
    found = check_file(read_spec(spec))
    messages = {e.key: e.message for e in found.errors}
    assert set(messages) == {
        "arms.bad.cb_use_cuda_graph", "arms.bad.reasoning", "arms.bad.cb_num_blocks"
    }  # fmt: skip
    assert "is a switch that takes no value" in messages["arms.bad.cb_use_cuda_graph"]
    assert "'maybe' is not one of its choices" in messages["arms.bad.reasoning"]
    assert "'many' is not an integer" in messages["arms.bad.cb_num_blocks"]


@pytest.mark.parametrize("name", ["transformers-serve", "fastapi-run", "uvicorn", "typer"])
def test_no_option_of_a_real_help_is_read_as_taking_a_value_it_does_not(name: str) -> None:
    """Every `--x / --no-x` pair in the text is one switch."""
    text = (HELP / f"{name}.txt").read_text()
    fs = flags(name)
    for flag in fs.flags:
        if flag.negatable:
            assert flag.takes == "none", flag
            assert "--no-" + flag.name[2:] in text
