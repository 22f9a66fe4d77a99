"""Where a sweep point lies: its value on the main axis and the series it belongs to. A
primitive of the analysis (any step may ask, as it may `stats` and `samples`), kept apart from
`axis`, which judges along the axis: the comparison of a cell needs its x, and asking it there
must not enter the axis step before the cells are compared.

`SeriesKey` is a typed key, not a string to decode: points with the same coordinates off the
axis lie on one series, compared by their canonical form (`plan.series_key`, so the analysis
groups points exactly as the plan groups its cells, and a point read back from results.jsonl
falls on the series of the same point in memory), while `fixed` keeps the coordinates
themselves for verdict.json (`Series.fixed`, `ArmCapacity.series`). Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from matrixrun.plan import numeric_x, series_key


def x_of(point: dict[str, Any], axis: str) -> float | None:
    """The point's value on the main axis, when it is a finite number."""
    return numeric_x(point.get(axis))


@dataclass(frozen=True)
class SeriesKey:
    """The series a point lies on: its coordinates other than the axis (`fixed`, by name in
    sorted order), equal and hashed by their canonical form (`canonical`)."""

    canonical: str
    fixed: dict[str, Any] = field(compare=False, hash=False)

    @classmethod
    def of(cls, point: dict[str, Any], axis: str) -> SeriesKey:
        return cls(
            canonical=series_key(point, axis),
            fixed={k: point[k] for k in sorted(point) if k != axis},
        )
