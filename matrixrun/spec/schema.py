"""The JSON Schema of a spec (`matrixrun schema` writes it to spec/schema.json, for editors
and CI): pydantic's schema of `Spec`, with the shorthands the loader accepts spelled out (one
model or hardware entry or a list; an arm as plain flags or with `flags:`)."""

from __future__ import annotations

import json
from typing import Any

from matrixrun.spec.models import Spec


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec, as committed to spec/schema.json."""
    schema = Spec.model_json_schema(mode="validation")
    for key in ("model", "hardware"):  # one entry or a list of entries
        prop = schema["properties"][key]
        ref = prop["items"]
        schema["properties"][key] = {"anyOf": [ref, {**prop}], "title": prop.get("title", key)}
    arms = schema["properties"]["arms"]
    ((pattern, arm_ref),) = arms["patternProperties"].items()
    flag_value = schema["$defs"]["ArmSpec"]["properties"]["flags"]["additionalProperties"]
    arms["patternProperties"][pattern] = {
        "anyOf": [
            {
                "type": "object",
                "description": "server flags of this arm (shorthand)",
                "not": {"required": ["flags"]},
                "additionalProperties": flag_value,
            },
            {"allOf": [arm_ref, {"required": ["flags"]}]},
        ]
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://matrixrun.dev/schema/spec.json"
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=False) + "\n"
