"""`matrixrun schema`: write the spec's JSON Schema (spec/schema.json), or with --check say
whether the committed one is stale (exit 1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from matrixrun.cli.exits import EXIT_FAILED, EXIT_OK, say
from matrixrun.spec import schema_text


def cmd_schema(args: argparse.Namespace) -> int:
    out = Path(args.out)
    text = schema_text()
    if args.check:
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if current != text:
            say(f"{out} is stale; run `matrixrun schema` (or `nox -s schema`) and commit it")
            return EXIT_FAILED
        print(f"{out}: up to date")
        return EXIT_OK
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return EXIT_OK
