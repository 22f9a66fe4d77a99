"""chart.png in the run directory: the primary metric per arm on a log scale with a legend, and
below it the change per point as bars from zero with their intervals and the ±margin band.

Why a picture as well as the Mermaid charts: a file can be attached to a PR or a slide, and it
can draw what xychart cannot (intervals, a real log axis with its numbers). It follows the
Mermaid charts' rules (`report.sections.charts`): bars grow from zero, the change axis is cut where
`change_axis` cuts it (true values written at the cut bars), the arms are named in full in a
legend, baseline blue and candidates orange first. matplotlib is an optional extra
(`pip install matrixrun[plot]`); without it nothing is written and nothing fails. Reads the
typed `Verdict` only; the words of its titles come from `sections.charts`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import Comparison, Verdict
from matrixrun.report import fmt
from matrixrun.report.inputs import CHART_FILE
from matrixrun.report.sections import charts as words
from matrixrun.report.sections.charts import (
    BASELINE_COLOUR,
    CANDIDATE_COLOUR,
    SPAN_MARGINS,
    ZERO_COLOUR,
    change_axis,
)
from matrixrun.report.series import primary_result

__all__ = ["CHART_FILE", "figure", "write_chart"]

#: Candidates after the first (orange): colour-blind-safe hues that are neither blue nor orange.
MORE_CANDIDATES = ["#1a7f37", "#8250df", "#cf222e", "#6e7781"]


@dataclass
class _Drawn:
    slice: str
    candidate: str
    cells: list[Comparison]


def _series(verdict: Verdict) -> list[_Drawn]:
    """The first series of each candidate (primary metric) with at least two positive points."""
    s = verdict.settings
    out = []
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, s.primary)
            if mr is None or not mr.series:
                continue
            cells = [
                c
                for c in mr.series[0].cells
                if c.x is not None
                and (c.baseline.mean or 0) > 0
                and (c.candidate.mean or 0) > 0
                and c.change is not None
            ]
            if len(cells) >= 2:
                out.append(_Drawn(sl.slice, cand.candidate, cells))
    return out


def figure(verdict: Verdict) -> Any | None:
    """The chart as a matplotlib Figure (what `write_chart` saves, and what the tests read the
    drawn bars, axes and texts from); None when matplotlib is absent or there is nothing to
    draw (fewer than two points)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    drawn = _series(verdict)
    if not drawn:
        return None
    xs = sorted({c.x for d in drawn for c in d.cells if c.x is not None})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True)
    _arms(top, verdict, drawn, xs)
    _change(bottom, verdict, drawn, xs)
    bottom.set_xticks(range(len(xs)), [fmt.x(x) for x in xs])
    bottom.set_xlabel(verdict.settings.axis)
    fig.tight_layout()
    return fig


def write_chart(verdict: Verdict, path: Path) -> Path | None:
    """Write the chart to `path`; None (and no file) when `figure` gives none."""
    fig = figure(verdict)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _colour(i: int) -> str:
    return CANDIDATE_COLOUR if i == 0 else MORE_CANDIDATES[(i - 1) % len(MORE_CANDIDATES)]


def _arms(ax: Any, verdict: Verdict, drawn: list[_Drawn], xs: list[float]) -> None:
    s = verdict.settings
    at = {x: i for i, x in enumerate(xs)}
    seen: set[str] = set()
    for i, d in enumerate(drawn):
        pos = [at[c.x] for c in d.cells if c.x is not None]
        tag = f" [{d.slice}]" if d.slice else ""
        if d.slice not in seen:
            seen.add(d.slice)
            ax.plot(
                pos,
                [c.baseline.mean for c in d.cells],
                "o-",
                color=BASELINE_COLOUR,
                label=f"{s.baseline} (baseline){tag}",
            )
        ax.plot(
            pos,
            [c.candidate.mean for c in d.cells],
            "s-",
            color=_colour(i),
            label=d.candidate + tag,
        )
    u = unit(s.primary)
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    # ticks at 1, 2 and 5 of each decade, written plainly (500, not 5×10²)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel(f"{s.primary} ({u}, log scale)" if u else f"{s.primary} (log scale)")
    ax.set_title(words.png_arms_title(s.primary))
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)


def _change(ax: Any, verdict: Verdict, drawn: list[_Drawn], xs: list[float]) -> None:
    s = verdict.settings
    at = {x: i for i, x in enumerate(xs)}
    m = 100 * s.margin_for(s.primary)
    # bars cut exactly as the Mermaid chart cuts them; the view then widens to hold the
    # intervals' ends while the whole span stays within the same budget of margins
    axis = change_axis([100 * (c.change or 0.0) for d in drawn for c in d.cells], m)
    ends = [100 * v for d in drawn for c in d.cells for v in (c.change_lo, c.change_hi) if v]
    room = max(axis.hi - axis.lo, 1.16 * SPAN_MARGINS * m) - (axis.hi - axis.lo)
    below = min(max(axis.lo - min(ends, default=axis.lo), 0.0), room / 2)
    above = min(max(max(ends, default=axis.hi) - axis.hi, 0.0), room - below)
    width = 0.8 / len(drawn)
    cut_any = False
    for i, d in enumerate(drawn):
        pos = [at[c.x] - 0.4 + width * (i + 0.5) for c in d.cells if c.x is not None]
        pct = [100 * (c.change or 0.0) for c in d.cells]
        shown = [axis.clip(p) for p in pct]
        lo = [
            p - 100 * (c.change_lo if c.change_lo is not None else p / 100)
            for c, p in zip(d.cells, pct, strict=True)
        ]
        hi = [
            100 * (c.change_hi if c.change_hi is not None else p / 100) - p
            for c, p in zip(d.cells, pct, strict=True)
        ]
        # an interval around a cut bar would float away from it: only uncut bars get one
        err = [
            [math.nan if axis.cut(p) else a for p, a in zip(pct, lo, strict=True)],
            [math.nan if axis.cut(p) else b for p, b in zip(pct, hi, strict=True)],
        ]
        tag = f" [{d.slice}]" if d.slice else ""
        ax.bar(
            pos,
            shown,
            width=width * 0.9,
            color=_colour(i),
            label=d.candidate + tag,
            yerr=err,
            capsize=3,
            ecolor=ZERO_COLOUR,
        )
        for x, p, v in zip(pos, pct, shown, strict=True):
            if axis.cut(p):
                cut_any = True
                ax.annotate(
                    fmt.change(p / 100),
                    (x, v),
                    ha="center",
                    va="top" if v > 0 else "bottom",
                    fontsize=8,
                    color="white",
                    fontweight="bold",
                    xytext=(0, -3 if v > 0 else 3),
                    textcoords="offset points",
                )
    margin = fmt.margin(s.margin_for(s.primary))
    ax.axhspan(-m, m, color="grey", alpha=0.2, label=words.png_margin(margin))
    ax.axhline(0, color=ZERO_COLOUR, linewidth=0.8)
    ax.set_ylim(axis.lo - below, axis.hi + above)
    ax.set_ylabel("change vs baseline (%)")
    intervals = any(c.change_lo is not None for d in drawn for c in d.cells)
    ax.set_title(words.png_change_title(intervals, cut_any))
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
