"""Format versions of the run directory's files, and the one check of a version.

Every file of a run directory has a format version. The two model files carry theirs inside
(`schema_version` in settings.json and verdict.json: a verdict.json is rewritten by `matrixrun
analyse` on its own, so it may be newer than the rest); every other file — results.jsonl,
events.jsonl, plan.json, env.json, ingest.json, jobs.json, prior.json and the shards under
results.d/ and events.d/ — has the version recorded in the directory's format.json, written
when the directory is created. A directory without format.json was written before it existed:
its records are version 1 when its settings.json has a `schema_version`, else 0.

An older file is brought forward by `core.migrate` (pure functions, one per version step), so
a run directory any earlier matrixrun wrote still renders and analyses; only a file from a
*newer* matrixrun is refused, in one sentence (`check_newer`).
"""

from __future__ import annotations

from typing import Any

from matrixrun.core.errors import InputError

#: The versions move in step (`core.migrate`: step n takes every file from n to n + 1); 2 stores
#: the undecided outcome as `undecided`, 3 the reason of a rerun of an undecided cell too.
#: settings.json's `schema_version`.
SETTINGS_VERSION = 3
#: verdict.json's `schema_version`.
VERDICT_VERSION = 3
#: format.json's `version`: every file of the run directory without a version of its own.
RECORDS_VERSION = 3
#: The file that records RECORDS_VERSION in a run directory.
FORMAT_FILE = "format.json"


def found_version(data: Any) -> int:
    """The `schema_version` a model file carries; 0 for one written before versions were
    recorded (or for something that is not a JSON object at all: the migration refuses that
    later, with its own sentence)."""
    found = data.get("schema_version") if isinstance(data, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) else 0


def check_newer(found: int, current: int, path: Any) -> None:
    """Refuse a file written by a newer matrixrun: nothing can migrate backwards."""
    if found > current:
        raise InputError(
            f"{path} has format version {found}, newer than this matrixrun reads ({current}); "
            "upgrade matrixrun to read it"
        )
