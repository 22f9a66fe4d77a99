"""Human units in specs: durations ("30m", "90s", "1h30m", 45) and percentages ("3%", 0.03).

Kept apart from spec/ because the CLI (`ingest --threshold 3%`) parses the same strings.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?!s))?\s*"
    r"(?:(\d+(?:\.\d+)?)s)?\s*(?:(\d+(?:\.\d+)?)ms)?\s*$"
)


def parse_duration(value: Any) -> float:
    """Seconds from a number (seconds) or a string such as "30m", "1h30m", "90s", "250ms"."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30m, 90s or 1h")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m and any(m.groups()):
            h, mi, s, ms = (float(g) if g else 0.0 for g in m.groups())
            return h * 3600 + mi * 60 + s + ms / 1000
    raise ValueError(
        f"{value!r} is not a duration; write e.g. 30m, 90s, 1h30m or a number of seconds"
    )


def parse_percent(value: Any) -> float:
    """A fraction from "3%" or a plain number below 1 ("0.03"). One rule for every key: a plain
    number of 1 or more is refused, since `10` could mean 10% or 1000% (and `1` 1% or 100%)."""
    if isinstance(value, bool):
        raise ValueError("expected a percentage such as 3%")
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1] if text.endswith("%") else text)
        except ValueError:
            raise ValueError(f"{value!r} is not a percentage; write e.g. 3% or 0.03") from None
        return _fraction(number / 100) if text.endswith("%") else _fraction(number, bare=True)
    if isinstance(value, int | float):
        return _fraction(float(value), bare=True)
    raise ValueError(f"{value!r} is not a percentage; write e.g. 3% or 0.03")


def _fraction(x: float, *, bare: bool = False) -> float:
    if math.isnan(x) or math.isinf(x):
        raise ValueError("expected a percentage such as 3%")
    if x < 0:
        raise ValueError("a percentage cannot be negative")
    if bare and x >= 1:
        raise ValueError(
            f"a plain number of 1 or more is ambiguous as a percentage: write {x:g}% or "
            f"{_decimal(x / 100)}" + (" (or 100%)" if x == 1 else "")
        )
    return x


def _decimal(fraction: float) -> str:
    """0.1 as 0.10, 0.03 as 0.03, 0.015 as 0.015: the way a fraction of a percentage reads."""
    return f"{fraction:.2f}" if round(fraction, 2) == fraction else f"{fraction:g}"


def parse_rate(value: Any) -> float:
    """Requests per second, or infinity for `inf` (all requests at once, as bench_serving)."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    raise ValueError(f"{value!r} is not a request rate; write a positive number or inf")


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": r"^\s*(\d+(\.\d+)?(h|m|s|ms)\s*)+$"},
            ],
            "description": "seconds, or e.g. 30m, 90s, 1h30m",
        }
    ),
]
Percent = Annotated[
    float,
    BeforeValidator(parse_percent),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*%\s*$"},
            ],
            "description": "e.g. 3% (or 0.03: a plain number must be below 1)",
        }
    ),
]
Rate = Annotated[
    float,
    BeforeValidator(parse_rate),
    PlainSerializer(lambda v: "inf" if math.isinf(v) else v, return_type=Any),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "enum": ["inf"]},
            ],
            "description": "requests/s, or inf",
        }
    ),
]
