"""How numbers look in the report: one function per kind of number, so the same quantity is
printed the same way in every sentence and table. No sentences here (`wording` has those)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from matrixrun.core.markdown_safe import md_heading, md_text
from matrixrun.core.redact import redact_text

MINUS = "\u2212"


def signed(value: float, decimals: int = 1) -> str:
    """+1.2 / −3.4, never '−0.0'."""
    text = f"{value:+.{decimals}f}"
    if float(text) == 0:
        text = "+" + text[1:]
    return text.replace("-", MINUS)


def change(value: float, decimals: int = 1) -> str:
    """A relative change as people read it: 0.672 → '+67.2%', −0.283 → '−28.3%'."""
    return signed(100 * value, decimals) + "%"


#: Widest interval printed, as the ratio of its ends' (1 + change): past ×4 (say −50% to +100%)
#: it says nothing a reader can use (issue 33: "+2.0% [−99.3, +15041.5]", a t quantile on 1 df),
#: so the cell says what it lacks instead.
WIDEST_INTERVAL = 4.0


def change_interval(lo: float, hi: float, df: float | None = None, *, decided: bool = False) -> str:
    """'[−31.0, −25.5]'; past `WIDEST_INTERVAL`, '(no usable interval: σ on 1 df)' — unless
    the cell is `decided` (better or worse): an interval that clears the margin is used, its
    width is what the reader needs beside the verdict ('+189% [+27, +559]')."""
    if not decided and (1 + hi) > WIDEST_INTERVAL * max(1 + lo, 1e-12):
        on = f": σ on {df:.3g} df" if df is not None else ""
        return f"(no usable interval{on})"
    return f"[{signed(100 * lo)}, {signed(100 * hi)}]"


def interval_usable(lo: float | None, hi: float | None) -> bool:
    """Whether `change_interval` prints the interval itself."""
    return lo is not None and hi is not None and (1 + hi) <= WIDEST_INTERVAL * max(1 + lo, 1e-12)


def percent(fraction: float) -> str:
    """A small relative quantity (σ): 0.0143 → '1.4%', tiny ones with 2 significant digits."""
    pct = 100 * fraction
    if pct == 0:
        return "0%"
    if pct >= 0.1:
        return f"{pct:.1f}%"
    return f"{pct:.2g}%"


def confidence(fraction: float) -> str:
    """A confidence level with the precision it deserves: 0.981791 → '98.2%' (not
    '98.1791%'); more decimals only where one would read 100.0% (0.99951 → '99.95%')."""
    for decimals in (1, 2, 3):
        text = f"{100 * fraction:.{decimals}f}"
        if float(text) < 100:
            return text + "%"
    return f"{100 * fraction:.4f}%"


def share(fraction: float) -> str:
    """A share with one decimal: 0.97 → '97.0%'."""
    return f"{100 * fraction:.1f}%"


def setting_percent(fraction: float) -> str:
    """A configured fraction as written in a spec: 0.03 → '3%'."""
    return f"{100 * fraction:g}%"


def margin(fraction: float) -> str:
    """A practical margin as every line states it: 0.03 → '±3%'."""
    return f"±{setting_percent(fraction)}"


def margins(common: float, own: dict[str, float], metrics: Sequence[str]) -> str:
    """Each metric's practical margin as the analysis used it: '±3%' when all share one,
    else '±10% on `p99_ttft_ms`; ±3% on the others' (the metrics in `metrics`' order)."""
    differ = {m: own[m] for m in metrics if m in own and own[m] != common}
    if not differ:
        return margin(common)
    parts = [f"{margin(v)} on `{m}`" for m, v in differ.items()]
    rest = [m for m in metrics if m not in differ]
    if rest:
        parts.append(f"{margin(common)} on " + ("the others" if len(rest) > 1 else f"`{rest[0]}`"))
    return "; ".join(parts)


def value(v: float | None) -> str:
    """4 significant digits, thousands separated, never scientific: 1603.04 → '1,603',
    515.58 → '515.6', 0.01234 → '0.01234'."""
    if v is None:
        return "n/a"
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    exp = math.floor(math.log10(abs(v)))
    decimals = max(0, 3 - exp)
    return f"{round(v, 3 - exp):,.{decimals}f}".replace("-", MINUS)


def exact(v: float | None) -> str:
    """5 significant digits: for setting two close numbers side by side (a rerun against its
    first run: 515.77 vs 515.58), where 4 digits could hide the difference."""
    if v is None or not math.isfinite(v):
        return "n/a" if v is None else str(v)
    if v == 0:
        return "0"
    decimals = max(0, 4 - math.floor(math.log10(abs(v))))
    return f"{v:.{decimals}f}"


def x(v: Any) -> str:
    """A sweep value: integers without '.0', infinity as 'inf'."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        if math.isinf(v):
            return "inf"
        if v.is_integer():
            return str(int(v))
        return f"{v:g}"
    return str(v)


def seconds(s: float | None) -> str:
    return "n/a" if s is None else f"{s:,.1f} s"


def approx(v: float) -> str:
    """An interpolated estimate, with two significant digits (it is only an estimate)."""
    return f"{float(f'{v:.2g}'):g}"


def cli_flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def flag_value(v: object) -> str:
    if v is True:
        return "(set)"
    if v is False or v is None:
        return "(unset)"
    if isinstance(v, dict | list):
        return json.dumps(v, separators=(",", ":"), sort_keys=True)
    return x(v)


def join_words(items: Sequence[str]) -> str:
    """'1', '1 and 2', '1, 2 and 3'."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def table_cell(text: str) -> str:
    """Text that is safe inside a GFM table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def shorten(text: str, limit: int = 400) -> str:
    """One line of at most `limit` characters, keeping both ends: an error's head says what
    failed and its tail (the server log's last lines) usually says why."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return text[:half] + " … " + text[-half:]


def user(text: str) -> str:
    """A user- or server-supplied string in prose (hypothesis, notes): secrets redacted, then
    made inert Markdown (`markdown_safe.md_text`: no HTML, no new lines, no emphasis)."""
    return md_text(redact_text(text))


def user_block(text: str) -> str:
    """The author's own Markdown (spec `notes:`), rendered as written: secrets redacted and raw
    HTML made text (`&`, `<`, `>` as entities), so it cannot fold or hide the rest of a comment;
    its paragraphs, lists and emphasis are kept."""
    text = redact_text(text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def user_heading(text: str) -> str:
    """A user-supplied string as a heading's text (the title)."""
    return md_heading(redact_text(text))


def user_plain(text: str) -> str:
    """A user-supplied string where Markdown escapes would show (inside a code span, a Mermaid
    chart): secrets redacted, one line, no backticks or double quotes to break out with."""
    one = " ".join(redact_text(text).split())
    return one.replace("`", "'").replace('"', "'")
