"""Why a server died, from its log (`engines/logcause.py`): the first error, not the teardown.

The logs are real SGLang 0.5.23 failures on a CPU machine (../shared/sglang-cpu/transcripts/,
read in place), and the scheduler crash of issue 42 as SGLang prints it (an out-of-vocabulary
id: the traceback ~40 lines above the end, teardown lines after it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from matrixrun.engines.base import log_cause
from matrixrun.engines.logcause import first_error

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "sglang-cpu" / "transcripts"

#: The shape of the real log of issue 42 (taken from a real crash here; frames shortened).
SCHEDULER_CRASH = """\
[2026-12-03 14:30:36] server_args=ServerArgs(model_path='/models/tiny-llama-2k', api_key='sk-abcdefghijklmnop12')
/venv/lib/python3.11/site-packages/sglang/kernels/ops/attention/fla/utils.py:223: UserWarning: Triton is not supported on current platform, roll back to CPU.
  warnings.warn(
[2026-12-03 14:31:40] INFO:     127.0.0.1:50512 - "GET /health HTTP/1.1" 200 OK
[2026-12-03 14:32:18] Scheduler hit an exception: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 3120, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 2621, in embedding
    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
IndexError: index out of range in self

[2026-12-03 14:32:18] SIGQUIT received. signum=None, frame=None. It usually means one child failed.
[2026-12-03 14:32:18] Sleeping 5 seconds before crash diagnostics to let GPU activity settle.
[2026-12-03 14:32:23] kill_process_tree called: parent_pid=14285, include_parent=True, pid=14285
"""  # noqa: E501 - log lines as SGLang writes them


def test_a_scheduler_crash_gives_its_exception_not_the_teardown() -> None:
    found = first_error(SCHEDULER_CRASH)
    assert found is not None
    lines = found.splitlines()
    assert lines[0].endswith("Scheduler hit an exception: Traceback (most recent call last):")
    assert 'functional.py", line 2621, in embedding' in lines[1]  # the innermost frame
    assert lines[2] == "IndexError: index out of range in self"
    assert "SIGQUIT" not in found and "kill_process_tree" not in found
    assert "UserWarning" not in found  # a warning naming no error is never the cause


def test_log_cause_reads_the_file_redacts_and_falls_back_to_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        SCHEDULER_CRASH.replace("IndexError: index", "IndexError: key sk-abcdefghijklmnop12 index")
    )
    assert "sk-abcdefghijklmnop12" not in log_cause(log)
    log.write_text("starting\nlistening on 30000\nterminated\n")  # no error in it: its tail
    assert log_cause(log).splitlines()[-1] == "terminated"
    assert log_cause(tmp_path / "missing.log") == ""


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("server_fail_no_cpu_engine_vllm.log", "ModuleNotFoundError: No module named 'vllm'"),
        ("server_fail_no_sgl_kernel_cpu.log", "ImportError:"),
    ],
)
def test_real_sglang_start_up_failures(name: str, want: str) -> None:
    path = TRANSCRIPTS / name
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing: CI has ../shared/ beside the clone")
        pytest.skip(f"{path} is not here (../shared/sglang-cpu/transcripts/)")
    found = first_error(path.read_text(errors="replace"))
    assert found is not None and want in found
    assert "kill_process_tree" not in found and "sigquit" not in found.lower()


def test_a_clean_log_has_no_cause() -> None:
    assert first_error("INFO: started\nINFO: 200 OK\nINFO: Shutting down\n") is None
