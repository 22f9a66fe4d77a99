"""The prefix cache beside the numbers: per arm and load, the share of prompt tokens the
server found cached (SGLang's `cached_tokens`, summed by the load client over a cell's
requests), from results.jsonl. Shown only when a server reported it and some cell found
anything cached, so random-prompt runs (0% everywhere) stay quiet but a reuse workload
says how much of its prompt work the cache saved — the number that explains a scheduling
policy's advantage. Template: `templates/sections/cache.md.j2`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrixrun.core.measurement import Measurement
from matrixrun.report import fmt
from matrixrun.report.section import Section


@dataclass(frozen=True)
class CacheCell:
    """One arm at one load: prompt tokens found cached over its successful runs."""

    arm: str
    x: object
    cached: int
    prompt: int
    runs: int

    @property
    def rate(self) -> float:
        return self.cached / self.prompt if self.prompt else 0.0


def cells_of(measurements: Sequence[Measurement], axis: str) -> list[CacheCell]:
    """Per (slice, arm, point), the cached and prompt tokens of its runs that reported them."""
    out: dict[tuple[str, str, str], CacheCell] = {}
    for m in measurements:
        met = m.metrics
        if not m.ok or met is None or met.total_cached_tokens is None:
            continue
        key = (m.slice, m.arm, m.point_id)
        was = out.get(key) or CacheCell(m.arm, m.point.get(axis), 0, 0, 0)
        out[key] = CacheCell(
            m.arm,
            was.x,
            was.cached + met.total_cached_tokens,
            was.prompt + met.total_input_tokens,
            was.runs + 1,
        )
    return list(out.values())


def _order(c: CacheCell) -> tuple[bool, float]:
    return (not isinstance(c.x, int | float), float(c.x) if isinstance(c.x, int | float) else 0.0)


# ------------------------------------------------------------------------------ words


def line(arm: str, cells: Sequence[CacheCell], axis: str) -> str:
    parts = [f"{fmt.x(c.x)}: {fmt.share(c.rate)}" for c in cells]
    return f"`{arm}` ({axis}): " + ", ".join(parts)


@dataclass
class CacheView:
    lines: list[str]
    note: str


def of(measurements: Sequence[Measurement], axis: str) -> CacheView | None:
    cells = cells_of(measurements, axis)
    if not cells or not any(c.cached for c in cells):
        return None
    arms = list(dict.fromkeys(c.arm for c in cells))
    lines = []
    for arm in arms:
        mine = sorted((c for c in cells if c.arm == arm), key=_order)
        lines.append(line(arm, mine, axis))
    total = sum(c.cached for c in cells)
    note = (
        f"Share of prompt tokens the server's prefix cache held (SGLang's `cached_tokens`; "
        f"{fmt.value(total)} tokens in all), over each cell's runs; the cache is emptied "
        "before every cell (`engine.flush_cache`) and kept through it."
    )
    return CacheView(lines=lines, note=note)


#: Below the results table (the comparison's partial includes it).
SECTION = Section(
    "cache", None, lambda inputs: of(inputs.measurements, inputs.verdict.settings.axis)
)
