"""The deprecated import path, as in SGLang 0.5.23: a FutureWarning, then the real main."""

import sys
import warnings

from sglang.benchmark.serving import main

warnings.warn(
    "`sglang.bench_serving` is deprecated and will be removed in a future release; use "
    "`sglang.benchmark.serving` instead (e.g. `python -m sglang.benchmark.serving`).",
    FutureWarning,
    stacklevel=1,
)

if __name__ == "__main__":
    sys.exit(main())
