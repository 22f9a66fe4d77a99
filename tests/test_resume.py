"""Resuming what a killed run left: its servers (pid files), a stage-2 round it was inside,
and a torn last record. Real processes, the real verify policy; no simulator needed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from test_verify import m, setup

from matrixrun.core.measurement import Measurement
from matrixrun.engines.procs import PidRecord, group_alive, record_for, stop_leftovers
from matrixrun.run.resume import stop_left_servers, unfinished_round
from matrixrun.rundir.results import RunDir
from matrixrun.verify import Policy, Schedule, Unfinished


class Killed(Exception):
    """Stands in for SIGKILL of the runner: nothing after it runs."""


class ListJournal:
    def __init__(self, events: list[dict[str, object]]) -> None:
        self.events = events

    def round_begun(self, round_no: int, groups: list[str]) -> None:
        self.events.append({"event": "round_begin", "round": round_no, "groups": groups})

    def group_done(self, round_no: int, group_id: str) -> None:
        self.events.append({"event": "round_group_done", "round": round_no, "group": group_id})


TRUTH = {("base", 1): 100.0, ("base", 4): 100.0, ("base", 16): 100.0,
         ("cand", 1): 103.0, ("cand", 4): 99.0, ("cand", 16): 110.0}  # fmt: skip


def _driver(kill_after: int | None):  # type: ignore[no-untyped-def]
    """A consumer of the verify schedule that measures TRUTH (±1% by round) as the runner
    consumes it (`Measurer.measure_launch`: a rerun's audit line first, a stage-2 measurement tagged
    with its round); raises Killed after `kill_after` stage-2 measurements."""
    spec, plan = setup("{threshold: 3%, surprise: 60%, max_runs: 3, warm_rerun: false}")
    ms: list[Measurement] = []
    events: list[dict[str, object]] = []
    launches: dict[str, int] = {}
    state = {"stage2": 0, "kill_after": kill_after}
    policy = Policy(spec, plan)

    def run(unfinished: Unfinished | None = None) -> None:
        schedule = Schedule(policy, lambda: ms, ListJournal(events), unfinished)
        for launch in schedule.launches():
            queue = launch.next()
            if queue:
                launches[launch.group.arm] = launches.get(launch.group.arm, 0) + 1
            while queue:
                w = queue.pop(0)
                c = w.cell
                n = sum(1 for x in ms if x.cell_id == c.cell_id)
                if w.why is not None:
                    events.append(
                        {"event": "verify", "stage": w.stage, "round": w.round_no,
                         "cell": c.cell_id, "reason": w.reason, "attempt": n + 1}
                    )  # fmt: skip
                if w.reason != "first":
                    if state["kill_after"] is not None and state["stage2"] >= state["kill_after"]:
                        raise Killed
                    state["stage2"] = int(state["stage2"] or 0) + 1
                # by round, not by launch: a killed launch must not change what is measured
                r = w.round_no if w.stage == 2 else None
                wobble = 1.0 + 0.01 * (-1) ** ((r or 0) + int(c.x) + (c.arm == "cand"))
                rec = m(plan, c.arm, int(c.x), TRUTH[(c.arm, int(c.x))] * wobble,
                        launches[launch.group.arm], w.reason, n + 1)  # fmt: skip
                ms.append(rec if r is None else rec.model_copy(update={"extra": {"round": r}}))
                if not queue:
                    queue.extend(launch.next())

    return policy, ms, events, run, state


def _work(ms: list[Measurement]) -> Counter[tuple[str, str]]:
    return Counter((x.cell_id, x.reason) for x in ms)


def _round_complete(events: list[dict[str, object]], ms: list[Measurement]) -> list[str]:
    """What a finished stage 2 must show: every group of every begun round done, every
    rerun the policy noted measured in its round, no cell rerun twice in one round."""
    problems = []
    begun = [e for e in events if e["event"] == "round_begin"]
    for b in begun:
        done = {e["group"] for e in events if e["event"] == "round_group_done"
                and e["round"] == b["round"]}  # fmt: skip
        missing = set(b["groups"]) - done  # type: ignore[arg-type]
        if missing:
            problems.append(f"round {b['round']} never finished groups {sorted(missing)}")
    tagged = Counter((x.cell_id, x.extra.get("round")) for x in ms if x.reason != "first")
    for e in events:
        if e["event"] == "verify" and e["stage"] == 2 and not tagged[(e["cell"], e["round"])]:
            problems.append(f"noted rerun of {e['cell']} in round {e['round']} never measured")
    problems += [f"{key} measured {n} times" for key, n in tagged.items() if n > 1]
    return problems


def test_a_run_killed_inside_a_round_finishes_that_round_when_resumed() -> None:
    """Killed before each stage-2 measurement in turn, then resumed: every round that began
    is finished (the bug: the round counted as done, its remaining groups never ran), the
    reruns already chosen are measured, nothing is rerun twice in a round. A kill before any
    rerun of a round gives exactly the uninterrupted run's work."""
    _, ms, events, run, _ = _driver(None)
    run()
    clean = _work(ms)
    stage2 = sum(1 for x in ms if x.reason != "first")
    rounds = {x.extra.get("round") for x in ms} - {None}
    assert stage2 >= 6 and len(rounds) == 2, "the test needs stage 2 to do some work"
    assert _round_complete(events, ms) == []

    for kill_after in range(stage2):
        _, ms, events, run, state = _driver(kill_after)
        with pytest.raises(Killed):
            run()
        unfinished = unfinished_round(events, ms)
        assert unfinished is not None and unfinished.groups, "the kill left a round open"
        before = len(ms)
        state["kill_after"] = None
        run(unfinished)
        assert len(ms) > before, f"killed after {kill_after}: the resume measured nothing"
        assert _round_complete(events, ms) == [], f"killed after {kill_after}"
        if kill_after == 0:
            assert _work(ms) == clean


def test_journal_read_back() -> None:
    events: list[dict[str, object]] = [
        {"event": "round_begin", "round": 1, "groups": ["g1", "g2"]},
        {"event": "round_group_done", "round": 1, "group": "g1"},
    ]
    _, plan = setup()
    g2 = next(g for g in plan.groups if g.arm == "cand")
    rerun = m(plan, "cand", 4, 100.0, 2, "undecided", 2).model_copy(update={"extra": {"round": 1}})
    assert unfinished_round(events, [rerun]) == Unfinished(1, ("g2",), frozenset({rerun.cell_id}))
    events.append({"event": "round_group_done", "round": 1, "group": "g2"})
    assert unfinished_round(events, []) == Unfinished(1, (), frozenset())
    # a torn record of g2 reopens its part of the round
    assert unfinished_round(events, [], torn_group="g2") == Unfinished(1, ("g2",), frozenset())
    assert unfinished_round([], []) is None
    assert g2.group_id  # the plan's ids are what the journal carries


def test_a_run_measured_again_after_it_fell_behind_is_owed_to_its_round() -> None:
    """A stage-2 run that fell behind on a busy host (`slowed`) is measured again at once, in
    its round, with its reason. A torn record of that second run reopens the round *with* it
    pending: the resume measures it first, as the same attempt of the same round. The bug (CI,
    a whole-suite run beside other jobs): only the policy's own `verify` notes counted, so
    the round looked done and the policy chose the run again in the round after, labelled
    so, and sometimes other work first."""
    _, plan = setup()
    g2 = next(g for g in plan.groups if g.arm == "cand")
    first = m(plan, "cand", 4, 100.0, 1)
    behind = m(plan, "cand", 4, 100.0, 2, "undecided", 2).model_copy(update={"extra": {"round": 1}})
    events: list[dict[str, object]] = [
        {"event": "round_begin", "round": 1, "groups": [g2.group_id]},
        {"event": "verify", "stage": 2, "round": 1, "cell": first.cell_id,
         "reason": "undecided", "attempt": 2},
        {"event": "slowed", "cell": first.cell_id, "attempt": 2, "reason": "undecided",
         "round": 1},
        {"event": "round_group_done", "round": 1, "group": g2.group_id},
    ]  # fmt: skip
    # the second run's record was torn: its group's part of the round is reopened, and owed
    assert unfinished_round(events, [first, behind], torn_group=g2.group_id) == Unfinished(
        1, (g2.group_id,), frozenset({first.cell_id}), ((first.cell_id, "undecided"),)
    )
    # measured again, as attempt 3: nothing is owed
    again = m(plan, "cand", 4, 100.0, 3, "undecided", 3).model_copy(update={"extra": {"round": 1}})
    done = unfinished_round(events, [first, behind, again], torn_group=g2.group_id)
    assert done is not None and done.pending == ()
    # a stage-1 slowdown (no round) and one of an audit log from before `round` was written
    # owe the round nothing
    for extra in ({"round": None}, {}):
        old = [e for e in events if e["event"] != "slowed"]
        old.insert(
            2,
            {"event": "slowed", "cell": first.cell_id, "attempt": 2, "reason": "undecided"} | extra,
        )
        got = unfinished_round(old, [first, behind], torn_group=g2.group_id)
        assert got is not None and got.pending == ()


# ------------------------------------------------------------------------------ leftovers


def _orphan() -> subprocess.Popen[bytes]:
    """A stand-in server: its own session, and a child of its own (both must be stopped)."""
    return subprocess.Popen(
        [sys.executable, "-c", "import subprocess,sys,time;"
         "subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']);"
         "time.sleep(60)"],
        start_new_session=True,
    )  # fmt: skip


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_resume_stops_a_left_server_and_its_children(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run").create()
    proc = _orphan()
    try:
        time.sleep(0.3)
        rd.pid_file("g1#1").write_text(record_for(proc.pid).to_text())
        notes = stop_left_servers(rd)
        assert notes and "stopped server g1#1" in notes[0]
        assert proc.wait(5) is not None
        deadline = time.monotonic() + 5
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_alive(proc.pid), "the server's child outlived it"
        assert not list((rd.path / "pids").iterdir())
        assert any(e["event"] == "leftover_server" and e["stopped"] for e in rd.events())
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_reused_pid_is_never_signalled(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    proc = _orphan()
    try:
        real = record_for(proc.pid)
        assert real.start_ticks is not None
        (pids / "g1#1.pid").write_text(PidRecord(proc.pid, real.start_ticks + 1).to_text())
        (pids / "g1#2.pid").write_text(f"{proc.pid}\n")  # an old bare pid: cannot be checked
        other = PidRecord(proc.pid, real.start_ticks, "another-node")
        (pids / "g1#3.pid").write_text(other.to_text())  # a Slurm node's: not ours
        left = {x.instance: x for x in stop_leftovers(pids)}
        assert not left["g1#1"].stopped and "another process" in left["g1#1"].why
        assert not left["g1#2"].stopped and "cannot be checked" in left["g1#2"].why
        assert proc.poll() is None  # still running: it was not ours to stop
        assert (pids / "g1#2.pid").exists() and not (pids / "g1#1.pid").exists()
        assert "g1#3" not in left and (pids / "g1#3.pid").exists()
    finally:
        os.killpg(proc.pid, 9)
        proc.wait(5)


def test_a_torn_tail_is_cut_reported_and_the_next_record_starts_a_line(tmp_path: Path) -> None:
    _, plan = setup()
    rd = RunDir(tmp_path / "run").create()
    # as read back (an infinite request rate is null in JSON)
    one = Measurement.model_validate_json(m(plan, "base", 1, 100.0).model_dump_json())
    two = Measurement.model_validate_json(m(plan, "cand", 4, 99.0).model_dump_json())
    rd.append(one)
    whole = two.model_dump_json().encode()
    with rd.results_file.open("ab") as fh:
        fh.write(whole[: len(whole) // 2])
    assert rd.measurements() == [one]
    torn = rd.mend()
    assert torn is not None and torn.cell_id == two.cell_id
    assert "measured again" in torn.sentence(rd.results_file)
    rd.append(two)
    assert rd.measurements() == [one, two]
    # a torn event line does not swallow the next event
    with rd.events_file.open("ab") as fh:
        fh.write(b'{"t": "x", "ev')
    rd.event("after")
    assert [e["event"] for e in rd.events()] == ["after"]
    # torn inside a multi-byte character: still readable
    with rd.results_file.open("ab") as fh:
        fh.write('{"cell_id": "é'.encode()[:-1])
    assert rd.measurements() == [one, two]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigkill_of_the_runner_then_resume_leaves_no_server_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """The issue's probe: SIGKILL the runner mid-run; its simulator server lives on (its own
    session); the resumed run stops it, then measures only what is missing."""
    from test_runner import ROOT, _wait_for_lines, mr, read_results

    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "matrixrun", "run", "tests/specs/tiny.yaml", "--rehearse"]
    proc = subprocess.Popen(
        [*argv, "--out", str(run_dir), "--report", str(tmp_path / "r.md")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for_lines(run_dir / "results.jsonl", 1, proc, 120)
    proc.kill()
    proc.communicate(timeout=30)
    left = [PidRecord.from_text(p.read_text()) for p in (run_dir / "pids").glob("*.pid")]
    orphans = [r.pid for r in left if r is not None and group_alive(r.pid)]
    assert orphans, "the killed run should have left its server running"
    before = read_results(run_dir)

    res = mr(*argv[3:], "--resume", str(run_dir), "--report", str(tmp_path / "r.md"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "that an interrupted run left running" in res.stderr
    assert not any(group_alive(pid) for pid in orphans)
    after = read_results(run_dir)
    assert after[: len(before)] == before
    # a cell's first run measured again after a `slowed` event is a busy host's re-measure
    # (issue 44, core/keeping.py), not the resume measuring it twice
    again = {(e["cell"], e["attempt"]) for e in RunDir(run_dir).events() if e["event"] == "slowed"}
    firsts = sorted(
        x.cell_id for x in after if x.reason == "first" and (x.cell_id, x.attempt) not in again
    )
    assert len(firsts) == 4 == len(set(firsts))
    assert not list((run_dir / "pids").glob("*.pid"))


# ------------------------------------------------------------------- a torn stage-2 record


@pytest.mark.slow
@pytest.mark.parametrize("spec_name", ["tiny", "crossing"])
def test_a_torn_stage_two_record_is_measured_again_exactly_once(
    tmp_path: Path, spec_name: str
) -> None:
    """A whole rehearsal, then its last stage-2 record torn (the bytes cut mid-line, as a kill
    inside the write leaves them; the audit log kept): the resume measures that run first — the
    same cell, attempt, reason and round — and loses or repeats nothing. The bug: a rerun
    counted by cell made a torn second bisection run (its first survived) look measured, and the
    resume
    measured nothing ("23 of 24 measurements remain"). What the policy chooses after the
    re-measured run depends on its new number, so further new attempts may follow it."""
    from matrixrun.run.experiment import run_experiment

    spec = Path(__file__).parent / "specs" / f"{spec_name}.yaml"
    run_dir = tmp_path / "run"
    run_experiment(spec, out=run_dir, rehearse=True)
    rd = RunDir(run_dir)
    clean = rd.measurements()
    stage2 = [i for i, x in enumerate(clean) if x.extra.get("round") is not None]
    assert stage2, "the premise: stage 2 measured something"
    lines = rd.results_file.read_bytes().splitlines(keepends=True)
    assert len(lines) == len(clean)
    last = stage2[-1]
    torn = clean[last]
    kept = lines[:last] + lines[last + 1 :]
    rd.results_file.write_bytes(b"".join(kept) + lines[last][: len(lines[last]) // 2])

    summary = run_experiment(spec, resume=run_dir, rehearse=True)
    after = RunDir(run_dir).measurements()
    assert any("measured again" in n for n in summary.notes)
    key = lambda x: (x.cell_id, x.attempt, x.reason, x.extra.get("round"))  # noqa: E731
    # the resume's first measurement is the torn run, measured again as it was chosen
    assert summary.measured >= 1, "the resume measured nothing"
    assert key(after[len(clean) - 1]) == key(torn)
    # nothing measured before is lost or measured twice; what the policy chooses after it (on
    # the new run's number) are new attempts, never repeats of a kept one
    assert not Counter(map(key, clean)) - Counter(map(key, after)), "a run was lost"
    assert len({(x.cell_id, x.attempt) for x in after}) == len(after), "an attempt twice"
