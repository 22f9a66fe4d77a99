"""Every test gets its own results store (MATRIXRUN_STORE under its tmp_path), so no test
writes to the user's store ($XDG_DATA_HOME/matrixrun/store.sqlite) and no test's runs lend
their noise to another's (`verify.noise_from: auto`).

Fixtures several test modules share: `slurm` (a Slurm cluster that answers, else a skip, or a
failure under MATRIXRUN_SLURM_TESTS=require), and one rehearsal of a spec that carries secrets
(`SECRETS`: a server flag, an arm flag, a variable in engine.env) run once here and once through
the Slurm executor, for test_redact.py (no secret in any file on either path) and
test_session.py (both paths write the same settings and report head). Each is run once a
session: two tiny rehearsals, about 40 s in all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from store_backends import store_url  # noqa: F401 - a fixture for the store's tests

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SLURM_CONF = "/tmp/slurm-local/etc/slurm.conf"

#: engine.args' api_key (a value that looks like a key), an arm's flag and a variable of
#: engine.env (values only their names mark as secret): none may reach a file of the run.
SECRET = "sk-test0123456789abcdefXYZ"
FLAG_SECRET = "s3cr3t-flag-7c1e9a4d2b"
ENV_SECRET = "s3cr3t-env-5f8b3a6e0c"
SECRETS = (SECRET, FLAG_SECRET, ENV_SECRET)


@pytest.fixture(autouse=True)
def _own_results_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = tmp_path / "results-store.sqlite"
    monkeypatch.setenv("MATRIXRUN_STORE", str(store))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    return store


def slurm_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SLURM_CONF", DEFAULT_SLURM_CONF)
    return env


def why_no_slurm() -> str | None:
    """None when a cluster answers; else why the Slurm tests cannot run here."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        return "submitit is not installed (pip install 'matrixrun[slurm]')"
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "no Slurm client on PATH (.ci/run starts a local cluster: see .ci/run)"
    env = slurm_env()
    if not Path(env["SLURM_CONF"]).exists():
        return f"no Slurm config at {env['SLURM_CONF']} (start_local_slurm.sh writes it)"
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo did not answer: {exc}"
    states = out.stdout.split()
    if out.returncode != 0 or not any(s in ("idle", "mixed", "allocated") for s in states):
        return f"no Slurm node is up (sinfo: {(out.stdout + out.stderr).strip()[:200]})"
    return None


@pytest.fixture(scope="session")
def slurm() -> dict[str, str]:
    """The environment a Slurm client needs; skips (or fails, when required) without one."""
    why = why_no_slurm()
    if why is not None:
        if os.environ.get("MATRIXRUN_SLURM_TESTS") == "require":
            pytest.fail(f"MATRIXRUN_SLURM_TESTS=require but {why}")
        pytest.skip(f"no Slurm cluster: {why}")
    return slurm_env()


@dataclass(frozen=True)
class Rehearsal:
    """A finished `matrixrun run --rehearse`: its run directory, the report it published
    (--report) and what it printed."""

    run_dir: Path
    report: Path
    code: int
    output: str


@pytest.fixture(scope="session")
def secret_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/specs/tiny.yaml with `SECRETS` in engine.args, the candidate's flags and
    engine.env; one file, so both paths record the same spec path."""
    text = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()
    for old, new in (
        (
            "args: {tp: 1}}",
            f"args: {{tp: 1, api_key: {SECRET}}}, env: {{HF_TOKEN: {ENV_SECRET}}}}}",
        ),
        ("flashinfer_cutedsl}", f"flashinfer_cutedsl, admin_api_key: {FLAG_SECRET}}}"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    spec = tmp_path_factory.mktemp("secret-spec") / "secret.yaml"
    spec.write_text(text)
    return spec


def rehearse(spec: Path, where: Path, env: dict[str, str], *args: str) -> Rehearsal:
    """`matrixrun run SPEC --rehearse` into where/run, its report to where/r.md, with a
    results store of its own (a session fixture runs outside `_own_results_store`)."""
    env = {**env, "MATRIXRUN_STORE": str(where / "store.sqlite"), "XDG_DATA_HOME": str(where)}
    run_dir, report = where / "run", where / "r.md"
    res = subprocess.run(
        [sys.executable, "-m", "matrixrun", "run", str(spec), "--rehearse", "--out",
         str(run_dir), "--report", str(report), *args],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    return Rehearsal(run_dir, report, res.returncode, res.stdout + res.stderr)


@pytest.fixture(scope="session")
def rehearsed_here(secret_spec: Path, tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    """`secret_spec` rehearsed on this machine (the local executor)."""
    return rehearse(secret_spec, tmp_path_factory.mktemp("here"), dict(os.environ))


@pytest.fixture(scope="session")
def rehearsed_on_slurm(
    secret_spec: Path, slurm: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Rehearsal:
    """`secret_spec` rehearsed through the Slurm executor (one job per group and stage)."""
    return rehearse(secret_spec, tmp_path_factory.mktemp("slurm"), slurm, "--executor", "slurm")
