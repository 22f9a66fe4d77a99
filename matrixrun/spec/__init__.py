"""The experiment spec: models (`models.py`; the engine block in `engine.py`, their base in
`base.py`), the line-numbered loader (`loader.py`), checks across fields (`checks.py`), error
sentences (`messages.py`) and the JSON Schema export (`schema.py`). Import from here:
`from matrixrun.spec import Spec, load_spec, SpecError`; a file read once is a `SpecFile`
(`read_spec`)."""

from __future__ import annotations

from matrixrun.core.errors import SpecError, SpecIssue
from matrixrun.spec.base import FlagValue
from matrixrun.spec.checks import semantic_issues
from matrixrun.spec.engine import EngineSpec
from matrixrun.spec.loader import (
    SpecFile,
    load_spec,
    parse_spec,
    parse_spec_file,
    read_spec,
    spec_hash,
)
from matrixrun.spec.models import (
    CLIENT_AXES,
    ArmSpec,
    Combination,
    CorrectnessSpec,
    EstimateSpec,
    HardwareSpec,
    LimitsSpec,
    MetricsSpec,
    ModelSpec,
    RehearsalSpec,
    Slug,
    Spec,
    SweepSpec,
    VerifySpec,
    WorkloadSpec,
)
from matrixrun.spec.schema import json_schema, schema_text

__all__ = [
    "CLIENT_AXES",
    "ArmSpec",
    "Combination",
    "CorrectnessSpec",
    "EngineSpec",
    "EstimateSpec",
    "FlagValue",
    "HardwareSpec",
    "LimitsSpec",
    "MetricsSpec",
    "ModelSpec",
    "RehearsalSpec",
    "Slug",
    "Spec",
    "SpecError",
    "SpecFile",
    "SpecIssue",
    "SweepSpec",
    "VerifySpec",
    "WorkloadSpec",
    "json_schema",
    "load_spec",
    "parse_spec",
    "parse_spec_file",
    "read_spec",
    "schema_text",
    "semantic_issues",
    "spec_hash",
]
