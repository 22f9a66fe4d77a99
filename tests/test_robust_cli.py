"""The CLI on broken input: one sentence naming the place, exit 2 (or 1 for the machine's
state), never a traceback. In-process (`cli.main`) so a property test can try hundreds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixrun import cli

ROOT = Path(__file__).resolve().parent.parent
TINY = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().err


def test_non_utf8_spec_is_a_located_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(TINY.replace("Tiny rehearsal", "Tiny r\xe9hearsal").encode("latin-1"))
    code, err = run(capsys, "validate", str(path))
    assert code == 2 and f"{path}:2: not UTF-8" in err and "Traceback" not in err


def test_deep_nesting_and_alias_bombs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text(TINY + "x: " + "[" * 2000 + "]" * 2000 + "\n")
    code, err = run(capsys, "validate", str(deep))
    assert code == 2 and "nested too deeply" in err
    bomb = tmp_path / "bomb.yaml"
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb.write_text(TINY + "\n".join(lines) + "\n")
    code, err = run(capsys, "validate", str(bomb))
    assert code == 2 and "aliases" in err


def test_profile_with_a_yaml_error_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.yaml").write_text("name: p\nbase: {step_ms: [[1, 20]\n")
    spec = tmp_path / "s.yaml"
    spec.write_text(re.sub(r"  profile:\n(    .*\n)+", "  profile: p.yaml\n", TINY))
    code, err = run(capsys, "validate", str(spec))
    assert code == 2, err
    assert f"{tmp_path / 'p.yaml'}:" in err and "YAML syntax error" in err
    (tmp_path / "p.yaml").write_bytes(b"name: \xff\n")
    code, err = run(capsys, "validate", str(spec))
    assert code == 2 and "not UTF-8" in err
    bomb = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    bomb += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    (tmp_path / "p.yaml").write_text("name: p\n" + "\n".join(bomb) + "\n")
    code, err = run(capsys, "validate", str(spec))
    assert code == 2 and "expands to more than" in err and "p.yaml" in err


def test_unwritable_places_are_one_sentence(tmp_path: Path) -> None:
    """A subprocess: `run` picks its progress display from the real stderr."""
    import subprocess
    import sys

    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = [sys.executable, "-m", "matrixrun", "run", "tests/specs/tiny.yaml", "--rehearse"]
    argv += ["--out", str(blocker / "run")]
    res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    # what a rehearsal can show is said before it runs; the failure itself is one sentence
    err = "".join(
        line
        for line in res.stderr.splitlines(keepends=True)
        if "rehearsal (--rehearse)" not in line
    )
    assert res.returncode == 2 and err.count("\n") == 1 and "cannot use" in err, res.stderr


def test_full_disk_says_free_space(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/full answers every write with ENOSPC."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    run_dir = _tiny_run_dir(tmp_path)
    code, err = run(capsys, "report", str(run_dir), "-o", "/dev/full")
    assert code == 1 and "No space left" in err and "free some space" in err, err


def _tiny_run_dir(tmp_path: Path) -> Path:
    """A run directory with measurements, built without launching anything."""
    from matrixrun.core.measurement import Measurement
    from matrixrun.core.metrics import Metrics
    from matrixrun.plan import expand
    from matrixrun.rundir.results import RunDir
    from matrixrun.spec import parse_spec, spec_hash

    spec = parse_spec(TINY)
    plan = expand(spec, spec_hash(TINY))
    rd = RunDir(tmp_path / "run").create()
    rd.write_text("spec.yaml", TINY)
    rd.write_json("plan.json", plan.model_dump(mode="json"))
    for group in plan.groups:
        for c in group.cells:
            value = 100.0 if c.arm == "slow" else 200.0
            rd.append(Measurement(
                cell_id=c.cell_id, point_id=c.point_id, arm=c.arm, group_id=group.group_id,
                slice=c.slice, point=c.point, instance=f"{group.group_id}#1",
                metrics=Metrics(duration=1, completed=8, total_input_tokens=128,
                                total_output_tokens=64, request_throughput=8,
                                input_throughput=128, output_throughput=value,
                                total_throughput=value + 128),
            ))  # fmt: skip
    from matrixrun.run import outputs
    from matrixrun.rundir.settings import run_settings, write_settings

    write_settings(rd, run_settings(spec, plan))
    outputs.analyse_run(rd)
    return rd.path


def test_post_to_an_unreachable_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "report.md").write_text("# r\n")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 30)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        code, err = run(capsys, "post", str(run_dir), "--repo", "o/n", "--pr", "1",
                        "--experiment", "e", "--api-url", f"http://127.0.0.1:{port}")  # fmt: skip
    assert code == 1 and "could not reach" in err and err.count("\n") == 1, err
    assert "ghp_" not in err


# ---------------------------------------------------------------------- property: broken specs

LINES = TINY.splitlines()
JUNK = st.sampled_from([
    "", ":", "- ", "{", "}", "[", "]", "&a", "*a", "*nope", "!!binary x", "? x", "\t", "'",
    '"', '"\\ud800"', "1e999", "-1", "0", "99999999999999999999", "null", "~", "%", "-3%",
    "150%", "nan", ".inf", "<<: *a", "a: &a [*a]", "x: y: z", "\x00", "\ufeff", "# c",
])  # fmt: skip


@st.composite
def broken_spec(draw: st.DrawFn) -> bytes:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "junk", "dup", "indent", "value", "bytes"]))
        if op == "delete":
            del lines[i]
        elif op == "junk":
            lines.insert(i, draw(JUNK))
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "indent":
            lines[i] = " " * draw(st.integers(1, 5)) + lines[i]
        elif op == "value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {draw(JUNK)}"
        if not lines:
            lines = [""]
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()) and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(min_size=1, max_size=3)) + data[at:]
    return data


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=broken_spec())
def test_a_broken_spec_is_one_located_sentence_never_a_traceback(
    data: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_bytes(data)
    try:
        code = cli.main(["validate", str(path)])
    except BaseException as exc:
        pytest.fail(f"{type(exc).__name__} escaped for {data!r}: {exc}")
    out, err = capsys.readouterr()
    assert code in (0, 2), (code, data, err)
    if code == 0:
        assert out.startswith(f"{path}: ok")
        return
    lines = err.splitlines()
    assert lines, data
    for line in lines:
        assert line.startswith(f"{path}"), (line, data)
        assert re.match(rf"{re.escape(str(path))}(:\d+)?: \S", line), (line, data)
    assert "Traceback" not in err
