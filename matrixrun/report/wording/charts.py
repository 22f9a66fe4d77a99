"""The words of the charts (the Mermaid ones in the document and chart.png): short titles that
fit in the chart's width, axis labels that say when an axis is log or cut, and the Markdown
line under each chart that names every colour (xychart shows no legend on GitHub)."""

from __future__ import annotations

from collections.abc import Sequence


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
