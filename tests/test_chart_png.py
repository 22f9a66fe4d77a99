"""chart.png follows the Mermaid charts' rules (report.chart_png, real matplotlib, the optional
`plot` extra): bars from zero in proportion to the change, the axis cut where the Mermaid one
is with the true value written on each cut bar, the ±margin band inside the axis, arm names
in full in a legend, baseline and candidate in different colours that read on white, no text
outside the picture; and the report links chart.png where it exists (and only there), by a
link that resolves from the committed copies too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from test_charts_render import run_of
from test_report import BASE, CAND

from matrixrun.core.verdict import Verdict
from matrixrun.report import render_run_dir
from matrixrun.report.sections.charts import change_axis
from matrixrun.run import outputs

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("matplotlib")  # the optional extra: `pip install -e .[plot]`

SHAPES = {
    "large": ([1, 8, 32, 128], [58.2, 48.5, 50.7, 43.9], [46.2, 295.3, 460.3, 745.9]),
    "negative": ([1, 10, 64, 256], [10.0, 40.0, 220.0, 700.0], [9.9, 30.0, 120.0, 300.0]),
    "inside": ([1, 10, 64], [100.0, 200.0, 300.0], [100.4, 199.5, 301.0]),
    "10k": ([64, 256, 1024], [12_345.0, 31_000.0, 55_555.0], [10_007.0, 3_100_000.0, 61_000.0]),
}


def _figure(tmp: Path, shape: str) -> tuple[Any, Verdict]:
    from matrixrun.report.chart_png import figure

    rd = run_of(tmp, *SHAPES[shape])
    verdict = Verdict.model_validate(rd.read_json("verdict.json"))
    fig = figure(verdict)
    assert fig is not None
    fig.canvas.draw()
    return fig, verdict


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_bars_grow_from_zero_cut_like_the_mermaid_axis(tmp_path: Path, shape: str) -> None:
    import matplotlib.pyplot as plt

    fig, verdict = _figure(tmp_path, shape)
    top, bottom = fig.axes
    cells = verdict.slices[0].candidates[0].metrics[0].series[0].cells
    pct = [100 * (c.change or 0.0) for c in cells]
    from matplotlib.container import BarContainer

    (bars,) = [c for c in bottom.containers if isinstance(c, BarContainer)]
    m = 100 * verdict.settings.margin
    axis = change_axis(pct, m)  # the Mermaid chart's cut, exactly
    written = {t.get_text() for t in bottom.texts}
    for rect, p in zip(bars.patches, pct, strict=True):
        assert rect.get_y() == 0  # from zero, up or down
        assert rect.get_height() == pytest.approx(axis.clip(p))
        if axis.cut(p):  # the true value is written on the cut bar
            assert any(re.sub(r"[^\d.]", "", t) == f"{abs(p):.1f}" for t in written), written
    lo, hi = bottom.get_ylim()
    assert lo <= -m and m <= hi and (2 * m) / (hi - lo) >= 0.04  # the band is in view
    # names in full in the legends, baseline and candidate told apart and readable on white
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    assert legend == [f"{BASE} (baseline)", CAND]
    base, cand = (line.get_color() for line in top.get_lines()[:2])
    assert base != cand
    from mermaid_render import contrast

    assert min(contrast(base, "#ffffff"), contrast(cand, "#ffffff")) >= 3
    # nothing outside the picture (a title wider than the figure is cut in the PNG)
    box = fig.bbox
    renderer = fig.canvas.get_renderer()
    for text in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_visible()):
        if not text.get_text():
            continue
        ext = text.get_window_extent(renderer)
        assert box.x0 - 1 <= ext.x0 and ext.x1 <= box.x1 + 1, text.get_text()
    plt.close(fig)


def test_the_report_links_chart_png_only_where_it_exists(tmp_path: Path) -> None:
    rd = run_of(tmp_path / "r", *SHAPES["negative"])
    assert "chart.png" not in render_run_dir(rd)  # none written yet
    outputs.render_run(rd)
    assert (rd.path / "chart.png").exists()
    assert re.search(
        r"\[`[^`]*chart\.png`\]\([^)]*chart\.png\)", (rd.path / "report.md").read_text()
    )


def test_every_link_of_a_committed_report_resolves() -> None:
    """The committed copies (reports/*.md) and their run directories' report.md link
    chart.png relative to themselves (never from a root), so each link resolves where the
    document lies, on GitHub and in any copy of the directory."""
    for doc in [*ROOT.glob("reports/*.md"), *ROOT.glob("reports/runs/**/report.md")]:
        links = re.findall(r"\]\(<?([^)>]+)>?\)", doc.read_text())
        links = [link for link in links if not link.startswith(("http:", "https:", "#"))]
        for link in links:
            assert not link.startswith("/"), f"{doc}: {link}"
            assert (doc.parent / link).exists(), f"{doc}: {link}"
        if doc.parent == ROOT / "reports":
            assert any(link.endswith("chart.png") for link in links), doc
