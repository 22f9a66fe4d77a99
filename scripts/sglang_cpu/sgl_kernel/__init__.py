"""A stand-in for `sgl_kernel`, for running the real SGLang on a CPU-only test machine.

The released `sgl_kernel` is CUDA-only (its library needs libcuda.so.1) and PyPI has no CPU
build, yet SGLang's CPU engine imports a few `*_cpu` names from it at module import time. This
package, placed first on the server's PYTHONPATH (`spec/sglang_cpu.yaml`'s `engine.env`), answers
every name it is asked for with a function that raises when called. On a machine without
AMX/AVX-512 SGLang falls back to torch code (`--attention-backend torch_native`,
`--sampling-backend pytorch`), so none is called; if a new SGLang release starts calling one,
the call fails loudly with its name, and every name asked for is logged to stderr (the server's
log) so a test can list them (tests/test_sglang_real.py).

Nothing here is SGLang's code; it is the smallest thing that lets the unpatched package import.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

__version__ = "0.0.0+matrixrun-cpu-stand-in"

#: The line prefix a test greps the server log for.
ASKED = "sgl_kernel stand-in: asked for"
CALLED = "sgl_kernel stand-in: CALLED"


def _stand_in(name: str) -> Callable[..., NoReturn]:
    def fail(*args: object, **kwargs: object) -> NoReturn:
        print(f"{CALLED} {name}", file=sys.stderr, flush=True)
        raise RuntimeError(
            f"sgl_kernel.{name} was called, but this is matrixrun's CPU stand-in for the "
            "CUDA-only kernel package: this SGLang release needs a kernel the CPU test setup "
            "cannot provide (scripts/sglang_cpu/)"
        )

    fail.__name__ = name
    return fail


def __getattr__(name: str) -> Callable[..., NoReturn]:
    if name.startswith("__"):
        raise AttributeError(name)
    print(f"{ASKED} {name}", file=sys.stderr, flush=True)
    return _stand_in(name)
