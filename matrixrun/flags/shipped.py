"""The flag lists shipped with matrixrun, one JSON file per released engine version.

They are what `matrixrun validate` uses where no engine is installed (the CI job that validates
specs on PRs). `scripts/flag_lists.py` writes them from the released wheels.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from matrixrun.flags.model import FlagSet

DATA_DIR = Path(__file__).parent / "data"
_NAME = re.compile(r"^(?P<engine>[a-z]+)-(?P<version>.+)\.json$")


def _key(version: str) -> tuple[tuple[int, str], ...]:
    """Version order good enough for release numbers (0.5.9 < 0.5.23 < 0.5.23.post1)."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.+-]", version) if p)


def shipped_versions(engine: str) -> list[str]:
    """Versions with a shipped list, oldest first."""
    found = [
        m.group("version")
        for p in DATA_DIR.glob(f"{engine}-*.json")
        if (m := _NAME.match(p.name)) and m.group("engine") == engine
    ]
    return sorted(found, key=_key)


@cache
def shipped(engine: str, version: str | None = None) -> FlagSet | None:
    """The list for `version` (the newest shipped when None), or None if not shipped."""
    versions = shipped_versions(engine)
    if not versions:
        return None
    chosen = version if version is not None else versions[-1]
    path = DATA_DIR / f"{engine}-{chosen}.json"
    return FlagSet.load(path) if path.exists() else None
