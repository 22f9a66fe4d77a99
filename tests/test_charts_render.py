"""Every Mermaid chart of the committed reports (reports/*.md) and of reports made here for the
shapes that broke before (a +1,598% bar, tiny values, all negative, all inside the margin, one
point, many points, 10,000+ tok/s and a +10,000% change) is rendered by real mermaid-cli in
headless chromium (tests/mermaid_render.py), in Mermaid's default and dark themes (what
GitHub picks from the reader's setting), and the pictures are checked from the SVG geometry
and the browser's text layout:

- every block parses;
- a change bar spans exactly from the zero line to its value, up for a gain and down for a
  loss, its height proportional to the change (the same pixels per percent for every bar);
- the ±margin lines lie inside the plot, on the same scale, clear of the zero line;
- the colours are the chart's own in both themes, the arms' lines differ, and every line,
  bar and text contrasts with the background (and lines with GitHub's dark page too);
- no text leaves the chart and no two x labels overlap (a cut title is whole in the SVG, so
  this is measured in the browser);
- the line under each chart names the arms in full.

The same checks run on two charts as main drew them before issue 29 and must catch both
faults there (the negative controls), so a check that passes everything fails this file.

Needs `node`, mermaid-cli in .ci/mermaid/node_modules (pinned; PUPPETEER_SKIP_DOWNLOAD=1 npm
ci --prefix .ci/mermaid) and Debian's chromium: skipped with that sentence when missing, and
a failure under CI, where .ci/run installs them and sets MATRIXRUN_MERMAID_TESTS=require.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path

import mermaid_render as mr
import pytest
from test_report import BASE, CAND, SPEC_TEXT, measurement, plan_of, with_spec, write_run

from matrixrun.report import render_run_dir
from matrixrun.report.sections.charts import BACKGROUND
from matrixrun.rundir.results import RunDir

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = os.environ.get("MATRIXRUN_MERMAID_TESTS") == "require"
GITHUB_DARK = "#0d1117"
GITHUB_LIGHT = "#ffffff"
THEMES = ("default", "dark")

#: Two blocks exactly as main rendered them before issue 29: the glm5 change chart (bars grow
#: from the bottom of the plot, so −0.8% is tall and −49.1% a stub) and a 10,000+ tok/s line
#: written with `.4g` (a parse error). The checks must fail on both.
OLD_GLM5_CHANGE = """xychart-beta
    title "output_throughput: flashinfer_cutedsl vs flashinfer_cutlass, change % (margin ±3%), crossover 10–256"
    x-axis "concurrency" ["1", "10", "64", "256", "1024"]
    y-axis "change (%)"
    bar [-0.8338, 67.03, 14.28, -26.64, -49.13]
    line [3, 3, 3, 3, 3]
    line [-3, -3, -3, -3, -3]
"""  # noqa: E501
OLD_GLM5_ARMS = """xychart-beta
    title "output_throughput (tok/s) per arm: line 1 flashinfer_cutlass (baseline), line 2 flashinfer_cutedsl"
    x-axis "concurrency" ["1", "10", "64", "256", "1024"]
    y-axis "tok/s"
    line [10.26, 38.16, 216, 709.9, 1581]
    line [10.18, 63.73, 246.8, 520.8, 804.3]
"""  # noqa: E501
OLD_EXPONENT = """xychart-beta
    title "output_throughput (tok/s) per arm"
    x-axis "concurrency" ["1", "8"]
    y-axis "tok/s"
    line [5000, 1.007e+04]
"""


# --------------------------------------------------------------------------- reports to draw


def run_of(tmp: Path, xs: list[float], base: list[float], cand: list[float]) -> RunDir:
    """A run whose baseline and candidate measure `base` and `cand` at sweep values `xs`, one
    run each, noise declared 1%, analysed as `matrixrun analyse` leaves it."""
    text = with_spec(
        SPEC_TEXT,
        sweep={"concurrency": xs},
        verify={"threshold": "3%", "noise": "1%", "max_runs": 1},
    )
    values = {BASE: dict(zip(xs, base, strict=True)), CAND: dict(zip(xs, cand, strict=True))}
    ms = [
        measurement(c, g.group_id, values[g.arm][c.x])
        for g in plan_of(text).groups
        for c in g.cells
    ]
    return write_run(tmp, text, ms)


def _report(tmp: Path, xs: list[float], base: list[float], cand: list[float]) -> str:
    return render_run_dir(run_of(tmp, xs, base, cand))


def _generated(tmp: Path) -> dict[str, str]:
    many = [2**k for k in range(16)]
    return {
        "large": _report(
            tmp / "large", [1, 8, 32, 128], [58.2, 48.5, 50.7, 43.9], [46.2, 295.3, 460.3, 745.9]
        ),
        "tiny": _report(
            tmp / "tiny", [1, 2, 4], [0.0123, 0.0151, 0.0172], [0.0131, 0.0122, 0.0201]
        ),
        "negative": _report(
            tmp / "neg", [1, 10, 64, 256], [10.0, 40.0, 220.0, 700.0], [9.9, 30.0, 120.0, 300.0]
        ),
        "inside-margin": _report(
            tmp / "inside", [1, 10, 64], [100.0, 200.0, 300.0], [100.4, 199.5, 301.0]
        ),
        "one-point": _report(tmp / "one", [8], [100.0], [80.0]),
        "many-points": _report(
            tmp / "many",
            many,
            [10.0 * (1 + k) for k in range(16)],
            [10.0 * (1 + k) * (0.6 + 0.05 * k) for k in range(16)],
        ),
        "10k-tok-s-linear": _report(
            tmp / "biglin",
            [64, 256, 1024],
            [12_345.0, 13_000.0, 14_000.0],
            [12_000.0, 15_500.0, 16_100.0],
        ),
        "10k-tok-s": _report(
            tmp / "big",
            [64, 256, 1024],
            [12_345.0, 31_000.0, 55_555.0],
            [10_007.0, 3_100_000.0, 61_000.0],
        ),
    }


@dataclass
class Drawn:
    """One Mermaid block of one document, drawn in each theme."""

    doc: str
    block: str
    legend: str
    svg: dict[str, str]
    boxes: list[mr.Box]

    @property
    def change(self) -> bool:
        return is_change(self.block)

    def name(self) -> str:
        title = re.search(r'title "(.*)"', self.block)
        return f"{self.doc}: {title.group(1) if title else self.block[:60]}"


def _legend_after(doc: str, block: str) -> str:
    after = doc.split(block, 1)[1].split("```", 1)[1].lstrip("\n")
    return after.split("\n", 1)[0]


def _need_renderer() -> None:
    why = mr.missing()
    if why is None:
        return
    if REQUIRED:
        pytest.fail(f"MATRIXRUN_MERMAID_TESTS=require (set by .ci/run), but {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    committed = {p.name: p.read_text() for p in sorted((ROOT / "reports").glob("*.md"))}
    return {**committed, **_generated(tmp_path_factory.mktemp("reports"))}


@pytest.fixture(scope="module")
def drawn(docs: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> list[Drawn]:
    """Every block of every document in one mmdc call per theme and one chromium page."""
    _need_renderer()
    work = tmp_path_factory.mktemp("mermaid")
    found = [(name, b) for name, text in docs.items() for b in mr.blocks_of(text)]
    blocks = [b for _, b in found]
    svgs = {t: mr.render(blocks, t, work) for t in THEMES}
    boxes = mr.text_boxes(svgs["default"], work)
    return [
        Drawn(
            doc=name,
            block=b,
            legend=_legend_after(docs[name], b),
            svg={t: svgs[t][i] for t in THEMES},
            boxes=boxes[i],
        )
        for i, (name, b) in enumerate(found)
    ]


# ------------------------------------------------------------------------------ the checks


def _series(block: str, kind: str) -> list[list[float]]:
    return [
        [float(v) for v in row.split(",")]
        for row in re.findall(rf"^\s*{kind} \[(.*)\]$", block, flags=re.M)
    ]


def is_change(block: str) -> bool:
    """A change chart (bars), not a per-arm one (lines over one empty bar series)."""
    return 'y-axis "change' in block


def bar_problems(block: str, svg: str) -> list[str]:
    """Where a change chart's bars do not span from the zero line to their value in proportion.
    Reads the values from the block (bar series 0 is max(change, 0), series 1 is min(change, 0);
    a chart with one bar series is read as bars that should start at zero) and the geometry
    from the SVG."""
    geo = mr.geometry(svg)
    bars = _series(block, "bar")
    if not bars:
        return []
    values = [a + b for a, b in zip(bars[0], bars[1], strict=True)] if len(bars) > 1 else bars[0]
    lines = _series(block, "line")
    zero_at = next((i for i, row in enumerate(lines) if all(v == 0 for v in row)), None)
    if zero_at is None:
        # no zero line: where zero is, by the scale of the ±margin lines
        (p_pts, _), (n_pts, _) = geo.lines[1], geo.lines[2]
        m = lines[0][0]
        zero_y = (p_pts[0][1] + n_pts[0][1]) / 2 if m else p_pts[0][1]
    else:
        zero_y = geo.lines[len(bars) + zero_at][0][0][1]
    coloured = geo.bars[0]
    mask = geo.bars.get(1)
    problems = []
    masks = [geo.bars[k] for k in range(1, len(bars))]
    if any(r[4] != geo.background for m in masks for r in m):
        problems.append("the mask bars are not the background colour")
    if any(m != masks[0] for m in masks):
        problems.append("the mask coats differ")
    per_pct = []
    for i, v in enumerate(values):
        top = coloured[i][1]
        other = mask[i][1] if mask is not None else geo.plot_bottom
        lo, hi = min(top, other), max(top, other)  # the visible span, in SVG y (down)
        if v > 0 and not (abs(hi - zero_y) < 1.0 and lo < zero_y):
            problems.append(
                f"bar {i} (+{v}) does not rise from the zero line "
                f"({lo:.1f}–{hi:.1f}, zero {zero_y:.1f})"
            )
        if v < 0 and not (abs(lo - zero_y) < 1.0 and hi > zero_y):
            problems.append(
                f"bar {i} ({v}) does not hang from the zero line "
                f"({lo:.1f}–{hi:.1f}, zero {zero_y:.1f})"
            )
        if v != 0:
            per_pct.append((i, (hi - lo) / abs(v)))
    if per_pct:
        ref = max(p for _, p in per_pct)
        for i, p in per_pct:
            if abs(p - ref) > 0.01 * ref + 1.0 / abs(values[i]):
                problems.append(
                    f"bar {i} ({values[i]}) is {p:.3f} px/% against {ref:.3f}: not in proportion"
                )
    return problems


def margin_problems(block: str, svg: str) -> list[str]:
    """Where the ±margin lines leave the plot, sit off the bars' scale or merge with zero."""
    geo = mr.geometry(svg)
    bars = _series(block, "bar")
    lines = _series(block, "line")
    first_line = len(bars)
    ys = {i: geo.lines[first_line + i][0][0][1] for i in range(len(lines))}
    zero = next(i for i, row in enumerate(lines) if all(v == 0 for v in row))
    margins = [i for i in ys if i != zero]
    problems = []
    for i in margins:
        y = ys[i]
        if not geo.plot_top <= y <= geo.plot_bottom:
            problems.append(f"margin line {lines[i][0]} at y={y:.1f} is outside the plot")
        if abs(y - ys[zero]) < 6:
            problems.append(f"margin line {lines[i][0]} is {abs(y - ys[zero]):.1f} px from zero")
    (a, b) = margins
    px = abs(ys[a] - ys[b]) / abs(lines[a][0] - lines[b][0])
    coloured, mask = geo.bars[0], geo.bars[1]
    for i, (p, n) in enumerate(zip(bars[0], bars[1], strict=True)):
        v = p + n
        if abs(v) > 1:
            span = abs(coloured[i][1] - mask[i][1])
            if abs(span - px * abs(v)) > 0.02 * span + 1:
                problems.append(f"bar {i} and the margin lines are on different scales")
    return problems


def colour_problems(block: str, svg: str) -> list[str]:
    geo = mr.geometry(svg)
    problems = []
    if geo.background != BACKGROUND:
        problems.append(f"background {geo.background}, not the chart's own {BACKGROUND}")
    # the data (bars of the change, lines of the arms) against the chart and both GitHub
    # pages; the zero and margin lines against the chart's own background
    change = is_change(block)
    data = {r[4] for r in geo.bars[0]} if change else {s for _, s in geo.lines.values()}
    guides = {s for _, s in geo.lines.values()} if change else set()
    if not change and any(r[4] != geo.background for r in geo.bars.get(0, [])):
        problems.append("the per-arm chart's spacer bars show")
    for c, pages in [(c, (geo.background, GITHUB_LIGHT, GITHUB_DARK)) for c in data] + [
        (c, (geo.background,)) for c in guides
    ]:
        for page in pages:
            if mr.contrast(c, page) < 3:
                problems.append(f"{c} has contrast {mr.contrast(c, page):.2f} against {page}")
    if not change:  # the per-arm chart: one line per arm, told apart
        strokes = [s for _, s in geo.lines.values()]
        if len(set(strokes)) != len(strokes):
            problems.append(f"the arms share a colour: {strokes}")
    for text, fill in geo.texts:
        if mr.contrast(fill, geo.background) < 4.5:
            problems.append(f"text {text!r} in {fill} on {geo.background}")
    return problems


def layout_problems(d: Drawn) -> list[str]:
    geo = mr.geometry(d.svg["default"])
    problems = []
    for b in d.boxes:
        if b.x0 < -1 or b.x1 > geo.width + 1 or b.y0 < -1 or b.y1 > geo.height + 1:
            problems.append(
                f"{b.text!r} leaves the chart ({b.x0:.0f}–{b.x1:.0f} of {geo.width:.0f})"
            )
    labels = re.search(r"x-axis \"[^\"]*\" \[(.*)\]", d.block)
    names = re.findall(r'"([^"]*)"', labels.group(1)) if labels else []
    xs = sorted(
        (b for b in d.boxes if b.text in names and b.y0 > geo.plot_bottom), key=lambda b: b.x0
    )
    for a, b in itertools.pairwise(xs):
        if b.x0 < a.x1 + 4:  # touching labels read as one number ("1638432768")
            problems.append(f"x labels {a.text!r} and {b.text!r} touch or overlap")
    return problems


def _all(drawn: list[Drawn], check: object) -> None:
    assert callable(check)
    bad = {f"{d.name()} [{t}]": p for d in drawn for t in THEMES if (p := check(d.block, d.svg[t]))}
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


# ------------------------------------------------------------------------------- the tests


def _has_a_hole(doc: str) -> bool:
    """Whether the primary table has a point with no change (`n/a`: an arm with no successful
    measurement there), where a chart would draw a hole and so is not drawn
    (`charts.change_chart`)."""
    table = doc.split("\n## Results", 1)[-1].split("\n## ", 1)[0]
    return any(row.startswith("| ") and "| n/a |" in row for row in table.splitlines())


def test_every_report_draws_its_charts(drawn: list[Drawn], docs: dict[str, str]) -> None:
    """Every document with two or more points has both charts, and each parsed (the fixture
    raised on any parse error, naming the block); one whose primary table has a point with no
    change draws none (a chart with a hole misleads) and still links its picture."""
    holes = {name for name, text in docs.items() if _has_a_hole(text)}
    for name in docs:
        blocks = [d for d in drawn if d.doc == name]
        if name == "one-point":
            assert blocks == [], "one point is a table, not a chart"
            continue
        if name in holes:
            assert blocks == [], f"{name}: a point without a change, yet a chart"
            assert "The same charts as a picture" in docs[name], name
            continue
        assert [d.change for d in blocks][:2] == [True, False], name
    assert len(drawn) >= 2 * (len(docs) - 1 - len(holes))


def test_change_bars_span_from_zero_in_proportion(drawn: list[Drawn]) -> None:
    _all([d for d in drawn if d.change], bar_problems)


def test_the_glm5_regression_reads_as_the_worst(drawn: list[Drawn]) -> None:
    """The issue's example: at 1024 (about −50%) the bar is far longer than
    at 1 (a few percent), and both hang below zero."""
    d = next(d for d in drawn if d.doc == "glm5_cutedsl.rehearsal.md" and d.change)
    labels = re.findall(r'"([^"]+)"', d.block.split("x-axis", 1)[1].splitlines()[0])[1:]
    first, last = labels.index("1"), labels.index("1024")
    geo = mr.geometry(d.svg["default"])
    spans = [abs(c[1] - m[1]) for c, m in zip(geo.bars[0], geo.bars[1], strict=True)]
    zero_y = geo.lines[len(geo.bars)][0][0][1]  # the first line after the bar series
    assert spans[last] > 10 * spans[first] > 0
    assert geo.bars[0][first][1] == pytest.approx(zero_y, abs=1)
    assert geo.bars[1][first][1] > zero_y  # a short bar, but below zero
    assert geo.bars[0][last][1] == pytest.approx(zero_y, abs=1)
    assert geo.bars[1][last][1] > zero_y + 100  # the mask stops 100+ px below zero


def test_margin_band_is_visible_on_the_same_scale(drawn: list[Drawn]) -> None:
    _all([d for d in drawn if d.change], margin_problems)


def test_colours_are_the_charts_own_and_readable_in_both_themes(drawn: list[Drawn]) -> None:
    _all(drawn, colour_problems)


def test_no_text_is_cut_and_no_labels_overlap(drawn: list[Drawn]) -> None:
    bad = {d.name(): p for d in drawn if (p := layout_problems(d))}
    assert not bad, bad


def test_the_line_under_each_chart_names_the_arms_in_full(drawn: list[Drawn]) -> None:
    for d in drawn:
        assert d.legend.startswith("*") and d.legend.endswith("*"), d.name()
        names = re.findall(r"`([^`]+)`", d.legend)
        assert len(names) == 2 and all(names), (d.name(), d.legend)
        if d.doc not in {p.name for p in (ROOT / "reports").glob("*.md")}:
            assert set(names) == {BASE, CAND}, d.legend
        if not d.change:
            logged = re.search(r'y-axis "log10 ', d.block) is not None
            assert logged == ("Log scale" in d.legend), d.legend


def test_the_checks_catch_what_main_drew_before(tmp_path: Path) -> None:
    """Negative controls: the old change chart fails the bar check (its bars grow from the
    bottom), the old per-arm chart the layout and colour checks (its title runs off the chart,
    its baseline is lavender on white), and the old `.4g` number is a parse error."""
    _need_renderer()
    svg, arms = mr.render([OLD_GLM5_CHANGE, OLD_GLM5_ARMS], "default", tmp_path)
    (boxes,) = mr.text_boxes([arms], tmp_path)
    old = Drawn("main", OLD_GLM5_ARMS, "", {"default": arms, "dark": arms}, boxes)
    assert any("leaves the chart" in p for p in layout_problems(old))
    assert any("#ececff has contrast 1.1" in p for p in colour_problems(OLD_GLM5_ARMS, arms))
    problems = bar_problems(OLD_GLM5_CHANGE, svg)
    assert any("bar 0 (-0.8338) does not hang from the zero line" in p for p in problems)
    assert any("bar 4 (-49.13)" in p for p in problems)
    (tmp_path / "exp").mkdir()
    with pytest.raises(mr.RenderError, match=r"block 1 of 1(.|\n)*Parse error"):
        mr.render([OLD_EXPONENT], "default", tmp_path / "exp")
