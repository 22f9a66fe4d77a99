"""How ingest's messages name things, in the language of the client whose files it reads.

The arm / point / repeat mapping (`matrixrun.ingest.records`) is one for every format, but its
refusals tell a person what to change in how they ran their client: a vLLM user names an arm
with `--label`, not bench_serving's `--tag`; a guidellm run has no "line". Each client's
words are here, so a message never sends someone to a flag their tool does not have.
"""

from __future__ import annotations

from matrixrun.ingest.records import BENCH_SERVING, ClientWords

__all__ = ["MIXED", "of"]


_WORDS = {
    "bench_serving": BENCH_SERVING,
    "vllm": ClientWords(
        unit="run",
        default_arm="the run's --label (or the file name, or a sweep's serve combination)",
        arm_hint="give each arm its own --label, file or sweep serve combination",
        no_concurrency="(vllm bench serve ran without --max-concurrency?)",
    ),
    "guidellm": ClientWords(
        unit="benchmark",
        default_arm="the report's --label arm=NAME (or the file name)",
        arm_hint="give each arm its own report file, or label it with --label arm=NAME",
        no_concurrency="(a rate or throughput profile has no concurrency: pass --axis-field "
        "request_rate for rate profiles, or ingest the concurrent and synchronous benchmarks)",
    ),
    "aiperf": ClientWords(
        unit="export",
        default_arm="the artifact directory's name",
        arm_hint="give each arm its own artifact directory (--artifact-dir)",
        no_concurrency="(its profiling phase ran at a request rate: pass --axis-field "
        "request_rate)",
    ),
    "inference-perf": ClientWords(
        unit="stage report",
        default_arm="the folder holding the results/ folder",
        arm_hint="give each server configuration its own folder, as inference-perf's "
        "report output does",
        no_concurrency="(inference-perf sweeps a request rate: pass --axis-field request_rate)",
    ),
    "llmperf": ClientWords(
        unit="summary",
        default_arm="the summary's file name",
        arm_hint="give each arm its own summary file (--results-dir)",
        no_concurrency="(no num_concurrent_requests in the summary?)",
    ),
}
#: For --mix-formats: words that fit every client.
MIXED = ClientWords(
    unit="run",
    default_arm="the file's own arm name (or the file name)",
    arm_hint="give each arm its own file",
    no_concurrency="(the run was rate-limited, not concurrency-limited?)",
)


def of(client: str) -> ClientWords:
    """The words for a client as `ingest_formats.CLIENT` names it."""
    return _WORDS.get(client, MIXED)
