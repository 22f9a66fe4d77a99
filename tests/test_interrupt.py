"""Ctrl-C is never lost and never costs a measurement (`core/interrupt.py`).

The runner's real-process test (tests/test_runner.py) sends SIGINT from outside at a time it
cannot choose; the windows in which Python drops a Ctrl-C are microseconds wide (a finalizer
that runs under the default handler, a load that absorbs the cancellation asyncio's handler
sends). So these tests raise the signal from inside the run, at the instant that matters, with
`signal.raise_signal` (the process really receives SIGINT; its handler runs as for a Ctrl-C).
The seams: the rehearsal engine's `cell_extras` (the first thing the runner asks a server after
a load has ended, before the measurement is recorded) and `load.cell.run_load` (the load's
coroutine, wrapped so that the signal comes at its last step). Everything else is real: the
CLI in-process, the simulator as real server subprocesses, the load client over HTTP, the run
directory. On the code before core/interrupt.py, the first three cases exit 0 after measuring
every cell (the interrupt lost) or exit 130 with the interrupted cell's measurement gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from matrixrun.cli.main import main
from matrixrun.core import interrupt
from matrixrun.core.measurement import Measurement
from matrixrun.engines.sim import SimEngine
from matrixrun.load import cell as load_cell

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "specs" / "tiny.yaml"


@pytest.fixture(autouse=True)
def python_handles_sigint() -> Iterator[None]:
    """Python's own SIGINT handler for each test, as an interactive shell gives it. A process
    started in the background of a non-interactive shell (`cmd &`, nohup) inherits SIGINT
    ignored, and Python then leaves it ignored; the contract tested here starts from Python's
    default, and matrixrun puts back whatever it found (the ignore too)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def ctrl_c() -> None:
    signal.raise_signal(signal.SIGINT)


class CtrlCWhenCollected:
    """Raises SIGINT from its finalizer: a Ctrl-C whose handler runs inside a `__del__` (as
    it does when it lands in `BaseEventLoop.__del__` at the end of each load's asyncio.run,
    after asyncio has put the default handler back)."""

    def __del__(self) -> None:
        ctrl_c()


def _collect_one() -> None:
    CtrlCWhenCollected()  # no reference kept: finalized at once


# -- the handler's contract, without servers ----------------------------------------------


def test_outside_a_run_python_handles_sigint_as_ever() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        ctrl_c()
    interrupt.check()  # no-op outside `handling`


def test_a_sigint_found_ignored_is_left_ignored_after_a_run() -> None:
    """Started with SIGINT ignored (nohup, `cmd &` in a script), a run puts the ignore back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with interrupt.handling():
        assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_ctrl_c_anywhere_else_raises_at_once_and_the_handler_is_put_back() -> None:
    with pytest.raises(KeyboardInterrupt), interrupt.handling():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        ctrl_c()
        pytest.fail("not reached: the Ctrl-C raised where it landed")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    interrupt.check()  # the count ended with the block


def test_a_held_ctrl_c_is_raised_by_the_next_check() -> None:
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt), interrupt.handling():
        with interrupt.held():
            ctrl_c()
            steps.append("the held step finished")
        steps.append("after the hold")
        interrupt.check()
        steps.append("not reached")
    assert steps == ["the held step finished", "after the hold"]


#: what the finalizer cases provoke on purpose: pytest reports the swallowed KeyboardInterrupt
SWALLOWED = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@SWALLOWED
def test_a_ctrl_c_swallowed_by_a_finalizer_is_raised_at_the_end_of_handling() -> None:
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), interrupt.handling():
        _collect_one()  # "Exception ignored in ... __del__": the KeyboardInterrupt is gone
        done.append("went on past the swallowed interrupt")
    assert done == ["went on past the swallowed interrupt"]


def test_a_ctrl_c_stops_a_load_in_flight_and_its_cleanup_runs() -> None:
    seen: list[str] = []

    async def long_load() -> int:
        try:
            asyncio.get_running_loop().call_later(0.05, ctrl_c)
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return 1

    with pytest.raises(KeyboardInterrupt), interrupt.handling(), interrupt.measurement():
        interrupt.run(long_load())
    assert seen == ["cancelled"]


def test_a_load_that_absorbs_the_cancellation_keeps_its_result_and_stops_after() -> None:
    """The asyncio.Runner case: SIGINT at the load's last step, its cancellation absorbed by
    something the load awaits, the task returns normally. asyncio.run alone returns the result
    and forgets the Ctrl-C; here the result comes back and the measurement's end raises."""

    async def load_absorbing_at_its_end() -> int:
        await asyncio.sleep(0)
        ctrl_c()
        with contextlib.suppress(asyncio.CancelledError):  # what absorbs it
            await asyncio.sleep(0)
        return 7

    got: list[int] = []
    with pytest.raises(KeyboardInterrupt), interrupt.handling(), interrupt.measurement():
        got.append(interrupt.run(load_absorbing_at_its_end()))
    assert got == [7]
    # and what Python 3.11-3.13 does without this module (the race this file is about):
    assert asyncio.run(load_absorbing_at_its_end()) == 7  # no KeyboardInterrupt


# -- the whole run, with real servers -------------------------------------------------------


def _results(run_dir: Path) -> list[Measurement]:
    path = run_dir / "results.jsonl"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [Measurement.model_validate_json(line) for line in lines if line.strip()]


def _once(action: Callable[[], None]) -> Callable[[], None]:
    fired: list[bool] = []

    def fire() -> None:
        if not fired:
            fired.append(True)
            action()

    return fire


def _at_cell_extras(mp: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    """`action` when the runner asks the server for the first cell's extras: after the load
    has ended, before the measurement is recorded."""
    real = SimEngine.cell_extras
    fire = _once(action)

    def cell_extras(self: SimEngine, base_url: str, info: dict[str, Any]) -> dict[str, Any]:
        fire()
        return real(self, base_url, info)

    mp.setattr(SimEngine, "cell_extras", cell_extras)


def _at_the_loads_last_step(mp: pytest.MonkeyPatch) -> None:
    """SIGINT at the first load's last step, then an await that absorbs the cancellation."""
    real = load_cell.run_load
    fire = _once(ctrl_c)

    def run_load(config: Any) -> Coroutine[Any, Any, Any]:
        async def load() -> Any:
            result = await real(config)
            fire()
            with contextlib.suppress(asyncio.CancelledError):  # what absorbs it
                await asyncio.sleep(0)
            return result

        return load()

    mp.setattr(load_cell, "run_load", run_load)


def _during_launch(mp: pytest.MonkeyPatch) -> None:
    """SIGINT while the first server is being set up (after its health check)."""
    real = SimEngine.version
    fire = _once(ctrl_c)

    def version(self: SimEngine, info: dict[str, Any]) -> str | None:
        fire()
        return real(self, info)

    mp.setattr(SimEngine, "version", version)


WHEN: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], int]] = {
    # where the Ctrl-C lands -> the seam that puts it there, measurements kept
    "in a finalizer after a load": (lambda mp: _at_cell_extras(mp, _collect_one), 1),
    "at the load's last step, its cancellation absorbed": (_at_the_loads_last_step, 1),
    "after the load, before its record": (lambda mp: _at_cell_extras(mp, ctrl_c), 1),
    "while the first server is set up": (_during_launch, 0),
}


@pytest.mark.slow
@SWALLOWED
@pytest.mark.parametrize("when", list(WHEN))
def test_a_ctrl_c_stops_the_run_with_exit_130_keeping_what_was_measured(
    when: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seam, kept = WHEN[when]
    seam(monkeypatch)
    run_dir = tmp_path / "run"
    code = main(
        ["run", str(TINY), "--rehearse", "--out", str(run_dir), "--report", str(tmp_path / "r.md")]
    )
    err = capsys.readouterr().err
    assert code == 130, err[-2000:]
    assert "interrupted; everything measured so far is kept" in err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ms = _results(run_dir)
    # stopped at the next safe point: the measurement whose load had ended is on file, none
    # after it was started
    assert len(ms) == kept, [m.cell_id for m in ms]
    assert all(m.ok for m in ms)
    assert not list((run_dir / "pids").glob("*.pid"))  # every server stopped
    assert not (run_dir / "verdict.json").exists()
