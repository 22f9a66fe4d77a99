"""The run directory's results.jsonl: a crash mid-write loses at most the record in flight.

A torn last line is simulated by cutting the file's bytes, which is what a crash between
`write` and `fsync` leaves behind (no crash needs staging)."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.rundir.results import RunDir


def measurement(n: int) -> Measurement:
    return Measurement(
        cell_id=f"c{n}",
        point_id="p",
        arm="a",
        group_id="g",
        point={"concurrency": n},
        instance="g#1",
        extra={"note": "x" * 40},
    )


def run_dir_with(tmp_path: Path, n: int) -> RunDir:
    rd = RunDir(tmp_path / "run").create()
    for i in range(1, n + 1):
        rd.append(measurement(i))
    return rd


def test_a_torn_last_line_is_skipped_and_the_next_append_starts_a_new_line(
    tmp_path: Path,
) -> None:
    rd = run_dir_with(tmp_path, 3)
    whole = rd.results_file.read_bytes()
    torn = measurement(4).model_dump_json().encode()[:37]  # cut mid-record, no newline
    rd.results_file.write_bytes(whole + torn)

    assert rd.measurements() == [measurement(i) for i in (1, 2, 3)]

    rd.append(measurement(5))  # the resumed run measures on
    assert rd.measurements() == [measurement(i) for i in (1, 2, 3, 5)]
    lines = rd.results_file.read_text().splitlines()
    assert len(lines) == 4 and all(Measurement.model_validate_json(x) for x in lines)
    assert rd.results_file.read_bytes().startswith(whole)  # nothing complete was rewritten


def test_a_whole_record_that_lost_only_its_newline_is_kept(tmp_path: Path) -> None:
    rd = run_dir_with(tmp_path, 2)
    rd.results_file.write_bytes(rd.results_file.read_bytes().removesuffix(b"\n"))
    assert rd.measurements() == [measurement(1), measurement(2)]
    rd.append(measurement(3))
    assert rd.measurements() == [measurement(i) for i in (1, 2, 3)]


def test_a_bad_line_before_the_last_is_an_error_naming_it(tmp_path: Path) -> None:
    rd = run_dir_with(tmp_path, 3)
    lines = rd.results_file.read_text().splitlines()
    lines[1] = lines[1][:20]
    rd.results_file.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"results\.jsonl:2: not a measurement record"):
        rd.measurements()
