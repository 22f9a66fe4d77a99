"""The server's own numbers beside the client's: inference-perf saves, beside each stage's
client report, the server's Prometheus metrics scraped over the stage
(`stage_N_prometheus_metrics.json`); ingest keeps them in the run directory's `ingest.json`
under `server_side` (source → flattened numbers, seconds), never in results.jsonl, so the
verdict never sees them. Issue 47: "shown beside the client's when present, never mixed into
the verdict" — this section is the showing. One row per run: each metric as client / server,
latencies in ms, and whether the scrape's window is the run's: the scrape counts every request
the server finished while it was open (the corpus's stage 0 of `vllm/`: 937 where the client
sent 60), and a server number over other requests than the client's is not the same quantity.

Shown only for an ingest that kept a scrape; a run without one renders as before.
Template: `templates/sections/server_side.md.j2`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import Metrics
from matrixrun.report import fmt
from matrixrun.report.inputs import RunInputs
from matrixrun.report.section import Section, Trim

#: A scrape whose request count is further than this share from the client's sent requests
#: covers another window (the ingest summary's line uses the same rule).
WINDOW_TOLERANCE = 0.05

#: (column, the client's metric, the scrape's key, scale to the column's unit): the metrics
#: both sides name. The client's side is None where its format left the metric out (an
#: inference-perf TPOT is not bench_serving's), and then only the server's is shown.
PAIRS: tuple[tuple[str, str, str, float], ...] = (
    ("req/s", "request_throughput", "rate", 1.0),
    ("mean TTFT (ms)", "mean_ttft_ms", "time_to_first_token.mean", 1000.0),
    ("median TTFT (ms)", "median_ttft_ms", "time_to_first_token.median", 1000.0),
    ("mean e2e (ms)", "mean_e2e_latency_ms", "request_latency.mean", 1000.0),
    ("mean TPOT (ms)", "mean_tpot_ms", "time_per_output_token.mean", 1000.0),
)


def window_differs(scraped: float, sent: int) -> bool:
    """Whether a scrape that counted `scraped` requests covers another window than a run that
    sent `sent` (completed + failed)."""
    return abs(scraped - sent) > WINDOW_TOLERANCE * scraped


@dataclass(frozen=True)
class ServerRow:
    """One run with a scrape: the client's and the server's number of each pair (the column's
    unit), the requests each side counted, and where the scrape came from."""

    arm: str
    x: object
    attempt: int
    source: str
    sent: int
    scraped: float | None
    pairs: dict[str, tuple[float | None, float | None]]

    @property
    def other_window(self) -> bool:
        return self.scraped is not None and window_differs(self.scraped, self.sent)


def _client(metrics: Metrics, name: str) -> float | None:
    value = getattr(metrics, name, None)
    return float(value) if isinstance(value, int | float) else None


def rows_of(
    measurements: Sequence[Measurement], scrapes: Mapping[str, Mapping[str, float]], axis: str
) -> list[ServerRow]:
    """A row per measurement whose source has a scrape, in the runs' order."""
    rows = []
    for m in measurements:
        source = m.extra.get("source")
        scrape = scrapes.get(source) if isinstance(source, str) else None
        if not scrape or m.metrics is None:
            continue
        pairs = {}
        for column, ours, theirs, scale in PAIRS:
            server = scrape.get(theirs)
            pairs[column] = (_client(m.metrics, ours), None if server is None else server * scale)
        rows.append(
            ServerRow(
                arm=m.arm,
                x=m.point.get(axis),
                attempt=m.attempt,
                source=source if isinstance(source, str) else "",
                sent=m.metrics.completed + m.metrics.failed,
                scraped=scrape.get("count"),
                pairs=pairs,
            )
        )
    return rows


def scrapes_of(ingest: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """ingest.json's `server_side`, its numbers only (a hand-edited file is shown as far as it
    holds numbers, never refused by the report)."""
    found = (ingest or {}).get("server_side")
    if not isinstance(found, dict):
        return {}
    out: dict[str, dict[str, float]] = {}
    for source, numbers in found.items():
        if isinstance(numbers, dict):
            out[str(source)] = {
                str(k): float(v)
                for k, v in numbers.items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }
    return out


def _order(r: ServerRow, arms: list[str]) -> tuple[int, bool, float, str, int]:
    """Arms as the runs first name them, then numeric points ascending, then repeats."""
    x = r.x
    if isinstance(x, int | float) and not isinstance(x, bool):
        return (arms.index(r.arm), False, float(x), "", r.attempt)
    return (arms.index(r.arm), True, 0.0, fmt.x(x), r.attempt)


# ------------------------------------------------------------------------------ words


def _count(n: float | None) -> str:
    """A request count as counted: whole, thousands separated (never rounded to 4 digits)."""
    if n is None:
        return "n/a"
    return f"{n:,.0f}" if float(n).is_integer() else fmt.value(n)


def _pair(client: float | None, server: float | None) -> str:
    return f"{'—' if client is None else fmt.value(client)} / {fmt.value(server)}"


@dataclass
class ServerSideView:
    header: list[str]
    rows: list[list[str]]
    note: str
    window: str | None
    #: What the size budget dropped (the table), said in place of it.
    dropped: str | None = None


def of(
    measurements: Sequence[Measurement], ingest: Mapping[str, Any] | None, axis: str
) -> ServerSideView | None:
    found = rows_of(measurements, scrapes_of(ingest), axis)
    if not found:
        return None
    arms = list(dict.fromkeys(r.arm for r in found))
    found.sort(key=lambda r: _order(r, arms))
    header = ["arm", axis, "requests", *(column for column, *_ in PAIRS), "window"]
    rows = []
    for r in found:
        point = fmt.x(r.x) + (f" (run {r.attempt})" if r.attempt > 1 else "")
        scraped = _count(r.scraped)
        cells = [_pair(*r.pairs[column]) for column, *_ in PAIRS]
        seen = "not the run's" if r.other_window else ("n/a" if r.scraped is None else "the run's")
        rows.append([f"`{r.arm}`", point, f"{r.sent:,} / {scraped}", *cells, seen])
    note = (
        "Each cell is client / server: the client's measurement (what the verdict compares), "
        "then the server's own number from its Prometheus metrics, scraped by the client over "
        "its stage (inference-perf's `stage_N_prometheus_metrics.json`, in seconds there, ms "
        "here), "
        "under the server's definitions. Shown, never compared: the verdict is the client's "
        "alone. — marks a metric the client's file does not define as bench_serving does; "
        "every scraped number is in `ingest.json`'s `server_side`."
    )
    other = [r for r in found if r.other_window]
    window: str | None = None
    if other:
        first = other[0]
        window = (
            f"{len(other)} of {len(found)} scrapes counted another number of requests than their "
            f"run sent (`{first.arm}` at {axis} {fmt.x(first.x)}: {_count(first.scraped)} "
            f"scraped, {first.sent:,} sent): the scrape's window is not the run's, so the "
            "server's numbers there are not over the client's requests and may differ from the "
            "client's for that reason alone."
        )
    return ServerSideView(header, rows, note, window)


def drop_table(view: ServerSideView | None) -> str | None:
    """The size budget's step: the table goes, the note and the window sentence stay."""
    if view is None or not view.rows:
        return None
    view.rows = []
    view.dropped = "the server-side table (all of it in ingest.json's `server_side`)"
    return "the server-side metrics table"


def _build(inputs: RunInputs) -> ServerSideView | None:
    return of(inputs.measurements, inputs.ingest, inputs.verdict.settings.axis)


#: After the secondary metrics, before the failures: beside the client's numbers, collapsed.
SECTION: Section[ServerSideView | None] = Section(
    "server_side", 55, _build, (Trim(15, drop_table),)
)
