"""inference-perf's per-stage reports (`stage_N_lifecycle_metrics.json`), one run per stage,
with the server's Prometheus scrape beside them (shown, never compared).

Facts from inference-perf at 7ff8150 (2025-11, `reportgen/base.py: summarize_requests`,
`apis/completion.py`, `apis/chat.py`) and the reports it wrote in the wild corpus
(kubernetes-sigs/inference-perf `demos/kubecon-na-2025`). A lifecycle report holds
`load_summary` (per stage: `requested_rate`, `achieved_rate`, `send_duration`), `successes`
(`count`; `latency.*` summaries in **seconds** with mean, min, p0.1 … p99.9, max and no std;
`throughput.*` per second; `prompt_len`, `output_len`) and `failures`. Every throughput is a
total over successful requests divided by `max(end) − min(start)` over all requests, which is
bench_serving's duration, so they are read as written and the duration is computed back from
`requests_per_sec`. `time_to_first_token` is the first streamed line's time after the start
(TTFT) and `request_latency` is end − start (e2e).

Not bench_serving's, so left out: inference-perf timestamps *every line* of the server-sent
stream, the blank line after each event included, so `time_per_output_token` ((last − first
line) / (lines − 1)) and `inter_token_latency` (gaps between lines) count about two lines per
token: in the corpus the stage-0 TPOT is 3.47 ms while (e2e − TTFT) / (output − 1) of its
means is 7.1 ms. `normalized_time_per_output_token` (e2e / output tokens) includes the TTFT.
The files record no inference-perf version; the run's `config.yaml` (found in the results'
folder or up to two folders above it) gives the model and the dataset.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run, count, finite, make_metrics, require_number
from matrixrun.ingest.formats.vllm import load_json
from matrixrun.ingest.records import arm_name
from matrixrun.load.bench_serving import BenchServingRecord

__all__ = ["is_lifecycle", "is_prometheus", "read_dir", "read_file", "reports"]

TOOL = "inference-perf (version not recorded in the files)"
_HINT = "is this inference-perf's stage_N_lifecycle_metrics.json?"
_STATS = {"mean": "mean", "median": "median", "p90": "p90", "p95": "p95", "p99": "p99"}
_LATENCIES = {"ttft": "time_to_first_token", "e2e_latency": "request_latency"}
DEFINITIONS = {
    "tpot": "inference-perf's time_per_output_token is (last − first streamed line) / "
    "(lines − 1) with every line of the event stream timestamped, blank separators "
    "included, so about two lines per token: not bench_serving's TPOT",
    "itl": "inference-perf's inter_token_latency is the gap between streamed lines, blank "
    "separators included: not per token",
}
DERIVED = {
    "duration": "successes.count / throughput.requests_per_sec (inference-perf's window: "
    "first request start to last request end)",
    "total_input_tokens": "throughput.input_tokens_per_sec × duration",
    "total_output_tokens": "throughput.output_tokens_per_sec × duration",
    "concurrency": "mean request_latency × completed / duration",
}


def is_lifecycle(data: Any) -> bool:
    """A lifecycle report: `load_summary`, and successes with `latency` and `throughput`."""
    ok = isinstance(data, dict) and {"load_summary", "successes", "failures"} <= data.keys()
    s = data.get("successes") if ok else None
    return isinstance(s, dict) and ("latency" in s or "throughput" in s or s.get("count") == 0)


def is_prometheus(data: Any) -> bool:
    """A Prometheus report: the same three keys, successes with a `rate` and no `latency`."""
    ok = isinstance(data, dict) and {"load_summary", "successes", "failures"} <= data.keys()
    s = data.get("successes") if ok else None
    return isinstance(s, dict) and "latency" not in s and "throughput" not in s and "rate" in s


def _stage_of(data: dict[str, Any]) -> float | None:
    """A stage report's requested rate; a summary over all stages has none."""
    load = data.get("load_summary")
    return finite(load.get("requested_rate")) if isinstance(load, dict) else None


def reports(folder: Path) -> list[Path]:
    """The stage lifecycle reports under a folder (by content; summaries are not runs)."""
    found = []
    for p in sorted(folder.rglob("*.json")):
        try:
            data = load_json(p, _HINT)
        except InputError:
            continue
        if is_lifecycle(data) and _stage_of(data) is not None:
            found.append(p)
    return found


def _arm(path: Path) -> str:
    """The configuration's folder: the one holding `results/`, else the report's folder."""
    folder = path.parent
    if arm_name(folder.name) == "results" and folder.parent.name:
        return arm_name(folder.parent.name)
    return arm_name(folder.name)


def _config(path: Path) -> dict[str, str]:
    """Model and dataset from the run's `config.yaml`, in the folder or up to two above."""
    for folder in (path.parent, path.parent.parent, path.parent.parent.parent):
        conf = folder / "config.yaml"
        if not conf.is_file():
            continue
        try:
            data = YAML(typ="safe").load(conf.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, YAMLError):
            return {}
        if not isinstance(data, dict):
            return {}
        out: dict[str, str] = {"config": str(conf)}
        server = data.get("server") or {}
        model = server.get("model_name") if isinstance(server, dict) else None
        if isinstance(model, str) and model:
            out["model"] = model
        spec = data.get("data") or {}
        if isinstance(spec, dict) and spec.get("type"):
            kind = str(spec["type"])
            params = spec.get(kind)
            shown = (
                ", ".join(f"{k} {v}" for k, v in params.items()) if isinstance(params, dict) else ""
            )
            out["dataset"] = f"{kind} ({shown})" if shown else kind
        return out
    return {}


def _section(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """`successes[key]`: an object, or {} where it is absent (what it holds is then absent
    too); anything else is a layout this reader does not know, refused naming the file."""
    value = data["successes"].get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where}: successes.{key} is {value!r}, not an object; {_HINT}")
    return value


@dataclass(frozen=True)
class _Stage:
    completed: int
    failed: int
    duration: float
    rate: float


def _counts(data: dict[str, Any], where: str) -> _Stage:
    succ, fail = data["successes"], data["failures"]
    completed = count(require_number(succ, "count", where, _HINT), "successes.count", where)
    if not isinstance(fail, dict) or finite(fail.get("count")) is None:
        # every report inference-perf writes counts its failures: without it, a layout
        # this reader does not know, and 0 would be a guess
        raise InputError(
            f"{where}: no failures.count, which every inference-perf lifecycle report has, "
            "so its failed requests are unknown; pass the report as inference-perf wrote it"
        )
    failed = count(float(fail["count"]), "failures.count", where)
    rate = _stage_of(data)
    if rate is None:
        raise InputError(
            f"{where}: inference-perf's summary over all stages (its load_summary has no "
            "requested_rate), not one run; pass the stage_N_lifecycle_metrics.json files or "
            "their results folder"
        )
    if completed == 0:
        raise InputError(
            f"{where}: every request failed (successes.count 0, failures.count {failed}): "
            "there is no measurement to compare; fix the server and rerun, or leave it out"
        )
    rps = require_number(_section(data, "throughput", where), "requests_per_sec", where, _HINT)
    return _Stage(completed, failed, completed / rps, rate)


def _values(data: dict[str, Any], st: _Stage, where: str) -> dict[str, Any]:
    """bench_serving's metrics from a stage: throughputs as written, latencies × 1000."""
    tput = _section(data, "throughput", where)
    out_tps = require_number(tput, "output_tokens_per_sec", where, _HINT)
    in_tps = require_number(tput, "input_tokens_per_sec", where, _HINT)
    values: dict[str, Any] = {
        "duration": st.duration,
        "completed": st.completed,
        "failed": st.failed,
        "total_input_tokens": count(in_tps * st.duration, "input tokens", where),
        "total_output_tokens": count(out_tps * st.duration, "output tokens", where),
        "request_throughput": require_number(tput, "requests_per_sec", where, _HINT),
        "input_throughput": in_tps,
        "output_throughput": out_tps,
        "total_throughput": require_number(tput, "total_tokens_per_sec", where, _HINT),
    }
    latency = _section(data, "latency", where)
    for ours, theirs in _LATENCIES.items():
        entry = latency.get(theirs)
        for stat, key in _STATS.items():
            v = finite(entry.get(key)) if isinstance(entry, dict) else None
            values[f"{stat}_{ours}_ms"] = v * 1000 if v is not None else None
    if values.get("mean_e2e_latency_ms") is not None:
        values["concurrency"] = values["mean_e2e_latency_ms"] / 1000 * st.completed / st.duration
    return values


def _server_side(path: Path) -> dict[str, float]:
    """The Prometheus report beside a lifecycle report, flattened ('a.b' → number)."""
    side = path.with_name(path.name.replace("lifecycle_metrics", "prometheus_metrics"))
    if side == path or not side.is_file():
        return {}
    try:
        data = load_json(side, _HINT)
    except InputError:
        return {}
    if not is_prometheus(data):
        return {}
    flat: dict[str, float] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif (v := finite(node)) is not None:
            flat[prefix] = v

    walk("", data.get("successes"))
    return flat


def read_file(path: str | Path) -> list[Run]:
    """The one run of a stage's lifecycle report."""
    p = Path(path)
    where = str(p)
    data = load_json(p, _HINT)
    if is_prometheus(data):
        raise InputError(
            f"{p}: inference-perf's Prometheus report, the server's own metrics scraped over "
            "the stage, not the client's measurement; pass the lifecycle_metrics.json beside "
            "it (the server's numbers are then shown next to the client's)"
        )
    if not is_lifecycle(data):
        raise InputError(f"{p}: no load_summary, successes and failures; {_HINT}")
    st = _counts(data, where)
    values = _values(data, st, where)
    conf = _config(p)
    prompt = _section(data, "prompt_len", where)
    record = BenchServingRecord(
        source=where,
        line=1,
        tag=_arm(p),
        backend=None,
        dataset_name=conf.get("dataset"),
        request_rate=st.rate,
        max_concurrency=None,
        random_input_len=None,
        random_output_len=None,
        random_range_ratio=None,
        server_info={},
        metrics=make_metrics(values, where),
        fields={
            "stage": p.name.split("_lifecycle")[0],
            "achieved_rate": finite((data.get("load_summary") or {}).get("achieved_rate")),
            "mean_input_len": finite(prompt.get("mean")),
            "mean_output_len": values["total_output_tokens"] / st.completed,
            **({"config": conf["config"]} if "config" in conf else {}),
        },
    )
    derived = dict(DERIVED)
    if "concurrency" not in values:
        derived.pop("concurrency")
    return [
        Run(
            record=record,
            format="inference_perf",
            tool=TOOL,
            definitions=dict(DEFINITIONS),
            derived=derived,
            identity={k: v for k, v in conf.items() if k in ("model", "dataset")},
            notes=(
                "std of TTFT and e2e latency: inference-perf writes no standard "
                "deviation, so they are absent",
            ),
            server_side=_server_side(p),
        )
    ]


def read_dir(path: Path) -> list[Run]:
    """Every stage report under a folder, in path order."""
    files = reports(path)
    if not files:
        raise InputError(
            f"{path}: no inference-perf stage report (stage_N_lifecycle_metrics.json with a "
            "requested_rate) under it; pass the results folder of a run"
        )
    return [run for f in files for run in read_file(f)]
