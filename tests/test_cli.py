"""The CLI through a real subprocess: exit codes and the one-sentence errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mr(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_validate_ok_and_bad(tmp_path: Path) -> None:
    ok = mr("validate", "spec/glm5_cutedsl.yaml")
    assert ok.returncode == 0, ok.stderr
    assert "10 cells, 2 launches" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "spec/glm5_cutedsl.yaml").read_text().replace("max_runs", "max_rn"))
    res = mr("validate", "spec/glm5_cutedsl.yaml", str(bad))
    assert res.returncode == 2
    assert f"{bad}:17: verify.max_rn: unknown key (did you mean 'max_runs'?)" in res.stderr


def test_plan_json_round_trips() -> None:
    from matrixrun.plan import Plan

    res = mr("plan", "spec/glm5_cutedsl.yaml", "--json")
    assert res.returncode == 0, res.stderr
    plan = Plan.model_validate(json.loads(res.stdout))
    assert plan.cost.cells == 10 and len(plan.spec_hash) == 16


def test_plan_text_mentions_launches_and_cost() -> None:
    res = mr("plan", "tests/specs/multi.yaml")
    assert res.returncode == 0, res.stderr
    assert "best case (nothing surprising or undecided): 12 launches" in res.stdout
    assert "worst case (every cell to max_runs): 42 launches" in res.stdout
    assert "times from the spec's estimate block" in res.stdout


def test_schema_check_detects_stale(tmp_path: Path) -> None:
    stale = tmp_path / "schema.json"
    stale.write_text("{}\n")
    res = mr("schema", "--check", "--out", str(stale))
    assert res.returncode == 1 and "is stale" in res.stderr
    assert mr("schema", "--out", str(stale)).returncode == 0
    assert mr("schema", "--check", "--out", str(stale)).returncode == 0


def test_committed_schema_is_current() -> None:
    from matrixrun.spec import schema_text

    assert (ROOT / "spec" / "schema.json").read_text() == schema_text(), (
        "spec/schema.json is stale: run `nox -s schema` and commit it"
    )


def test_committed_specs_validate_against_schema() -> None:
    import jsonschema
    from ruamel.yaml import YAML

    schema = json.loads((ROOT / "spec" / "schema.json").read_text())
    for path in sorted((ROOT / "spec").glob("*.yaml")):
        jsonschema.validate(YAML(typ="safe").load(path.read_text()), schema)


def test_missing_spec_exit_2() -> None:
    res = mr("plan", "no/such.yaml")
    assert res.returncode == 2
    assert "no/such.yaml: cannot read the spec" in res.stderr


def test_unknown_command_exit_2() -> None:
    assert mr("frobnicate").returncode == 2


def test_a_single_spec_error_is_printed_as_its_location(tmp_path: Path) -> None:
    """Any command that loads a spec prints each issue as `path:line: key: message` (no
    `matrixrun:` prefix), whether there is one issue or several."""
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "spec/glm5_cutedsl.yaml").read_text().replace("max_runs", "max_rn"))
    res = mr("plan", str(bad))
    assert res.returncode == 2
    assert res.stderr.splitlines()[0].startswith(f"{bad}:17: verify.max_rn: unknown key")
    assert "matrixrun:" not in res.stderr
