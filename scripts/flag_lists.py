"""Generate the shipped flag lists: `matrixrun/flags/data/<engine>-<version>.json`.

    python scripts/flag_lists.py sglang==0.5.23 vllm==0.33.0   # write those lists
    python scripts/flag_lists.py sglang vllm                   # the newest releases
    python scripts/flag_lists.py --check sglang vllm           # exit 1 if the newest is missing

For each requirement it runs `pip download --no-deps --only-binary :all:` into a temporary
directory (the wheel is a zip of the package's source files), reads the files that declare the
command line and hands their text to `matrixrun.flags.extract`, which parses them with `ast`.
Nothing of the engine is installed or imported: this runs anywhere with pip and network access
to PyPI, in a few seconds plus the download.

Release step (docs/spec.md, "Server flags"): when SGLang or vLLM publishes a release that specs
target, run this for it and commit the new JSON; `--check` is what a scheduled CI job runs to
notice a newer release than the shipped lists.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from matrixrun.flags.model import FlagSet
from matrixrun.flags.recipes import sglang_flags, vllm_flags
from matrixrun.flags.shipped import DATA_DIR, shipped_versions

#: Files (prefixes inside the wheel) each recipe reads.
WANTED = {
    "sglang": ("sglang/srt/server_args.py", "sglang/srt/arg_groups/"),
    # The serve frontend's cli_args.py has moved between releases (openai/, launchers/, common/).
    "vllm": (
        "vllm/engine/arg_utils.py",
        "vllm/config/",
        "vllm/entrypoints/",
        "vllm/v1/attention/backends/",  # the enums behind --attention-backend & co.
    ),
}
#: Within those prefixes, only these files (None: every .py file).
ONLY = {
    "vllm": (
        "arg_utils.py",
        "cli_args.py",
        "cli/serve.py",
        "vllm/config/",
        "backends/registry.py",
        "prefill/registry.py",
    )
}
RECIPES = {"sglang": sglang_flags, "vllm": vllm_flags}


def download(requirement: str, into: Path) -> Path:
    """The wheel of `requirement` (newest when no version is pinned), fetched by pip."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--python-version",
        "3.11",
        "--platform",
        "manylinux_2_28_x86_64",
        "--platform",
        "manylinux_2_34_x86_64",
        "--platform",
        "any",
        "--dest",
        str(into),
        requirement,
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)  # noqa: S603 - fixed argv
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel for {requirement} in {into}, found {wheels}")
    return wheels[0]


def flag_set(engine: str, wheel: Path) -> FlagSet:
    version = wheel.name.split("-")[1]
    files: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            only = ONLY.get(engine)
            if (
                name.endswith(".py")
                and name.startswith(WANTED[engine])
                and (only is None or any(o in name for o in only))
            ):
                files[name] = zf.read(name).decode("utf-8")
    if not files:
        raise SystemExit(f"{wheel.name} has none of {WANTED[engine]}; the layout changed")
    origin = f"{wheel.name} from PyPI, read by scripts/flag_lists.py ({len(files)} files)"
    return RECIPES[engine](files, version, origin)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("requirements", nargs="+", help="sglang[==X] or vllm[==X]")
    p.add_argument("--check", action="store_true", help="only check a list is shipped")
    p.add_argument("--out", type=Path, default=DATA_DIR, help="where the lists go")
    args = p.parse_args(argv)
    missing = 0
    for req in args.requirements:
        engine = re.split(r"[=<>!~ ]", req, maxsplit=1)[0].lower()
        if engine not in RECIPES:
            raise SystemExit(f"{req}: only {', '.join(RECIPES)} have a recipe")
        with tempfile.TemporaryDirectory() as tmp:
            wheel = download(req, Path(tmp))
            version = wheel.name.split("-")[1]
            if args.check:
                if version in shipped_versions(engine):
                    print(f"{engine} {version}: shipped")
                else:
                    missing += 1
                    print(
                        f"{engine} {version}: no shipped list; run scripts/flag_lists.py {engine}"
                    )
                continue
            flags = flag_set(engine, wheel)
        target = args.out / f"{engine}-{version}.json"
        flags.dump(target)
        print(f"wrote {target} ({len(flags.flags)} flags)")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
