"""Developer and CI entry points. `nox -l` lists them.

nox -s matrix -- spec/glm5_cutedsl.yaml --rehearse   # the main job, on the simulator
nox -s tests                                          # the test suite, ~10 min (CI runs it)
nox -s e2e                                            # the long end-to-end tests (CI too)
"""

from __future__ import annotations

import json
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
#: The SGLang release whose own schema the request bodies are checked against (the newest).
SGLANG = "0.5.23"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite: every module, the simulator as a real subprocess, the plot extra so
    chart.png is drawn and checked (tests/test_chart_png.py); the tests marked `slow` (whole
    rehearsals, workflows, a wheel install: about half the time of all) are `e2e`'s."""
    session.install("-e", ".[test,fast,slurm,plot]")
    session.run("pytest", *(session.posargs or ["-q", "-m", "not slow"]))


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """The long end-to-end tests (`@pytest.mark.slow`): whole rehearsals through the CLI,
    resume and interrupt, bisection, the GitHub workflows, the built wheel. CI runs them
    beside `tests`; together they are the whole suite (`pytest` alone runs both)."""
    session.install("-e", ".[test,fast,slurm,plot]")
    session.run("pytest", *(session.posargs or ["-q", "-m", "slow"]))


@nox.session(name="sglang-schema", python=PYTHON)
def sglang_schema(session: nox.Session) -> None:
    """Request bodies and simulator answers against the real SGLang wheel's own schema.

    A test-only environment: the wheel (--no-deps) gives four source files, msgspec and openai
    what its schema modules import (tests/test_sglang_schema.py); matrixrun never imports it.
    """
    session.install("-e", ".[test,fast]", "msgspec", "openai")
    src = Path(session.create_tmp()) / f"sglang-{SGLANG}"
    session.run("python", "scripts/sglang_wheel.py", SGLANG, str(src))
    session.run(
        "pytest", "-q", "tests/test_sglang_schema.py", env={"MATRIXRUN_SGLANG_SRC": str(src)}
    )


@nox.session(name="sglang-real", python=PYTHON)
def sglang_real(session: nox.Session) -> None:
    """Real SGLang servers, launched by matrixrun, on a CPU (tests/test_sglang_real.py).

    scripts/sglang_cpu/setup.py installs SGLang into its own venv, cached per version
    (~/.cache/matrixrun/sglang-VERSION: ~9 min and ~11 GB the first time), writes the stand-in
    for the CUDA-only sgl_kernel and builds tiny random models under /tmp/matrixrun-sglang-cpu;
    the tests then require them (MATRIXRUN_SGLANG_REAL=require): a failed install fails here.
    `-- -k NAME` picks tests. On a GPU node: docs/gpu-node.md, "Checking a new SGLang release".
    """
    session.install("-e", ".[test,fast]")
    out = session.run(
        "python", "scripts/sglang_cpu/setup.py", "--version", SGLANG, silent=True, log=False
    )
    env = json.loads(str(out).strip().splitlines()[-1])
    session.log(f"SGLang {env['version']}: {env['python']}; models: {env['vocab_sizes']}")
    session.run(
        "pytest", "-q", "tests/test_sglang_real.py", *session.posargs,
        env={"MATRIXRUN_SGLANG_PYTHON": env["python"], "MATRIXRUN_SGLANG_REAL": "require",
             "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) and mypy --strict."""
    session.install("-e", ".[lint,test,fast,slurm]")
    paths = ["matrixrun", "tests", "benchmarks", "scripts", "noxfile.py"]
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)
    session.run("mypy", "matrixrun")


@nox.session(python=PYTHON)
def schema(session: nox.Session) -> None:
    """Regenerate spec/schema.json from the spec models."""
    session.install("-e", ".")
    session.run("matrixrun", "schema", "--out", "spec/schema.json")


@nox.session(python=PYTHON)
def validate(session: nox.Session) -> None:
    """Validate every spec in spec/ and check the committed schema is current."""
    session.install("-e", ".")
    specs = sorted(str(p) for p in Path("spec").glob("*.yaml"))
    session.run("matrixrun", "validate", *specs)
    session.run("matrixrun", "schema", "--check", "--out", "spec/schema.json")


@nox.session(python=PYTHON)
def matrix(session: nox.Session) -> None:
    """Run an experiment: nox -s matrix -- SPEC [--rehearse] [--out DIR] [--resume DIR]."""
    if not session.posargs:
        session.error("give a spec: nox -s matrix -- spec/glm5_cutedsl.yaml --rehearse")
    session.install("-e", ".[fast]")
    session.run("matrixrun", "run", *session.posargs)


@nox.session(name="flag-lists", python=PYTHON)
def flag_lists(session: nox.Session) -> None:
    """Flag lists of released engines (needs PyPI): `nox -s flag-lists -- --check sglang vllm`
    fails when a newer release has no shipped list; `nox -s flag-lists -- sglang vllm` writes
    the newest ones into matrixrun/flags/data/ (commit them)."""
    session.install("-e", ".")
    session.run(
        "python", "scripts/flag_lists.py", *(session.posargs or ["--check", "sglang", "vllm"])
    )


@nox.session(name="bench-verdicts", python=PYTHON)
def bench_verdicts(session: nox.Session) -> None:
    """Score the verify policy on simulated matrices against 1 run and fixed 3 runs per cell;
    writes the table into docs/benchmarks.md (nox -s bench-verdicts -- --matrices 1000)."""
    session.install("-e", ".")
    session.run(
        "python", "benchmarks/verdicts.py", "--write", "docs/benchmarks.md", *session.posargs
    )


@nox.session(python=PYTHON)
def reports(session: nox.Session) -> None:
    """Re-analyse and re-render the committed example reports (reports/*.md, and chart.png
    beside each run) from their run directories under reports/runs/, and re-render every other
    run directory's report.md from its committed verdict.json; `-- --check` only says which
    are stale."""
    session.install("-e", ".[plot]")
    session.run("python", "scripts/example_reports.py", *session.posargs)


@nox.session(name="bench-client", python=PYTHON)
def bench_client(session: nox.Session) -> None:
    """The load client's self-check against a ground-truth server, quiet / CPU shared /
    squeezed (nox -s bench-client -- --write docs/benchmarks.md)."""
    session.install("-e", ".[fast]")
    session.run("python", "benchmarks/client.py", *session.posargs)


@nox.session(python=PYTHON)
def soak(session: nox.Session) -> None:
    """A small matrix run many times under random faults (server crash, hang, 5xx, malformed
    SSE, never healthy, SIGKILL, Ctrl-C, torn write, full disk), checking that nothing is lost
    or duplicated, no process is left and every failure is in the report; writes the counts
    into docs/reliability.md (nox -s soak -- --runs 100 --seed 2). Minutes, not in CI."""
    session.install("-e", ".[fast]")
    session.run(
        "python", "benchmarks/faults.py", "--write", "docs/reliability.md", *session.posargs
    )
