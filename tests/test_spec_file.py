"""The spec file is read once (issue 43): `read_spec` decodes it as UTF-8 whatever the locale, and
every later reader — the flag check's `file:line`, the plan's ids, the run directory's copy and
hash, a resume's comparison, a rehearsal's preview — takes that `SpecFile` instead of opening
the file again. Two copies once read it with the locale's encoding, so a spec with "≥" in a
comment validated and then failed to run under LANG=C."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from matrixrun.cli.main import main
from matrixrun.flags import check_file
from matrixrun.spec import read_spec, spec_hash

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "specs" / "tiny.yaml"
#: A comment and a title a C locale cannot decode (é: two bytes, ≥: three).
NON_ASCII = "# café: the fast arm should be ≥ 2× the slow one\n"


def _non_ascii_spec(folder: Path, name: str = "tiny-utf8.yaml") -> Path:
    text = TINY.read_text(encoding="utf-8").replace(
        "title: Tiny rehearsal", "title: Tiny rehearsal ≥ café"
    )
    path = folder / name
    path.write_text(NON_ASCII + text, encoding="utf-8")
    return path


def _c_locale() -> dict[str, str]:
    """An environment whose locale encoding is ASCII: LC_ALL=C (which also stops Python's
    coercion of the C locale to C.UTF-8) and no UTF-8 mode or I/O encoding from outside."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUTF8", "PYTHONIOENCODING")}
    env.update(LC_ALL="C", LANG="C", PYTHONCOERCECLOCALE="0")
    return env


def _matrixrun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "utf8=0", "-m", "matrixrun", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=_c_locale(),
        cwd=cwd,
        timeout=240,
        check=False,
    )


def test_the_c_locale_really_is_ascii_for_the_subprocess() -> None:
    """The premise of the next test: in that environment Python would decode a file read
    without an encoding as ASCII, so a reader that forgot the encoding fails there."""
    probe = "import locale; print(locale.getpreferredencoding(False))"
    out = subprocess.run(
        [sys.executable, "-X", "utf8=0", "-c", probe],
        capture_output=True,
        text=True,
        env=_c_locale(),
        check=True,
    )
    assert out.stdout.strip() in ("ANSI_X3.4-1968", "ascii", "US-ASCII")


def test_a_spec_with_non_ascii_text_validates_and_plans_under_the_c_locale(
    tmp_path: Path,
) -> None:
    spec = _non_ascii_spec(tmp_path)
    checked = _matrixrun("validate", str(spec), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert f"{spec}: ok" in checked.stdout
    planned = _matrixrun("plan", str(spec), "--json", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr


@pytest.mark.slow
def test_a_spec_with_non_ascii_text_and_name_runs_under_the_c_locale(tmp_path: Path) -> None:
    """The run, and the run directory's readers after it: the file's name is not ASCII
    either (the C locale hands it over as lone surrogates, which settings.json must not
    receive)."""
    spec = _non_ascii_spec(tmp_path, "tiny-é.yaml")
    ran = _matrixrun("run", str(spec), "--rehearse", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    copy = (tmp_path / "run" / "spec.yaml").read_bytes()
    assert copy == spec.read_bytes()  # the copy is the file, byte for byte, not re-encoded
    recorded = (tmp_path / "run" / "spec.sha256").read_text(encoding="utf-8").strip()
    assert recorded == hashlib.sha256(spec.read_bytes()).hexdigest()
    settings = json.loads((tmp_path / "run" / "settings.json").read_text(encoding="utf-8"))
    assert settings["spec"]["spec_path"] == str(spec)
    analysed = _matrixrun("analyse", str(tmp_path / "run"), cwd=tmp_path)
    assert analysed.returncode == 0, analysed.stderr
    out = tmp_path / "elsewhere.md"
    rendered = _matrixrun("report", str(tmp_path / "run"), "--out", str(out), cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert "≥ café" in out.read_text(encoding="utf-8")


def test_the_flag_check_takes_its_lines_from_the_one_reading(tmp_path: Path) -> None:
    """`check_file` places issues with the loader's line map: it reads nothing itself (the
    file is gone by the time it runs) and still names the line of the bad flag."""
    path = tmp_path / "bad.yaml"
    text = TINY.read_text(encoding="utf-8").replace(
        "moe_runner_backend: flashinfer_cutedsl", "moe_runner_backend: no-such-backend"
    )
    path.write_text(text, encoding="utf-8")
    source = read_spec(path)
    path.unlink()
    (issue,) = check_file(source).errors
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "no-such-backend" in ln)
    assert (issue.path, issue.line) == (str(path), line)
    assert source.hash == spec_hash(text) and source.text == text


@pytest.mark.slow
def test_a_rehearsal_reads_the_spec_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`matrixrun run SPEC --rehearse` through the CLI in this process: the preview, the flag
    check, the run directory's copy and the plan's ids all take the one reading. Every read
    of the spec's path, as text or bytes, is counted."""
    spec = _non_ascii_spec(tmp_path)
    reads: list[str] = []
    read_text, read_bytes = Path.read_text, Path.read_bytes

    def counting_text(self: Path, *args: object, **kwargs: object) -> str:
        if self.resolve() == spec.resolve():
            reads.append("read_text")
        return read_text(self, *args, **kwargs)  # type: ignore[arg-type]

    def counting_bytes(self: Path) -> bytes:
        if self.resolve() == spec.resolve():
            reads.append("read_bytes")
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_text", counting_text)
    monkeypatch.setattr(Path, "read_bytes", counting_bytes)
    monkeypatch.chdir(tmp_path)
    code = main(["run", str(spec), "--rehearse", "--out", str(tmp_path / "run")])
    assert code == 0
    assert reads == ["read_bytes"]
    assert (tmp_path / "run" / "report.md").is_file()
