"""Draw docs/images/chart-*.png: one picture of each kind of chart the verdict document shows,
made by the same code and renderer as the reports (docs/charts.md shows them).

- chart-change.png, chart-change-cut.png, chart-arms.png: Mermaid blocks of the committed
  reports (reports/glm5_cutedsl.rehearsal.md and reports/h200_transformers_cb.md), drawn by
  mermaid-cli in Debian's chromium (.ci/mermaid; `bash .ci/mermaid/install.sh` installs it);
- chart-png.png: chart.png of the glm5 rehearsal's run directory, written by
  `report.chart_png` (the plot extra).

    python scripts/chart_images.py        # rewrites the four files
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images"
MERMAID = ROOT / ".ci" / "mermaid"

#: image -> (committed report, index of its Mermaid block)
BLOCKS = {
    "chart-change.png": ("reports/glm5_cutedsl.rehearsal.md", 0),
    "chart-arms.png": ("reports/glm5_cutedsl.rehearsal.md", 1),
    "chart-change-cut.png": ("reports/h200_transformers_cb.md", 0),
}
GLM5_RUN = "reports/runs/glm5_cutedsl.rehearsal/20261201-065252"


def _block(report: str, index: int) -> str:
    text = (ROOT / report).read_text()
    return text.split("```mermaid\n")[index + 1].split("```", 1)[0]


def main() -> int:
    from matrixrun.core.verdict import Verdict
    from matrixrun.report.chart_png import write_chart

    mmdc = MERMAID / "node_modules" / ".bin" / "mmdc"
    if not mmdc.exists():
        print(f"no {mmdc}: run `bash .ci/mermaid/install.sh` first", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for image, (report, index) in BLOCKS.items():
            src = Path(tmp) / f"{image}.mmd"
            src.write_text(_block(report, index))
            subprocess.run(  # noqa: S603 - fixed argv: the pinned mmdc and paths made here
                [
                    str(mmdc),
                    "--puppeteerConfigFile",
                    str(MERMAID / "puppeteer.json"),
                    "--input",
                    str(src),
                    "--output",
                    str(Path(tmp) / image),
                    "--backgroundColor",
                    "white",
                ],
                check=True,
                capture_output=True,
            )
            shutil.copyfile(Path(tmp) / image, OUT / image)
            print(f"wrote docs/images/{image} from {report} (block {index + 1})")
    verdict = Verdict.model_validate_json((ROOT / GLM5_RUN / "verdict.json").read_text())
    if write_chart(verdict, OUT / "chart-png.png") is None:
        print("matplotlib is not installed (pip install -e .[plot])", file=sys.stderr)
        return 2
    print(f"wrote docs/images/chart-png.png from {GLM5_RUN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
