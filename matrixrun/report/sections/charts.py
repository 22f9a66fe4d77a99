"""The document's Mermaid charts as plain data for `templates/sections/charts.md.j2`: per
(candidate, series), the change at each point and the primary metric per arm, drawn by GitHub's
`xychart-beta`.

Why the shapes are what they are (each was checked in real Mermaid, tests/test_charts_render.py):

- xychart grows every bar from the bottom of the plot, not from zero. The change is therefore
  drawn as bar series on top of each other: the candidate's colour up to max(change, 0), then
  the chart's background colour up to min(change, 0) (twice: a second coat hides the
  anti-aliased edge of the first), which leaves exactly the span between zero and the change
  coloured; a zero line is drawn over it. The background is set by the
  chart itself (`init`), so the mask matches it in GitHub's light and dark themes alike.
- A linear axis that holds one +1,598% bar flattens the ±margin lines into one: the axis spans
  at most `SPAN_MARGINS` margins and a bar past it is cut at the edge, its value written on its
  x label and in the legend line (`change_axis`).
- xychart's number grammar has no exponent (`1.007e+04` does not parse): `mermaid_number`.
- xychart has no legend GitHub shows and cuts a long title at the chart's edge: titles stay
  short and the arm names go in a Markdown line under the chart (`legend`), in full.
- A chart of lines only puts its last point at the right edge, where a long x label is cut:
  the per-arm chart carries an empty bar series (at the axis minimum, background colour).
- Throughput from 10 to 1,581 tok/s on a linear axis squashes the low end: the per-arm chart
  draws log10 of the metric when it spans `LOG_RATIO` or more, and says so on the axis.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import Comparison, Series, Verdict
from matrixrun.report import fmt
from matrixrun.report.inputs import CHART_FILE, RunInputs
from matrixrun.report.section import Section, Trim
from matrixrun.report.series import primary_result, varying_keys

#: Charts beyond this many (candidate, series) pairs are left to the tables: a page of
#: charts is read less than one.
MAX_CHARTS = 4

#: The change axis spans at most this many margins (both sides together), so the ±margin band
#: is at least 1/20 of the plot's height (about 17 px of GitHub's 500 px chart) however large
#: the largest change; bars past it are cut and labelled.
SPAN_MARGINS = 40

#: The per-arm chart switches to a log10 axis when its largest value is this many times its
#: smallest: below that a linear axis from zero reads directly.
LOG_RATIO = 10.0

#: Colours, chosen for GitHub: blue and orange (told apart with every common colour-vision
#: deficiency), each with a contrast of at least 3:1 against both GitHub's light page (#ffffff)
#: and its dark one (#0d1117), so a line stays visible even where a viewer drops the chart's
#: own white background. Text is GitHub's light-theme foreground on that background.
#: The chart's width: Mermaid's default, widened so that each x label (about 8 px a character
#: at its 14 px font, plus a gap) fits in its category, up to what still reads scaled down.
MIN_WIDTH, MAX_WIDTH, LABEL_PX_PER_CHAR, LABEL_GAP_PX, AXIS_PX = 700, 1400, 8.0, 28.0, 110.0

BASELINE_COLOUR = "#0969da"
CANDIDATE_COLOUR = "#bc4c00"
MARGIN_COLOUR = "#6e7781"
ZERO_COLOUR = "#1f2328"
BACKGROUND = "#ffffff"
TEXT_COLOUR = "#1f2328"


@dataclass
class Chart:
    """One `xychart-beta`: categorical x (the sweep values), bars and/or lines, an explicit y
    range, the colours of its plots in order (bars first, then lines) and the Markdown line
    under it that names what each colour is."""

    title: str
    x_label: str
    x_values: list[str]
    y_label: str
    y_range: tuple[str, str]
    palette: list[str]
    legend: str
    bars: list[list[str]] = field(default_factory=list)
    lines: list[list[str]] = field(default_factory=list)

    @property
    def width(self) -> int:
        """Mermaid's 700 px, or wider when the x labels would touch: GitHub scales the SVG
        down to its column, so a wide chart shrinks instead of overlapping its labels."""
        longest = max((len(x) for x in self.x_values), default=1)
        wanted = AXIS_PX + len(self.x_values) * (longest * LABEL_PX_PER_CHAR + LABEL_GAP_PX)
        return max(MIN_WIDTH, min(MAX_WIDTH, round(wanted)))

    @property
    def init(self) -> str:
        """The `%%{init: …}%%` directive's JSON: every colour the chart shows, so GitHub's
        theme (light or dark) changes none of them."""
        axis = {
            f"{a}Axis{part}Color": TEXT_COLOUR if part != "Line" else MARGIN_COLOUR
            for a in ("x", "y")
            for part in ("Label", "Title", "Tick", "Line")
        }
        theme = {
            "backgroundColor": BACKGROUND,
            "titleColor": TEXT_COLOUR,
            **axis,
            "plotColorPalette": ", ".join(self.palette),
        }
        return json.dumps(
            {"xyChart": {"width": self.width}, "themeVariables": {"xyChart": theme}},
            separators=(", ", ": "),
        )


def mermaid_number(v: float) -> str:
    """4 significant digits as a plain decimal: xychart's grammar is `[+-]?(\\d+(\\.\\d+)?|
    \\.\\d+)`, so `1.007e+04` (what `.4g` gives at 10,000) is a parse error on GitHub."""
    if not math.isfinite(v):
        raise ValueError(f"a chart value must be finite, got {v}")
    text = format(Decimal(f"{v:.4g}"), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


@dataclass(frozen=True)
class ChangeAxis:
    """The change chart's y range (in %) and where its bars are cut (the axis edges)."""

    lo: float
    hi: float
    cut_lo: float
    cut_hi: float

    def clip(self, pct: float) -> float:
        return min(max(pct, self.cut_lo), self.cut_hi)

    def cut(self, pct: float) -> bool:
        return pct < self.cut_lo or pct > self.cut_hi


def change_axis(changes_pct: Sequence[float], margin_pct: float) -> ChangeAxis:
    """The y range that shows every change from zero and keeps the ±margin band visible: when
    the changes span more than `SPAN_MARGINS` margins, the smaller side is kept whole if it
    fits in half of that and the larger side gets the rest (else each gets half). Shared with
    chart.png, which cuts its bars the same way."""
    neg = max(0.0, -min(changes_pct, default=0.0))
    pos = max(0.0, max(changes_pct, default=0.0))
    budget = SPAN_MARGINS * margin_pct if margin_pct > 0 else math.inf
    if neg + pos <= budget:
        keep_neg, keep_pos = neg, pos
    elif min(neg, pos) <= budget / 2:
        keep_neg, keep_pos = (neg, budget - neg) if neg <= pos else (budget - pos, pos)
    else:
        keep_neg = keep_pos = budget / 2
    lo, hi = -max(keep_neg, margin_pct), max(keep_pos, margin_pct)
    if hi - lo <= 0:  # no margin and no change: any visible span
        lo, hi = -1.0, 1.0
    pad = 0.08 * (hi - lo)
    return ChangeAxis(lo=lo - pad, hi=hi + pad, cut_lo=-keep_neg, cut_hi=keep_pos)


def _decade(k: int) -> str:
    """10^k as people write it: 1,000 / 0.01."""
    return f"{10**k:,}" if k >= 0 else format(Decimal(1).scaleb(k), "f")


def _points(series: Series) -> list[Comparison]:
    return [c for c in series.cells if c.x is not None]


def change_chart(
    series: Series,
    metric: str,
    candidate: str,
    baseline: str,
    axis: str,
    margin: float,
    where: str = "",
) -> Chart | None:
    """Change (%) per point as bars from zero, the ±margin and zero as lines. None when a point
    lacks a change (a chart with holes misleads) or there are fewer than two points."""
    cells = _points(series)
    if len(cells) < 2 or any(c.change is None for c in cells):
        return None
    pct = [100 * (c.change or 0.0) for c in cells]
    m = 100 * margin
    ax = change_axis(pct, m)
    drawn = [ax.clip(p) for p in pct]
    cut = [(fmt.x(c.x), fmt.change(p / 100)) for c, p in zip(cells, pct, strict=True) if ax.cut(p)]
    bracket = (
        [(fmt.x(c.x_lo), fmt.x(c.x_hi)) for c in series.crossovers]
        if not series.non_monotone
        else []
    )
    labels = [
        cut_label(fmt.x(c.x), fmt.change(p / 100)) if ax.cut(p) else fmt.x(c.x)
        for c, p in zip(cells, pct, strict=True)
    ]
    n = len(cells)
    return Chart(
        title=fmt.user_plain(change_title(metric)),
        x_label=fmt.user_plain(axis),
        x_values=[fmt.user_plain(v) for v in labels],
        y_label=change_axis_label(),
        y_range=(mermaid_number(ax.lo), mermaid_number(ax.hi)),
        palette=[
            CANDIDATE_COLOUR,
            BACKGROUND,
            BACKGROUND,
            ZERO_COLOUR,
            MARGIN_COLOUR,
            MARGIN_COLOUR,
        ],
        legend=change_legend(
            candidate=fmt.user_plain(candidate),
            baseline=fmt.user_plain(baseline),
            margin=fmt.margin(margin),
            axis=fmt.user_plain(axis),
            bracket=bracket,
            cut=cut,
            where=fmt.user_plain(where),
        ),
        bars=[
            [mermaid_number(max(d, 0.0)) for d in drawn],
            *[[mermaid_number(min(d, 0.0)) for d in drawn]] * 2,
        ],
        lines=[["0"] * n, [mermaid_number(m)] * n, [mermaid_number(-m)] * n],
    )


def arms_chart(
    series: Series, metric: str, baseline: str, candidate: str, axis: str, where: str = ""
) -> Chart | None:
    """The primary metric per arm (geometric means), one line each, on a log10 axis when the
    values span `LOG_RATIO` or more (labelled), else linear from zero."""
    cells = _points(series)
    if len(cells) < 2 or any(c.baseline.mean is None or c.candidate.mean is None for c in cells):
        return None
    base = [c.baseline.mean or 0.0 for c in cells]
    cand = [c.candidate.mean or 0.0 for c in cells]
    values = base + cand
    u = unit(metric)
    log = min(values) > 0 and max(values) >= LOG_RATIO * min(values)
    if log:
        lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
        hi = max(hi, lo + 1)
        rows = [[mermaid_number(math.log10(v)) for v in arm] for arm in (base, cand)]
        y_range = (str(lo), str(hi))
        decades = [(k, _decade(k)) for k in range(lo, hi + 1)]
    else:
        top = max(max(values), 0.0) * 1.08 or 1.0
        low = min(min(values) * 1.08, 0.0)
        rows = [[mermaid_number(v) for v in arm] for arm in (base, cand)]
        y_range = (mermaid_number(low), mermaid_number(top))
        decades = []
    return Chart(
        title=fmt.user_plain(arms_title(metric)),
        x_label=fmt.user_plain(axis),
        x_values=[fmt.x(c.x) for c in cells],
        y_label=fmt.user_plain(arms_axis_label(u or metric, decades[-1] if decades else None)),
        y_range=y_range,
        palette=[BACKGROUND, BASELINE_COLOUR, CANDIDATE_COLOUR],
        legend=arms_legend(
            baseline=fmt.user_plain(baseline),
            candidate=fmt.user_plain(candidate),
            unit=u or metric,
            decades=decades,
            where=fmt.user_plain(where),
        ),
        # a bar series at the axis minimum, in the background colour, draws nothing but
        # gives the categories the bars' padding: without it the last x label runs off
        bars=[[y_range[0]] * len(cells)],
        lines=rows,
    )


def picture_line(run_dir: str, name: str, link_base: str = ".") -> str:
    """The line that links RUN_DIR/chart.png: shown as `run_dir` names the directory, linked
    relative to the document (`link_base`: "." from RUN_DIR/report.md, `runs/x` from
    reports/x.md), so the link works wherever the directory and its report are copied."""
    shown = f"{run_dir}/{name}"
    link = name if link_base in ("", ".") else f"{link_base}/{name}"
    if any(c in link for c in " ()<>"):
        link = f"<{link.replace('<', '%3C').replace('>', '%3E')}>"
    return picture(link, fmt.user_plain(shown))


def charts_of(verdict: Verdict) -> list[Chart]:
    """The change and per-arm charts of the primary metric, for the first `MAX_CHARTS`
    (candidate, series) pairs that have any."""
    s = verdict.settings
    out: list[Chart] = []
    pairs = 0
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, s.primary)
            if mr is None:
                continue
            varying = varying_keys(mr.series)
            for series in mr.series:
                if pairs >= MAX_CHARTS:
                    return out
                fixed = " · ".join(
                    f"{k} {v}" for k, v in sorted(series.fixed.items()) if k in varying
                )
                where = " · ".join(x for x in (sl.slice, fixed) if x)
                found = [
                    change_chart(
                        series,
                        s.primary,
                        cand.candidate,
                        s.baseline,
                        s.axis,
                        s.margin_for(s.primary),
                        where,
                    ),
                    arms_chart(series, s.primary, s.baseline, cand.candidate, s.axis, where),
                ]
                if any(found):
                    pairs += 1
                out += [c for c in found if c is not None]
    return out


# ------------------------------------------------------------------------------ words
#
# Short titles that fit in the chart's width, axis labels that say when an axis is log or cut,
# and the Markdown line under each chart that names every colour (xychart shows no legend on
# GitHub); chart.png (`report.chart_png`) uses the same.


def change_title(metric: str) -> str:
    return f"{metric}: change vs baseline"


def change_axis_label() -> str:
    return "change (%)"


def cut_label(x: str, change: str) -> str:
    """The x label of a bar cut at the axis edge: its true value beside it."""
    return f"{x} ({change})"


def _where(where: str) -> str:
    return f" ({where})" if where else ""


def change_legend(
    *,
    candidate: str,
    baseline: str,
    margin: str,
    axis: str,
    bracket: Sequence[tuple[str, str]],
    cut: Sequence[tuple[str, str]],
    where: str = "",
) -> str:
    """What the change chart's colours are, and anything the picture does not show itself."""
    m = margin.lstrip("±")
    text = (
        f"🟧 Orange bars: `{candidate}` against `{baseline}`{_where(where)}, the change at each "
        f"{axis} (candidate / baseline − 1), drawn from the dark zero line. Grey lines: +{m} "
        f"and −{m}, the practical margin; a bar inside them counts as the same."
    )
    if bracket:
        spans = "; ".join(f"{lo} and {hi}" for lo, hi in bracket)
        text += f" The advice changes between {axis} {spans}."
    if cut:
        points = ", ".join(f"{x}: {c}" for x, c in cut)
        text += (
            f" Cut at the axis edge so the margin stays visible (true value on the label): "
            f"{points}."
        )
    return text


def arms_title(metric: str) -> str:
    return f"{metric} per arm"


def arms_axis_label(unit: str, top_decade: tuple[int, str] | None) -> str:
    """The per-arm y axis; a log one says what its top whole decade stands for."""
    if top_decade is None:
        return unit
    k, value = top_decade
    return f"log10 {unit} ({k} = {value})"


def arms_legend(
    *,
    baseline: str,
    candidate: str,
    unit: str,
    decades: Sequence[tuple[int, str]],
    where: str = "",
) -> str:
    """Which line is which arm, and how to read a log axis."""
    text = (
        f"🟦 Blue line: `{baseline}` (baseline); 🟧 orange line: `{candidate}`{_where(where)}; "
        "geometric means over runs."
    )
    if decades:
        marks = ", ".join(f"{k} = {d}" for k, d in decades)
        text += (
            f" Log scale: the axis shows log10 of {unit} ({marks} {unit}), so equal heights "
            "are equal ratios."
        )
    return text


def picture(link: str, shown: str) -> str:
    return (
        f"The same charts as a picture, with each change's interval and a real log axis: "
        f"[`{shown}`]({link})."
    )


def png_arms_title(metric: str) -> str:
    return f"{metric} per arm (geometric mean over runs; log scale)"


def png_change_title(intervals: bool, cut: bool) -> str:
    """Two short lines at most: a title wider than the figure is cut."""
    text = "change vs baseline " + ("with its interval" if intervals else "(no noise estimate)")
    if cut:
        text += "\nbars past the axis edge are cut; their true value is written on them"
    return text


def png_margin(margin: str) -> str:
    return f"{margin} margin (inside: the same)"


# ------------------------------------------------------------------------------ the section


@dataclass
class Charts:
    """The primary metric's Mermaid charts, and the line that links chart.png beside the
    report (None when there is none)."""

    mermaid: list[Chart]
    picture: str | None


def of(inputs: RunInputs) -> Charts:
    return Charts(
        mermaid=charts_of(inputs.verdict),
        picture=(
            picture_line(inputs.run_dir, CHART_FILE, inputs.link_base) if inputs.chart_png else None
        ),
    )


def trim(part: Charts, keep: int = 2) -> str | None:
    """The charts after the first `keep` (the size budget's)."""
    if len(part.mermaid) <= keep:
        return None
    part.mermaid = part.mermaid[:keep]
    return f"the charts after the first {keep}"


SECTION = Section("charts", 20, of, (Trim(40, trim),))
