"""What vLLM's older `benchmarks/benchmark_serving.py --save-result` files (v0.8 era) and
the nightly-benchmark runner around them record beyond `vllm bench serve`'s layout.

Facts from files vLLM v0.8.3 wrote (the wild corpus, surajssd/llm-k8s): the result has no
`failed` count (the per-request `errors` list says which requests failed: an empty string
for a success), a `request_goodput:` key with a trailing colon (null without SLO flags), no
`e2el` statistics and no p90/p95, `max_concurrency: null` when only a request rate was set,
and `request_rate` as the string "inf" or a number. vLLM's nightly runner
(`.buildkite/nightly-benchmarks`) writes a JSON sidecar `<result>.commands` beside each
result with the `client_command` it ran and the `gpu_type` of the machine, which is the only
hardware record these files have; the command's `--dataset-name` is the only dataset record.

Unlabelled files are named by their file name, and the nightly runner puts the point into it
(`..._qps_04`, `..._qps_inf`): a file name that ends in the run's own rate or concurrency is
named without that ending, so the points of one setup are one arm; files of one name in
different folders (`02_no_IB/x.json`, `03_IB/x.json`) are then named by their folder.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run, finite

__all__ = ["OLD_TOOL", "arm_stem", "failed_from_errors", "name_arms", "sidecar"]

OLD_TOOL = (
    "vllm benchmarks/benchmark_serving.py (the v0.8 layout: 'request_goodput:', no e2el; "
    "vLLM version not recorded in the file)"
)
#: A trailing segment that names a point: `_qps_04`, `-qps4`, `_rate_2.5`, `-c16`, `_conc_8`.
_POINT_SUFFIX = re.compile(
    r"^(?P<stem>.+?)[_-]+(?:qps|rate|rps|c|conc|concurrency)[_-]?(?P<value>inf|[0-9]+(?:\.[0-9]+)?)$",
    re.IGNORECASE,
)


def failed_from_errors(data: dict[str, Any], where: str) -> int | None:
    """Failures from the per-request `errors` list (a non-empty message is a failed request)
    when the file writes no `failed` count; None when it has neither. A file whose every
    request failed is refused in its own words: there is nothing measured to compare."""
    errors = data.get("errors")
    if "failed" in data or not isinstance(errors, list):
        return None
    failed = [e for e in errors if isinstance(e, str) and e.strip()]
    if errors and len(failed) == len(errors):
        raise InputError(
            f"{where}: every request failed ({len(failed)} of {len(errors)} 'errors' are "
            f"messages, the first: {failed[0].strip()[:120]!r}): there is no measurement to "
            "compare; fix the server or the client and rerun, or leave the file out"
        )
    return len(failed)


def sidecar(path: Path) -> dict[str, str]:
    """What the nightly runner's `<result>.commands` sidecar records, as identity fields:
    `gpu_type` (the hardware) and the client command's `--dataset-name`. Empty when there is
    no sidecar; a sidecar that is not the runner's JSON is refused, naming it."""
    side = path.with_suffix(".commands")
    if not side.is_file():
        return {}
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("client_command"), str):
        raise InputError(
            f"{side}: not the nightly runner's JSON sidecar (no 'client_command'), so the "
            f"hardware of {path.name} is unknown; move the file away from it or fix it"
        )
    out: dict[str, str] = {}
    gpu = data.get("gpu_type")
    if isinstance(gpu, str) and gpu.strip():
        out["gpu"] = gpu.strip()
    dataset = _flag(data["client_command"], "--dataset-name")
    if dataset:
        out["dataset"] = dataset
    return out


def _flag(command: str, name: str) -> str | None:
    """A flag's value in a command line (`--x=v` or `--x v`), else None."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for i, word in enumerate(words):
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
        if word == name and i + 1 < len(words):
            return words[i + 1]
    return None


def arm_stem(stem: str, rate: float | None, concurrency: int | None) -> str:
    """A file name without a trailing segment that names the run's own request rate or
    concurrency (`x_qps_04` at rate 4 → `x`); any other name as it is."""
    match = _POINT_SUFFIX.fullmatch(stem)
    if match is None:
        return stem
    text = match.group("value").lower()
    value = math.inf if text == "inf" else float(text)
    if value in (rate, float(concurrency) if concurrency is not None else None):
        return match.group("stem")
    return stem


def name_arms(runs: list[Run]) -> list[Run]:
    """Runs named by their file name (`fields['arm_from'] == 'file name'`) whose names come
    from different folders are named by their folder below the folders' common parent, so
    two setups' files of one name never become repeats of one arm."""
    dirs: dict[str, set[str]] = {}
    for r in runs:
        if r.record.fields.get("arm_from") == "file name" and r.record.tag is not None:
            dirs.setdefault(r.record.tag, set()).add(str(Path(r.record.source).parent))
    out: list[Run] = []
    for r in runs:
        tag = r.record.tag
        if r.record.fields.get("arm_from") == "file name" and tag and len(dirs[tag]) > 1:
            common = os.path.commonpath(sorted(dirs[tag]))
            here = Path(r.record.source).parent
            name = here.relative_to(common).as_posix() if str(here) != common else here.name
            r = replace(r, record=r.record.model_copy(update={"tag": name}))
        out.append(r)
    return out


def rate_of(value: Any) -> float | None:
    """`request_rate` as written: a number, or "inf" (unlimited)."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    return finite(value)
