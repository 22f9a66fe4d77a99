"""Format versions of the run directory's model files (settings.json, verdict.json): one
check, so an older file is refused with the same sentence wherever it is read."""

from __future__ import annotations

from typing import Any

from matrixrun.core.errors import InputError


def check_schema_version(data: Any, current: int, path: Any, remedy: str) -> None:
    """Refuse a run-directory file of another format version in one sentence: what, where, and
    the command that writes it anew. Files from before versions were recorded have none."""
    found = data.get("schema_version") if isinstance(data, dict) else None
    if found == current:
        return
    written = (
        "was written before matrixrun recorded format versions"
        if found is None
        else f"has format version {found!r}"
    )
    raise InputError(
        f"{path} {written}; this matrixrun reads version {current}: `{remedy}` writes it anew"
    )
