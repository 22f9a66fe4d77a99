"""The regression check across engine versions (`matrixrun history --check`): the pure step
test, and the command's exit code on real H200 run directories whose engine version is
relabelled and whose throughput is scaled (the change a new engine build would make)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_store import copy_runs

from matrixrun.cli.main import main
from matrixrun.store.queries import LogStats, VersionGroup
from matrixrun.store.record import record_run
from matrixrun.store.regression import StepKind, check


def groups(
    levels: list[float], n: int = 4, noise: float = 0.02, seed: int = 1
) -> list[VersionGroup]:
    rng = random.Random(seed)
    return [
        VersionGroup(
            f"v{i}",
            f"2026-01-0{i + 1}",
            n,
            {
                x: LogStats.of([level * x * rng.lognormvariate(0, noise) for _ in range(n)])
                for x in (1.0, 8.0)
            },
        )
        for i, level in enumerate(levels)
    ]


def test_a_drop_beyond_the_threshold_is_a_regression_of_the_newest_version() -> None:
    result = check(groups([100, 101, 80]), higher_is_better=True, threshold=0.05)
    assert result.regressed()
    assert {s.kind for s in result.latest()} == {StepKind.REGRESSION}
    assert all(s.kind == StepKind.NONE for s in result.steps if s.after == "v1")


def test_the_same_level_again_is_no_step_and_a_rise_an_improvement() -> None:
    assert not check(groups([100, 100, 100]), higher_is_better=True).regressed()
    rise = check(groups([100, 130]), higher_is_better=True)
    assert {s.kind for s in rise.steps} == {StepKind.IMPROVEMENT} and not rise.regressed()
    # a latency rising is the regression
    assert check(groups([100, 130]), higher_is_better=False).regressed()


def test_a_small_change_or_a_noisy_one_is_not_called() -> None:
    assert not check(groups([100, 97]), higher_is_better=True, threshold=0.05).regressed()
    noisy = check(groups([100, 80], n=2, noise=0.5, seed=3), higher_is_better=True)
    assert not noisy.regressed()


def test_single_measurements_borrow_the_spread_of_the_others() -> None:
    gs = groups([100, 100, 100], n=3)
    gs.append(
        VersionGroup("v9", "2026-02-01", 1, {1.0: LogStats.of([70.0]), 8.0: LogStats.of([560.0])})
    )
    assert check(gs, higher_is_better=True).regressed()
    alone = [
        VersionGroup("a", "1", 1, {1.0: LogStats.of([1.0])}),
        VersionGroup("b", "2", 1, {1.0: LogStats.of([0.5])}),
    ]
    assert check(alone, higher_is_better=True).steps[0].kind == StepKind.UNTESTED


def relabel(run: Path, version: str, scale: float) -> None:
    """A run as if measured on another engine build whose throughput is `scale`× this one's."""
    env = json.loads((run / "env.json").read_text())
    for server in env["servers"].values():
        server["version"] = version
    (run / "env.json").write_text(json.dumps(env))
    lines = []
    for line in (run / "results.jsonl").read_text().splitlines():
        m = json.loads(line)
        if m.get("metrics"):
            m["metrics"]["output_throughput"] *= scale
        lines.append(json.dumps(m))
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("scale", "code"), [(0.5, 1), (1.0, 0)])
def test_history_check_exits_1_on_a_regression_of_the_newest_version(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], scale: float, code: int
) -> None:
    """Three runs per version: on this engine one launch's throughput can be twice another's
    (issue 32), so a single run per version cannot show even a 40% drop."""
    names = [f"h200_transformers_cb-{i}" for i in range(2, 8)]
    dirs = copy_runs(tmp_path, names)
    for d in dirs[3:]:
        relabel(d, "transformers 9.9.9", scale)
    for d in dirs:
        assert record_run(d, store_url) is None
    got = main(["history", "--store", store_url, "--arm", "cb", "--check"])
    out = capsys.readouterr().out
    assert got == code, out
    assert "```mermaid\nxychart-beta" in out
    assert ("regressed against" in out) == (code == 1)
