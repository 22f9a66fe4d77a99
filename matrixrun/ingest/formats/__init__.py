"""Benchmark result files of several clients → one comparison, without mixing unlike numbers.

`matrixrun ingest` used to read `sglang.bench_serving` files only; most people with results
have them from another client. This package detects each input's format, reads it into `Run`s
(a bench_serving-shaped record plus what the format knows beyond it), and hands the records to
`matrixrun.ingest.records`, which does the arm / point / repeat mapping for every format alike:

    format          input                                                 module
    bench_serving   `sglang.bench_serving --output-file` JSONL            sglang (+ load/)
    vllm            `vllm bench serve --save-result` JSON                 vllm
    vllm_sweep      a `vllm bench sweep serve` output directory           vllm_sweep
    vllm_table      vLLM's nightly benchmark_results.json (display names)  vllm_table
    inference_perf  inference-perf stage_N_lifecycle_metrics.json / folder  inference_perf
    llmperf         llmperf *_summary.json (+ *_individual_responses.json)  llmperf
    guidellm        `guidellm run --output kind=json` report              guidellm
    aiperf          profile_export_aiperf.json, or its artifact directory  aiperf
    genai_bench     genai-bench run files or experiment folder (refused)  genai_bench

genai-bench's files are recognised and refused: its throughputs are over a window counted in
whole seconds, not bench_serving's (see genai_bench.py and docs/ingest.md). Each reader names
metrics as bench_serving does, computes what a tool does not write where bench_serving's
definition allows it (a labelled conversion), and leaves out what it cannot (a refusal, said
so). Files of different clients are not compared unless the caller allows it (`mix_formats`);
then every metric that one of them defines differently from bench_serving is left out.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement, Reason
from matrixrun.core.metrics import METRIC_NAMES
from matrixrun.ingest.formats import (
    aiperf,
    axis,
    checks,
    genai_bench,
    guidellm,
    inference_perf,
    llmperf,
    sglang,
    vllm,
    vllm_legacy,
    vllm_sweep,
    vllm_table,
)  # fmt: skip
from matrixrun.ingest.formats import words as client_words
from matrixrun.ingest.formats.run import FORMATS, Format, Run, family
from matrixrun.ingest.formats.vllm_sweep import SweepServe
from matrixrun.ingest.records import DEFAULT_SECONDARY, IngestResult, measurements_from_records
from matrixrun.load import bench_serving
from matrixrun.report.sections.server_side import window_differs

__all__ = ["CLIENT", "FORMATS", "Format", "Ingested", "detect", "load", "read", "server_side"]

#: The client that measured each format: formats of one client compare without a flag.
CLIENT: dict[Format, str] = {
    "bench_serving": "bench_serving",
    "vllm": "vllm",
    "vllm_sweep": "vllm",
    "vllm_table": "vllm",
    "guidellm": "guidellm",
    "aiperf": "aiperf",
    "genai_bench": "genai-bench",
    "inference_perf": "inference-perf",
    "llmperf": "llmperf",
}
_NAMES: dict[Format, str] = {
    "bench_serving": "sglang.bench_serving JSONL",
    "vllm": "vllm bench serve --save-result JSON",
    "vllm_sweep": "vllm bench sweep serve directory",
    "vllm_table": "vLLM nightly benchmark_results.json",
    "guidellm": "guidellm JSON report",
    "aiperf": "aiperf profile export",
    "genai_bench": "genai-bench run file",
    "inference_perf": "inference-perf lifecycle report",
    "llmperf": "llmperf summary",
}
_KNOWN = (
    "sglang.bench_serving JSONL, vllm bench serve / benchmark_serving.py --save-result JSON, "
    "vLLM's nightly benchmark_results.json, a vllm bench sweep directory, guidellm's JSON "
    "report, aiperf's profile_export_aiperf.json or its artifact directory, inference-perf's "
    "stage_N_lifecycle_metrics.json or its results folder, llmperf's *_summary.json"
)


def detect(path: str | Path) -> Format:
    """The format of one input, from its content (a directory: a vLLM sweep)."""
    p = Path(path)
    if p.is_dir():
        if vllm_sweep.is_sweep_dir(p):
            return "vllm_sweep"
        if aiperf.exports(p):
            return "aiperf"
        if genai_bench.is_genai_bench_dir(p):
            return "genai_bench"
        if inference_perf.reports(p):
            return "inference_perf"
        raise InputError(
            f"{p}: a directory without run=N.json, {aiperf.EXPORT} or inference-perf stage "
            "reports; pass a `vllm bench sweep serve` output directory, an aiperf artifact "
            "directory, an inference-perf results folder or result files"
        )
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"{p}: cannot read it ({err.strerror}); check the path") from None
    except UnicodeDecodeError:
        raise InputError(f"{p}: not UTF-8 text; pass a benchmark result file") from None
    data: Any = None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        first = next((line for line in text.splitlines() if line.strip()), "")
        try:
            data = json.loads(first)  # JSONL: one run per line
        except json.JSONDecodeError as err:
            raise InputError(
                f"{p}: not valid JSON ({err.msg} at column {err.colno} of its first line); "
                f"pass a benchmark result file ({_KNOWN})"
            ) from None
    fmt = _detect_data(data)
    if fmt is not None:
        return fmt
    if isinstance(data, dict) and {"client_command", "gpu_type"} <= data.keys():
        raise InputError(
            f"{p}: vLLM's nightly-runner sidecar (client_command, gpu_type), not a result; pass "
            f"the result {p.with_suffix('.json').name} beside it, which is read with it"
        )
    if isinstance(data, list) and data and all(vllm.is_vllm(d) for d in data):
        raise InputError(
            f"{p}: a list of vLLM runs (a sweep's summary.json?); pass the sweep's directory, "
            "whose run=N.json files ingest reads"
        )
    raise InputError(
        f"{p}: not a result file ingest knows ({_KNOWN}); if it is one of them, pass "
        f"--format with one of {', '.join(FORMATS)}"
    )


def _detect_data(data: Any) -> Format | None:
    """The format a parsed file's content shows, else None."""
    if vllm_table.is_vllm_table(data):
        return "vllm_table"
    if llmperf.is_individual(data):
        return "llmperf"
    if isinstance(data, dict):
        if inference_perf.is_lifecycle(data) or inference_perf.is_prometheus(data):
            return "inference_perf"
        if llmperf.is_summary(data):
            return "llmperf"
        if guidellm.is_guidellm(data):
            return "guidellm"
        if aiperf.is_aiperf(data):
            return "aiperf"
        if genai_bench.is_genai_bench(data):
            return "genai_bench"
        if genai_bench.is_experiment_metadata(data):
            return "genai_bench"
        if vllm.is_vllm(data):
            return "vllm"
        if sglang.is_line(data):
            return "bench_serving"
    return None


def read(
    path: str | Path, format: Format | None = None, *, sweep_serve: SweepServe = "arms"
) -> list[Run]:
    """The runs of one input, in the format given or detected. A reader that meets a field
    of another type than its client writes (an object where it reads a number, ...) is
    refused in one sentence naming the file: a layout it does not know, never a traceback."""
    fmt = format or detect(path)
    try:
        return _read(path, fmt, sweep_serve)
    except (AttributeError, KeyError, TypeError, IndexError) as err:
        raise InputError(
            f"{path}: not a {_NAMES[fmt]} as this ingest knows it (reading it stopped at "
            f"{type(err).__name__}: {err}); pass the file as the client wrote it"
        ) from None


def _read(path: str | Path, fmt: Format, sweep_serve: SweepServe) -> list[Run]:
    if fmt == "bench_serving":
        return [sglang.run_of(r) for r in bench_serving.read_file(path)]
    if fmt == "vllm":
        return vllm.read_file(path)
    if fmt == "vllm_sweep":
        if not Path(path).is_dir():
            raise InputError(
                f"{path}: --format vllm_sweep takes the sweep's output directory, not a file"
            )
        return vllm_sweep.read_dir(path, serve=sweep_serve)
    if fmt == "aiperf":
        p = Path(path)
        files = aiperf.exports(p) if p.is_dir() else [p]
        if not files:
            raise InputError(f"{p}: no {aiperf.EXPORT} under it; pass aiperf's artifact directory")
        return [run for f in files for run in aiperf.read_file(f)]
    if fmt == "genai_bench":
        raise genai_bench.refuse(path)
    if fmt == "vllm_table":
        return vllm_table.read_file(path)
    if fmt == "inference_perf":
        p = Path(path)
        return inference_perf.read_dir(p) if p.is_dir() else inference_perf.read_file(p)
    if fmt == "llmperf":
        return llmperf.read_file(path)
    return guidellm.read_file(path)


@dataclass
class Ingested:
    """The mapped result and what `ingest` understood of the input, to print before writing."""

    result: IngestResult
    runs: list[Run]
    inputs: list[tuple[str, Format]]
    client: str
    left_out: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    #: What the report must say first (see checks.py): allowed differences, speculative
    #: decoding, points not every arm ran.
    caveats: list[dict[str, Any]] = field(default_factory=list)
    #: How the sweep axis was found when the files, not the caller, named it.
    axis_note: str | None = None

    def summary(self) -> str:
        """What was understood: formats, arms, points, repeats, servers, conversions."""
        ms = self.result.measurements
        s = self.result.settings
        lines: list[str] = []
        by_format = Counter(fmt for _, fmt in self.inputs)
        tools = sorted({r.tool for r in self.runs})
        lines.append(
            f"read {_runs(len(self.runs))} from {len(self.inputs)} input"
            + ("s" if len(self.inputs) != 1 else "")
            + ": "
            + "; ".join(f"{n} × {_NAMES[f]}" for f, n in by_format.items())
            + f" ({', '.join(tools)})"
        )
        lines.append(
            f"arms: {s.baseline} (baseline), " + ", ".join(s.candidates)
            if s.candidates
            else f"arms: {s.baseline}"
        )
        points = list(dict.fromkeys(_point_text(m.point) for m in ms))
        lines.append(f"points ({', '.join(ms[0].point) if ms else s.axis}): {', '.join(points)}")
        runs_per = Counter((m.arm, _point_text(m.point)) for m in ms)
        if max(runs_per.values(), default=1) == 1:
            lines.append("repeats: none (one run per arm and point)")
        else:
            repeated = [f"{a} @ {p}: {n}" for (a, p), n in runs_per.items() if n > 1]
            lines.append("repeats (runs per arm @ point): " + ", ".join(repeated))
        instances = Counter(m.instance for m in ms)
        lines.append(
            "servers: "
            + ", ".join(f"{i} ({_runs(n)})" for i, n in instances.items())
            + _server_note(ms)
        )
        derived: dict[str, str] = {}
        definitions: dict[str, str] = {}
        for r in self.runs:
            derived.update(r.derived)
            definitions.update(r.definitions)
        for metric, how in derived.items():
            lines.append(f"computed: {metric} = {how}")
        for fam, how in definitions.items():
            lines.append(f"defined differently: {fam}: {how}")
        for metric, why in self.left_out.items():
            lines.append(f"left out: {metric}: {why}")
        if any(CLIENT[r.format] != "bench_serving" for r in self.runs):
            lens = sorted(
                {
                    f"{r.record.fields.get('mean_input_len', 0):g}/"
                    f"{r.record.fields.get('mean_output_len', 0):g}"
                    for r in self.runs
                    if r.record.random_input_len is None
                    and r.record.fields.get("mean_input_len") is not None
                }
            )
            if lens:
                lines.append(
                    "not checked: these files record no dataset or lengths, so runs at one "
                    "point may have run different workloads; mean input/output tokens seen: "
                    + ", ".join(lens)
                )
        if self.axis_note:
            lines.append(f"axis found from the files: {self.axis_note}")
        for note in dict.fromkeys(n for r in self.runs for n in r.notes):
            lines.append(f"not recorded: {note}")
        lines += _server_side_lines(self.runs)
        for failure in self.failures:
            lines.append(f"not ingested (the sweep recorded it as failed): {failure}")
        for caveat in self.caveats:
            lines.append(f"caveat: {checks.caveat_line(caveat)}")
        return "\n".join(lines)


#: Server-side numbers printed per run (the rest stay in ingest.json).
_SERVER_KEYS = ("rate", "time_to_first_token.mean", "time_per_output_token.mean",
                "request_latency.mean")  # fmt: skip


def _server_side_lines(runs: Sequence[Run]) -> list[str]:
    """The server's own numbers beside the client's, one line per run that has them."""
    lines = []
    for r in runs:
        if not r.server_side:
            continue
        shown = ", ".join(f"{k} {r.server_side[k]:.4g}" for k in _SERVER_KEYS if k in r.server_side)
        m = r.record.metrics
        counted = r.server_side.get("count")
        if counted is not None and window_differs(counted, m.completed + m.failed):
            # the corpus's stage 0: 937 requests scraped where the client sent 60
            shown += (
                f"; the scrape counted {counted:.0f} requests where the client sent "
                f"{m.completed + m.failed}, so its window is not this run's"
            )
        lines.append(
            f"server-side (Prometheus scrape, shown, not compared): {r.record.where}: {shown} "
            "(seconds; all in ingest.json)"
        )
    return lines


def server_side(runs: Sequence[Run]) -> dict[str, dict[str, float]]:
    """source -> the server's own numbers, for ingest.json (never in results.jsonl)."""
    return {r.record.where: dict(r.server_side) for r in runs if r.server_side}


def _merge_same_runs(runs: list[Run]) -> list[Run]:
    """One run given twice (an llmperf summary and its per-request file) is kept once, with
    the most the two files say; two inputs of different formats with the same counts,
    duration and output tokens (vLLM's nightly table and the result files it copies) are one
    measurement given twice, refused naming both."""
    kept: dict[str, int] = {}
    out: list[Run] = []
    for r in runs:
        key = r.record.fields.get("run_of")
        if isinstance(key, str) and key in kept:
            i = kept[key]
            if "individual" in r.record.fields and "individual" not in out[i].record.fields:
                out[i] = r
            continue
        if isinstance(key, str):
            kept[key] = len(out)
        out.append(r)
    seen: dict[tuple[int, int, float], Run] = {}
    for r in out:
        m = r.record.metrics
        key3 = (m.completed, m.total_output_tokens, round(m.duration, 6))
        other = seen.setdefault(key3, r)
        if other is not r and other.format != r.format:
            raise InputError(
                f"{other.record.where} and {r.record.where} hold the same run ({m.completed} "
                f"requests, {m.total_output_tokens} output tokens in {m.duration:.6g} s): one "
                "measurement given twice would count as a repeat; pass each run once"
            )
    return out


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _point_text(point: dict[str, Any]) -> str:
    return ", ".join(f"{v}" for v in point.values())


def _server_note(ms: Sequence[Measurement]) -> str:
    reasons = {m.reason for m in ms}
    if "fresh_server" in reasons:
        return " (repeats on another launch are fresh-server repeats)"
    if "manual" in reasons:
        return " (repeats on one launch are warm repeats; --fresh-server if not)"
    return ""


def _relaunch(ms: list[Measurement], runs: list[Run]) -> list[Measurement]:
    """Instances from the runs' own server launches where the format records them (a sweep's
    serve combinations), then each repeat's reason from whether its launch is the first's."""
    out: list[Measurement] = []
    first: dict[str, str] = {}
    for m, r in zip(ms, runs, strict=True):
        instance = f"{m.arm}@{r.server}" if r.server is not None else m.instance
        seen = first.setdefault(m.cell_id, instance)
        reason: Reason = (
            "first" if m.attempt == 1 else ("manual" if instance == seen else "fresh_server")
        )
        out.append(m.model_copy(update={"instance": instance, "reason": reason}))
    return out


def _incomparable(runs: list[Run]) -> dict[str, str]:
    """Metric families some format defines differently, when several clients are present."""
    families: dict[str, str] = {}
    for r in runs:
        for fam, how in r.definitions.items():
            families.setdefault(fam, how)
    return families


def load(
    paths: Iterable[str | Path],
    baseline: str,
    *,
    format: Format | None = None,
    mix_formats: bool = False,
    sweep_serve: SweepServe = "arms",
    allow_differences: Collection[str] = (),
    **options: Any,
) -> Ingested:
    """Read every input (detecting its format unless `format` says), refuse a mix of clients
    unless `mix_formats`, and map the runs with `measurements_from_records(**options)`;
    runs that differ in model, GPU, dataset or client version are refused unless
    `allow_differences` names the field (then it is a caveat, as are speculative decoding
    and points not every arm ran)."""
    inputs: list[tuple[str, Format]] = []
    runs: list[Run] = []
    failures: list[str] = []
    for path in paths:
        fmt = format or detect(path)
        inputs.append((str(path), fmt))
        runs += read(path, fmt, sweep_serve=sweep_serve)
        if fmt == "vllm_sweep":
            failures += [str(f) for f in vllm_sweep.failures(Path(path))]
    if not runs:
        raise InputError("no result files given; pass one or more benchmark result files")
    runs = _merge_same_runs(vllm_legacy.name_arms(aiperf.name_arms(runs)))
    axis_field, axis_note = axis.find(runs, str(options.get("axis_field", axis.DEFAULT)))
    options["axis_field"] = axis_field
    clients = _clients(inputs, mix_formats)
    left_out = _left_out(runs, several_clients=len(clients) > 1)
    runs = [_without(r, set(left_out)) for r in runs]
    primary = options.get("primary", "output_throughput")
    if primary in left_out:
        raise InputError(f"--metrics {primary}: {left_out[primary]}; pick another metric")
    secondary = _available(
        list(options.pop("secondary", None) or DEFAULT_SECONDARY), runs, left_out
    )
    words = client_words.of(CLIENT[inputs[0][1]]) if len(clients) == 1 else client_words.MIXED
    checks.identity_caveats(runs, [str(r.record.tag) for r in runs], allow_differences)
    records = [_mapped(r, allow_differences) for r in runs]  # see _mapped: identity first
    result = measurements_from_records(
        records, baseline, secondary=secondary, words=words, **options
    )
    ms = result.measurements
    arms = [m.arm for m in ms]
    caveats = checks.identity_caveats(runs, arms, allow_differences)
    for caveat in (
        checks.spec_decode_caveat(runs, arms),
        checks.failures_caveat(runs, arms),
        checks.one_arm_points(ms),
    ):
        if caveat is not None:
            caveats.append(caveat)
    if sweep_serve == "launches":
        ms = _relaunch(ms, runs)
    ms = [
        m.model_copy(
            update={
                "client": CLIENT[r.format],
                # the dataset as the file says, also where _mapped left it out of the mapping
                "extra": {**m.extra, "format": r.format, "tool": r.tool}
                | ({"dataset_name": r.record.dataset_name} if r.record.dataset_name else {}),
            }
        )
        for m, r in zip(ms, runs, strict=True)
    ]
    result = result.model_copy(update={"measurements": ms})
    client = " + ".join(dict.fromkeys(CLIENT[fmt] for _, fmt in inputs))
    return Ingested(
        result=result,
        runs=runs,
        inputs=inputs,
        client=client,
        left_out=left_out,
        failures=failures,
        caveats=caveats,
        axis_note=axis_note,
    )


def _mapped(run: Run, allowed: Collection[str]) -> bench_serving.BenchServingRecord:
    """The record to map. What must agree (identity) is checked before the mapping, whose
    workload check would refuse a dataset difference first, in other words and deaf to
    `--allow-difference`; allowed, a dataset the identity records (so the report says it
    first) is not also a workload one point's runs must share."""
    if "dataset" in allowed and "dataset" in run.identity:
        return run.record.model_copy(update={"dataset_name": None})
    return run.record


def _clients(inputs: list[tuple[str, Format]], mix_formats: bool) -> dict[str, str]:
    """Each client with the first input it measured; several are refused unless
    `mix_formats` (they define warm-up, token counts, ITL and TPOT differently)."""
    clients: dict[str, str] = {}
    for p, fmt in inputs:
        clients.setdefault(CLIENT[fmt], p)
    if len(clients) > 1 and not mix_formats:
        named = "; ".join(f"{p} was measured by {c}" for c, p in clients.items())
        raise InputError(
            f"{named}: clients measure differently (warm-up, token counting, ITL and TPOT "
            "definitions), so one comparison would mix unlike numbers; ingest each client's "
            "files separately, or pass --mix-formats to compare them anyway (metrics any of "
            "them defines differently are then left out)"
        )
    return clients


def _left_out(runs: list[Run], *, several_clients: bool) -> dict[str, str]:
    """Metrics no comparison here may use, with why: families defined differently by one of
    several clients, and ITL wherever a run decoded speculatively."""
    left_out: dict[str, str] = {}
    if several_clients:
        for fam, how in _incomparable(runs).items():
            for name in METRIC_NAMES:
                if family(name) == fam:
                    left_out[name] = f"not comparable across clients ({how})"
    spec = next((r for r in runs if r.spec_decode is not None), None)
    if spec is not None:
        for name in METRIC_NAMES:
            if family(name) == "itl":
                left_out.setdefault(
                    name,
                    f"speculative decoding in {spec.record.where} ({spec.spec_decode}): a "
                    "streamed chunk carries several accepted tokens, so gaps between chunks "
                    "are not per-token ITL",
                )
    return left_out


def _available(secondary: list[str], runs: list[Run], left_out: dict[str, str]) -> list[str]:
    """The secondary metrics some input has; the others go into `left_out` with the reason
    (a definition that differs, else that no input has them)."""
    present = {
        name for r in runs for name in METRIC_NAMES if r.record.metrics.get(name) is not None
    }
    for name in secondary:
        if name not in present and name not in left_out:
            reasons = (r.definitions[family(name)] for r in runs if family(name) in r.definitions)
            left_out[name] = next(reasons, "no input has it")
    return [n for n in secondary if n not in left_out]


def _without(run: Run, names: set[str]) -> Run:
    """The run with the named metrics blanked (they would be compared across definitions)."""
    if not names:
        return run
    metrics = run.record.metrics.model_copy(update={n: None for n in names})
    record = run.record.model_copy(update={"metrics": metrics})
    derived = {k: v for k, v in run.derived.items() if k not in names}
    return replace(run, record=record, derived=derived)
