"""Fetch the few source files of a released SGLang wheel that tests/test_sglang_schema.py reads.

    python scripts/sglang_wheel.py 0.5.23 .sglang-src     # -> .sglang-src/sglang/...

`pip download sglang==V --no-deps` (PyPI), then only these files are taken out of the wheel (a
zip): the generated JSON contract of the HTTP API, the OpenAI protocol models, the HTTP server
(its routes) and bench_serving (its argparse). Nothing is installed; the test loads the two
schema modules by path in its own environment (`nox -s sglang-schema`), where their
dependencies (msgspec; pydantic and openai) are installed. matrixrun never imports SGLang.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

FILES = (
    "sglang/api/v1/api_types.py",
    "sglang/srt/entrypoints/openai/protocol.py",
    "sglang/srt/entrypoints/http_server.py",
    "sglang/benchmark/serving.py",
)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    version, dest = argv[0], Path(argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(  # noqa: S603 - fixed argv
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary", ":all:", "--python-version", "3.11",
             "--platform", "manylinux_2_34_x86_64", "--platform", "manylinux_2_28_x86_64",
             "--dest", tmp, f"sglang=={version}"],
            check=True,
        )  # fmt: skip
        (wheel,) = Path(tmp).glob("sglang-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            for name in FILES:
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    (dest / "VERSION").write_text(f"sglang {version} ({wheel.name}, PyPI)\n")
    print(f"{dest}: {len(FILES)} files of {wheel.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
