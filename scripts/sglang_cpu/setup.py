"""Set up a real SGLang on a CPU-only machine for tests/test_sglang_real.py (`nox -s sglang-real`).

    python scripts/sglang_cpu/setup.py [--version 0.5.23]   # prints the environment, as JSON

What it takes is in ../shared/sglang-cpu/NOTES.md; this script does each step, idempotently:

1. SGLang itself, unpatched, in its own venv, cached between runs on one machine and keyed on
   the version: `$MATRIXRUN_SGLANG_VENV`, else `~/.cache/matrixrun/sglang-VERSION` (~11 GB,
   about 9 minutes the first time). A marker written after the install succeeds tells a
   finished venv from one a killed install left half-made, which is made again.
2. The stand-in for the CUDA-only `sgl_kernel` (scripts/sglang_cpu/sgl_kernel/) copied to
   ROOT/stub, which the spec puts first on the server's PYTHONPATH.
3. Two tiny random Llamas with locally trained tokenizers (make_model.py, run by the SGLang
   venv's python): ROOT/tiny-llama (32,000 tokens) and ROOT/tiny-llama-2k (2,048 tokens).

ROOT is /tmp/matrixrun-sglang-cpu: a fixed path, because the committed spec
(spec/sglang_cpu.yaml) names it. A failed step exits non-zero with the step's output: CI
requires these tests, so a broken install must fail it rather than skip.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = Path("/tmp/matrixrun-sglang-cpu")
VERSION = "0.5.23"
MODELS = {"tiny-llama": 32000, "tiny-llama-2k": 2048}
DONE = ".matrixrun-complete"


def venv_dir(version: str) -> Path:
    given = os.environ.get("MATRIXRUN_SGLANG_VENV")
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "matrixrun" / f"sglang-{version}"


def _run(argv: list[str], what: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        sys.exit(f"sglang-cpu setup: {what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def ensure_sglang(version: str) -> Path:
    """The venv's python, installing SGLang `version` into it unless a finished install is there."""
    where = venv_dir(version)
    python = where / "bin" / "python"
    if (where / DONE).exists() and python.exists():
        return python
    print(f"sglang-cpu setup: installing sglang=={version} into {where} (~9 min, ~11 GB)",
          file=sys.stderr, flush=True)  # fmt: skip
    if where.exists():
        shutil.rmtree(where)
    venv.create(where, with_pip=True)
    _run([str(python), "-m", "pip", "install", "--quiet", f"sglang=={version}"],
         f"pip install sglang=={version}")  # fmt: skip
    (where / DONE).write_text(version + "\n")
    return python


def ensure_stub() -> Path:
    stub = ROOT / "stub"
    target = stub / "sgl_kernel"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "sgl_kernel" / "__init__.py", target / "__init__.py")
    return stub


def ensure_models(python: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for name, vocab in MODELS.items():
        out = ROOT / name
        marker = out / DONE
        if not marker.exists():
            made = _run([str(python), str(HERE / "make_model.py"), str(out), "--vocab", str(vocab)],
                        f"making the tiny model {out}")  # fmt: skip
            marker.write_text(made)
        sizes[name] = json.loads(marker.read_text())["vocab_size"]
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=VERSION)
    args = parser.parse_args()
    python = ensure_sglang(args.version)
    stub = ensure_stub()
    sizes = ensure_models(python)
    print(json.dumps({"python": str(python), "root": str(ROOT), "stub": str(stub),
                      "version": args.version, "vocab_sizes": sizes}))  # fmt: skip


if __name__ == "__main__":
    main()
