"""Planning: a spec expanded into server groups and cells with stable ids (`expansion`), their
cost from earlier runs (`history`), and the plan's text form (`render`). The expansion's names
are the package's interface."""

from matrixrun.core.tuning import BISECTION_RUNS
from matrixrun.plan.expansion import (
    Cell,
    Cost,
    Plan,
    ServerGroup,
    SliceInfo,
    added_cell,
    cell_id,
    estimate_cost,
    expand,
    grid_bracket,
    grid_of,
    json_point,
    numeric_x,
    point_id,
    series_key,
    series_of,
    short_hash,
    sweep_order,
)

__all__ = [
    "BISECTION_RUNS",
    "Cell",
    "Cost",
    "Plan",
    "ServerGroup",
    "SliceInfo",
    "added_cell",
    "cell_id",
    "estimate_cost",
    "expand",
    "grid_bracket",
    "grid_of",
    "json_point",
    "numeric_x",
    "point_id",
    "series_key",
    "series_of",
    "short_hash",
    "sweep_order",
]
