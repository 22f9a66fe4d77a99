"""chart.png in the run directory: the primary metric per arm against the sweep axis on a log
scale, with a legend, and the change per point with its interval and the ±margin below it.

Why a picture as well as the Mermaid charts: GitHub's xychart has neither a legend nor a log
axis, and a file can be attached to a PR or a slide. matplotlib is an optional extra
(`pip install matrixrun[plot]`); without it nothing is written and nothing fails. Reads the
typed `Verdict` only; the words of its titles come from `wording.decision`.
"""

from __future__ import annotations

from pathlib import Path

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import Verdict
from matrixrun.report import decision, fmt
from matrixrun.report.wording import decision as words

CHART_FILE = "chart.png"


def write_chart(verdict: Verdict, path: Path) -> Path | None:
    """Write the chart of the first series of each candidate (primary metric) to `path`;
    None when matplotlib is absent or there is nothing to draw (fewer than two points)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    s = verdict.settings
    series = []
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = decision.primary_result(cand.metrics, s.primary)
            if mr is not None and mr.series:
                cells = [
                    c
                    for c in mr.series[0].cells
                    if c.x is not None
                    and c.x > 0
                    and (c.baseline.mean or 0) > 0
                    and (c.candidate.mean or 0) > 0
                ]
                if len(cells) >= 2:
                    series.append((sl.slice, cand.candidate, cells))
    if not series:
        return None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    drawn_baseline: set[str] = set()
    for slice_name, candidate, cells in series:
        xs = [c.x for c in cells]
        tag = f" [{slice_name}]" if slice_name else ""
        if slice_name not in drawn_baseline:
            drawn_baseline.add(slice_name)
            top.plot(
                xs, [c.baseline.mean for c in cells], "o-", label=f"{s.baseline} (baseline){tag}"
            )
        top.plot(xs, [c.candidate.mean for c in cells], "s-", label=f"{candidate}{tag}")
        ch = [100 * (c.change or 0.0) for c in cells]
        lo = [
            100
            * ((c.change or 0.0) - (c.change_lo if c.change_lo is not None else c.change or 0.0))
            for c in cells
        ]
        hi = [
            100
            * ((c.change_hi if c.change_hi is not None else c.change or 0.0) - (c.change or 0.0))
            for c in cells
        ]
        bottom.errorbar(xs, ch, yerr=[lo, hi], fmt="o-", capsize=4, label=f"{candidate}{tag}")
    u = unit(s.primary)
    top.set_xscale("log")
    top.set_yscale("log")
    top.set_ylabel(f"{s.primary} ({u})" if u else s.primary)
    top.set_title(words.png_arms_title(s.primary))
    top.legend()
    top.grid(True, which="both", alpha=0.3)
    m = 100 * s.margin
    bottom.axhspan(-m, m, color="grey", alpha=0.2, label=f"±{fmt.setting_percent(s.margin)} margin")
    bottom.axhline(0, color="black", linewidth=0.8)
    bottom.set_xscale("log")
    bottom.set_xlabel(f"{s.axis} (log scale)")
    bottom.set_ylabel("change vs baseline (%)")
    intervals = any(c.change_lo is not None for _, _, cells in series for c in cells)
    bottom.set_title(words.png_change_title(f"±{fmt.setting_percent(s.margin)}", intervals))
    bottom.legend()
    bottom.grid(True, which="both", alpha=0.3)
    ticks = sorted({c.x for _, _, cells in series for c in cells if c.x is not None})
    bottom.set_xticks(ticks, [fmt.x(t) for t in ticks])
    bottom.minorticks_off()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
