"""The two checks a run makes besides measuring: the hardware gate before any launch, and the
correctness gate once per server group.

Both record rather than decide the comparison: the hardware gate stops a run whose node does
not match the spec unless the user overrode it (the override is recorded and the report says
so); the correctness gate stores each group's greedy answers in `correctness/<group>.json`
and never stops the measurements (a diverging arm is marked suspect by the analysis).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from matrixrun.core import interrupt
from matrixrun.core.errors import InputError, MatrixError
from matrixrun.load.apis import Api
from matrixrun.load.vocab import IdRange
from matrixrun.plan import ServerGroup
from matrixrun.run.correctness import agreement_by_arm, collect
from matrixrun.rundir.environment import HardwareGate
from matrixrun.rundir.hardware import check_hardware
from matrixrun.rundir.results import RunDir
from matrixrun.spec import Spec


def hardware_gate(spec: Spec, ignore: bool) -> HardwareGate:
    """Compare nvidia-smi with the spec before any launch; raise InputError on a mismatch
    unless the user overrode it (`--ignore-hardware` or `engine.check_hardware: false`)."""
    check = check_hardware(spec)
    overridden = not check.ok and (ignore or not spec.engine.check_hardware)
    if not check.ok and not overridden:
        raise InputError(check.message)
    return HardwareGate(**check.model_dump(), overridden=overridden)


def correctness_done(spec: Spec, run_dir: RunDir, group: ServerGroup) -> bool:
    """Whether the gate has nothing to do for `group`: disabled, or answered (in this session
    or before a resume)."""
    return not spec.correctness.enabled or (run_dir.path / _answers_name(group)).exists()


def _answers_name(group: ServerGroup) -> str:
    return f"correctness/{group.group_id}.json"


def correctness_gate(
    spec: Spec,
    run_dir: RunDir,
    group: ServerGroup,
    base_url: str,
    api: Api,
    api_key: SecretStr | None,
    timeout_s: float,
    tokenizer: str | None = None,
    ids: IdRange | None = None,
) -> str | None:
    """Collect the group's greedy answers to the fixed prompts into correctness/<group>.json
    (`timeout_s` per request, in the server's time; prompts as text of the same token count
    when `tokenizer` is given). A failure to collect is recorded as the record's error: a gate
    that could not run must not read as a pass, nor stop the run. Returns that error (None
    when every prompt was answered), so the measurer can tell a gate the server died in."""
    record: dict[str, Any] = {
        "arm": group.arm,
        "slice": group.slice,
        "answers": None,
        "error": None,
    }
    try:
        record["answers"] = interrupt.run(
            collect(
                base_url,
                api,
                spec.correctness,
                group.model.path,
                api_key=api_key,
                timeout_s=timeout_s,
                tokenizer=tokenizer,
                strict_openai=spec.engine.strict_openai,
                ids=ids or IdRange(),
            )
        )
    except MatrixError as exc:
        record["error"] = str(exc)
    run_dir.write_json(_answers_name(group), record)
    error: str | None = record["error"]
    return error


def gate_outcome(run_dir: RunDir, baseline: str) -> tuple[dict[str, float], dict[str, str]]:
    """The gates' outcome so far, from correctness/: each candidate's agreement with the
    baseline, and each arm whose gate could not collect its answers with why (said as a
    failure in the Checks line, never a quiet "not checked")."""
    answers = [
        json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((run_dir.path / "correctness").glob("*.json"))
    ]
    agreement = {
        arm: float(entry["agreement"]) for arm, entry in agreement_by_arm(answers, baseline).items()
    }
    errors = {str(a["arm"]): str(a["error"]) for a in answers if a.get("error")}
    return agreement, errors
