"""Secrets never reach a file or a comment: the rules, and real rehearsals given keys, on one
node and through Slurm."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import SECRET, SECRETS, Rehearsal

from matrixrun.core.redact import MASK, is_secret_name, redact_argv, redact_json, redact_text


@pytest.mark.parametrize(
    "name", ["api_key", "--api-key", "HF_TOKEN", "OPENAI_API_KEY", "db_password", "x-secret"]
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


LOOKALIKES = [
    "max_total_tokens",
    "--max-new-tokens",
    "tokenizer_path",
    "ssl_keyfile",
    "keys",
    "prefill_ms_per_token",
    "eos_token",
    "time_to_first_token",
    "kv_cache_key",
]


@pytest.mark.parametrize("name", LOOKALIKES)
def test_names_that_only_look_alike_stay_readable(name: str) -> None:
    assert not is_secret_name(name)


def test_argv() -> None:
    argv = ["python", "-m", "sglang", "--api-key", SECRET, "--max-total-tokens", "4096",
            f"--hf-token={SECRET}", "--base", f"http://u:{SECRET}@h:1/v1"]  # fmt: skip
    out = redact_argv(argv)
    assert SECRET not in " ".join(out)
    assert out[3:7] == ["--api-key", MASK, "--max-total-tokens", "4096"]
    assert out[7] == f"--hf-token={MASK}" and out[9] == f"http://u:{MASK}@h:1/v1"


@pytest.mark.parametrize(
    "text",
    [
        f"ServerArgs(model_path='/m', api_key='{SECRET}', port=1)",
        f'{{"api_key": "{SECRET}"}}',
        f"export OPENAI_API_KEY={SECRET}",
        f"--api-key {SECRET}",
        f"Authorization: Bearer {SECRET}",
        f"https://user:{SECRET}@example.com",
        f"the key is {SECRET}",
    ],
)
def test_text(text: str) -> None:
    assert SECRET not in redact_text(text)


def test_prose_and_numbers_are_left_alone() -> None:
    for text in ["password is required", "max_total_tokens=4096", "1 token per step"]:
        assert redact_text(text) == text
    # "-token" after a number is no flag, whichever word the match before it took (a
    # report's trace dataset line lost its "blocks")
    for before in ("", "and ", "time and ", "arrival time and "):
        text = f"{before}shared 512-token blocks (hash_ids)"
        assert redact_text(text) == text


def test_a_masked_value_in_a_code_span_keeps_its_closing_backtick() -> None:
    """report.md is redacted field by field as it is rendered, then as a whole: the second
    pass leaves what the first masked as it was."""
    for text in ("`HF_TOKEN=***`", "common args `--tp-size 1 --api-key ***`"):
        assert redact_text(text) == text
    assert redact_text(f"`--api-key {SECRET[3:]}`") == "`--api-key ***`"


def test_json() -> None:
    obj = {"api_key": SECRET, "max_new_tokens": 32, "enable_auth": True,
           "nested": [{"token": 7}, {"url": f"http://a:{SECRET}@b"}]}  # fmt: skip
    out = redact_json(obj)
    assert SECRET not in repr(out)
    assert out["max_new_tokens"] == 32 and out["enable_auth"] is True
    assert out["nested"][0]["token"] == MASK


@pytest.mark.slow
@pytest.mark.parametrize("path", ["rehearsed_here", "rehearsed_on_slurm"])
def test_a_secret_server_flag_reaches_no_file_of_the_run(
    path: str, request: pytest.FixtureRequest
) -> None:
    """The issue's probe (`engine.args: {api_key: ...}`, which the simulator echoes), an arm's
    secret-named flag and a variable of engine.env, on one node and through Slurm (both go
    through the same start and end, `run/session.py`; conftest.py runs them once). Every file
    of the run directory is read as bytes — the servers' logs (redacted when a server stops),
    the jobs' submitit files and pickles, report.md — except the spec copy: the user's own
    file, byte for byte, whose hash `--resume` checks."""
    run: Rehearsal = request.getfixturevalue(path)
    assert run.code in (0, 1), run.output[-3000:]
    leaks = [
        f"{p.relative_to(run.run_dir)}: {secret}"
        for p in sorted(run.run_dir.rglob("*"))
        if p.is_file() and p.name != "spec.yaml"
        for secret in SECRETS
        if secret.encode() in p.read_bytes()
    ]
    assert not leaks, leaks
    for text in (run.output, run.report.read_text()):
        assert not [s for s in SECRETS if s in text]
    report = (run.run_dir / "report.md").read_text()  # each named, its value masked
    for masked in ("--api-key ***`", "`HF_TOKEN=***`", "| `--admin-api-key` | (unset) | *** |"):
        assert masked in report, masked
    header = next((run.run_dir / "logs").glob("*.log")).read_text().splitlines()[0]
    assert header.startswith("$ ") and SECRET not in header


def test_the_plan_of_a_spec_with_a_secret_shows_none(tmp_path: Path) -> None:
    from test_runner import TINY, mr

    spec = tmp_path / "secret.yaml"
    spec.write_text(TINY.replace("args: {tp: 1}", f"args: {{tp: 1, api_key: {SECRET}}}"))
    plan = mr("plan", "--json", str(spec))
    assert plan.returncode == 0 and SECRET not in plan.stdout


def test_a_server_log_loses_the_secrets_the_server_echoed_when_it_is_stopped(
    tmp_path: Path,
) -> None:
    """SGLang logs its whole ServerArgs, api_key included; the log in the run directory is
    shared with the report, so the stop redacts what the server itself wrote (and keeps any
    bytes that are not UTF-8)."""
    import sys

    from matrixrun.engines.base import Launch, ServerProcess

    code = (  # the secret and the marker are built at run time: the argv line holds neither
        "import sys, time; s = 'abc-' + 'very-secret'; "
        "sys.stdout.write(f\"server_args=ServerArgs(model_path='m', api_key='{s}', port=1)\\n\"); "
        "sys.stdout.buffer.write(b'raw ' + bytes([255]) + b' by' + b'te\\n'); "
        "sys.stdout.flush(); time.sleep(30)"
    )
    log = tmp_path / "logs" / "g0.log"
    server = ServerProcess(Launch([sys.executable, "-c", code], {}, "http://127.0.0.1:1", 1), log)
    server.start()
    deadline = time.monotonic() + 10
    while b"raw \xff byte" not in (log.read_bytes() if log.exists() else b""):
        assert time.monotonic() < deadline, "the server never wrote its log"
        time.sleep(0.05)
    assert b"abc-very-secret" in log.read_bytes()  # written by the server, not by us
    server.stop(grace_s=2)
    body = log.read_bytes()
    assert b"abc-very-secret" not in body
    assert b"api_key='***'" in body
    assert b"raw \xff byte" in body


def test_redact_logs_sweeps_a_run_directorys_logs(tmp_path: Path) -> None:
    from matrixrun.core.redact import redact_logs

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text("--api-key hunter2secret\n")
    (logs / "b.txt").write_text("--api-key hunter2secret\n")
    redact_logs(logs)
    assert "hunter2secret" not in (logs / "a.log").read_text()
    assert "hunter2secret" in (logs / "b.txt").read_text()  # not a log: left alone
    redact_logs(tmp_path / "missing")  # nothing there: nothing to do
