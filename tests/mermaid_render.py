"""Real Mermaid in a real headless browser, for the chart tests: mermaid-cli (`mmdc`, pinned in
.ci/mermaid/package.json, installed by .ci/run) drives Debian's chromium and writes one SVG
per block; the same chromium then measures every text's box as laid out (`text_boxes`), which
the SVG alone does not say (a title cut at the chart's edge is still whole in the file).

Nothing here is a stand-in: when mmdc or chromium is missing the tests skip and say how to
install them, and under CI (`MATRIXRUN_MERMAID_TESTS=require`, set by .ci/run) they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MERMAID_DIR = ROOT / ".ci" / "mermaid"
INSTALL = "`bash .ci/mermaid/install.sh` installs both, as .ci/run does"
SVG = "{http://www.w3.org/2000/svg}"


def mmdc() -> Path:
    return Path(os.environ.get("MATRIXRUN_MMDC", MERMAID_DIR / "node_modules" / ".bin" / "mmdc"))


def chromium() -> Path:
    """Debian's chromium, where .ci/mermaid/puppeteer.json points mermaid-cli too."""
    return Path("/usr/bin/chromium")


def missing() -> str | None:
    """Why the renderer cannot run here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not mmdc().exists():
        return f"mermaid-cli is not installed at {mmdc()} ({INSTALL})"
    if not chromium().exists():
        return f"chromium is not installed at {chromium()} ({INSTALL})"
    return None


def blocks_of(markdown: str) -> list[str]:
    """The text of every ```mermaid block, in order."""
    return re.findall(r"^```mermaid\n(.*?)^```$", markdown, flags=re.S | re.M)


class RenderError(AssertionError):
    pass


def render(blocks: list[str], theme: str, workdir: Path) -> list[str]:
    """Every block rendered to SVG by one mmdc call (one browser start for all of them) with
    Mermaid's `theme` (GitHub picks default or dark from the reader's setting)."""
    src = workdir / f"all-{theme}.md"
    src.write_text("".join(f"```mermaid\n{b}```\n\n" for b in blocks))
    out = workdir / f"out-{theme}.md"
    proc = subprocess.run(
        [
            str(mmdc()),
            "--puppeteerConfigFile",
            str(MERMAID_DIR / "puppeteer.json"),
            "--theme",
            theme,
            "--input",
            str(src),
            "--output",
            str(out),
            "--outputFormat",
            "svg",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    svgs = [workdir / f"out-{theme}-{i + 1}.svg" for i in range(len(blocks))]
    if proc.returncode != 0:
        done = sum(1 for p in svgs if p.exists())
        failed = blocks[done] if done < len(blocks) else "(unknown)"
        raise RenderError(
            f"mermaid-cli failed on block {done + 1} of {len(blocks)} (theme {theme}):\n"
            f"{failed}\n{proc.stderr[:1500]}"
        )
    return [p.read_text() for p in svgs]


@dataclass
class Box:
    text: str
    x0: float
    x1: float
    y0: float
    y1: float


def text_boxes(svgs: list[str], workdir: Path) -> list[list[Box]]:
    """Each SVG's text boxes in its own viewBox units, as chromium lays them out: the SVGs are
    inlined at their viewBox size into one page whose script writes the boxes into the DOM,
    which `--dump-dom` prints."""
    parts = []
    for i, svg in enumerate(svgs):
        parts.append(f'<div class="c">{svg.replace("my-svg", f"chart{i}")}</div>')
    script = """
<script>
const out = [];
for (const svg of document.querySelectorAll('div.c > svg')) {
  const vb = svg.viewBox.baseVal;
  svg.setAttribute('width', vb.width); svg.setAttribute('height', vb.height);
  svg.style.maxWidth = 'none';
  const s = svg.getBoundingClientRect();
  const k = vb.width / s.width;
  out.push([...svg.querySelectorAll('text')].map(t => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent,
            x0: (r.left - s.left) * k + vb.x, x1: (r.right - s.left) * k + vb.x,
            y0: (r.top - s.top) * k + vb.y, y1: (r.bottom - s.top) * k + vb.y};
  }));
}
const pre = document.createElement('pre'); pre.id = 'boxes';
pre.textContent = 'BOXES' + JSON.stringify(out) + 'END';
document.body.appendChild(pre);
</script>"""
    page = workdir / "measure.html"
    page.write_text(f"<!doctype html><html><body>{''.join(parts)}{script}</body></html>")
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                str(chromium()),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    found = re.search(r'<pre id="boxes">BOXES(.*?)END</pre>', proc.stdout, flags=re.S)
    if found is None:
        raise RenderError(f"chromium measured nothing: {proc.stderr[-1500:]}")
    import html

    raw = json.loads(html.unescape(found.group(1)))
    return [[Box(**b) for b in chart] for chart in raw]


# ------------------------------------------------------------------------- SVG geometry


Rect = tuple[float, float, float, float, str]  # x, y, width, height, fill


@dataclass
class Geometry:
    """What a rendered xychart draws, read from its SVG: the background, each bar series'
    rectangles and each line series' points in drawing order (`plots`, by the plot's index as
    Mermaid numbers it), the plot area (from the axis lines) and every text with its fill."""

    width: float
    height: float
    background: str
    bars: dict[int, list[Rect]] = field(default_factory=dict)
    lines: dict[int, tuple[list[tuple[float, float]], str]] = field(default_factory=dict)
    plot_top: float = 0.0
    plot_bottom: float = 0.0
    texts: list[tuple[str, str]] = field(default_factory=list)


def _points(d: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in re.findall(r"(-?[\d.]+)[ ,](-?[\d.]+)", d)]


def geometry(svg: str) -> Geometry:
    root = ET.fromstring(svg)
    _, _, w, h = (float(v) for v in root.attrib["viewBox"].split())
    bg = root.find(f".//{SVG}rect[@class='background']")
    geo = Geometry(
        width=w, height=h, background=(bg.attrib["fill"].lower() if bg is not None else "")
    )
    for g in root.iter(f"{SVG}g"):
        cls = g.attrib.get("class", "")
        if m := re.fullmatch(r"bar-plot-(\d+)", cls):
            geo.bars[int(m.group(1))] = [
                (
                    float(r.attrib["x"]),
                    float(r.attrib["y"]),
                    float(r.attrib["width"]),
                    float(r.attrib["height"]),
                    r.attrib.get("fill", "").lower(),
                )
                for r in g.iter(f"{SVG}rect")
            ]
        elif m := re.fullmatch(r"line-plot-(\d+)", cls):
            path = g.find(f"{SVG}path")
            assert path is not None
            geo.lines[int(m.group(1))] = (_points(path.attrib["d"]), path.attrib["stroke"].lower())
        elif cls == "left-axis":
            line = g.find(f"{SVG}g/{SVG}path")
            assert line is not None
            ys = [y for _, y in _points(line.attrib["d"])]
            geo.plot_top, geo.plot_bottom = min(ys), max(ys)
    for el in root.iter(f"{SVG}text"):
        geo.texts.append(("".join(el.itertext()), el.attrib.get("fill", "").lower()))
    return geo


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of #rrggbb."""
    c = {"white": "ffffff", "black": "000000"}.get(colour, colour).lstrip("#")
    rgb = [int(c[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio (1 to 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
