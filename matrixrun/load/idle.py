"""Stretches when the server sent nothing while requests were waiting on it.

A server that stops answering with requests outstanding (a scheduler stuck, a request the
server never read: on the H200, connections the server had closed held 12 of 16 requests to
the cell's cap) shows in no metric: the requests that did finish look normal, and the rest
end as failures or timeouts with no word of the silence. The records say it: every chunk's
arrival is a byte from the server, and every request sent and not yet ended is outstanding.
A long stretch with requests outstanding and no chunk is named in the measurement
(`extra.idle_gaps`) and in the report, so a reader sees "the server sent nothing for 12.3 s
while 12 requests were outstanding" beside the numbers.

Pure: records in, gaps out, in the records' time (the server's, for a rehearsal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrixrun.load.client import NEVER_SENT, is_capped
from matrixrun.load.records import RequestRecord

#: A silence shorter than this (modelled seconds) is not named: a long prompt's prefill at
#: concurrency 1 can keep a real server quiet for a second or two without anything wrong.
IDLE_MIN_S = 3.0
#: ... nor one shorter than this share of the cell's span: a ten-minute cell's few quiet
#: seconds are not what a reader must know about it.
IDLE_MIN_SHARE = 0.1


@dataclass(frozen=True)
class IdleGap:
    """From `at` for `length` seconds (relative to the cell's start) the server sent nothing
    while `outstanding` requests (the most at once in that stretch) waited on it."""

    at: float
    length: float
    outstanding: int


def _events(records: Sequence[RequestRecord]) -> list[tuple[float, int, int]]:
    """(time, kind, change in outstanding) sorted by time: kind 0 a request sent, 1 a byte
    from the server (a chunk, or the end of a request the server ended), 2 a request the
    client ended (its timeout, the cap). A request never sent is none of these."""
    out: list[tuple[float, int, int]] = []
    for r in records:
        if r.error.startswith(NEVER_SENT):
            continue
        out.append((r.start, 0, 1))
        out.extend((r.start + t, 1, 0) for t in r.chunk_times)
        client_ended = is_capped(r.error) or r.error.startswith("timed out")
        out.append((r.end, 2 if client_ended else 1, -1))
    return sorted(out)


def idle_gaps(records: Sequence[RequestRecord], min_s: float) -> list[IdleGap]:
    """Every stretch longer than `min_s` during which at least one request was outstanding
    and no byte came from the server, in time order."""
    gaps: list[IdleGap] = []
    outstanding = most = 0
    quiet_since = 0.0

    def close(t: float) -> None:
        if outstanding > 0 and t - quiet_since > min_s:
            gaps.append(IdleGap(quiet_since, t - quiet_since, most))

    for t, kind, change in _events(records):
        # a byte ends a silence; so does the client ending the last outstanding request
        ends = kind == 1 or (kind == 2 and outstanding + change == 0)
        if ends:
            close(t)
        begins = outstanding == 0 and change > 0
        outstanding += change
        if ends or begins:
            quiet_since, most = t, outstanding
        else:
            most = max(most, outstanding)
    return gaps


def threshold(records: Sequence[RequestRecord], min_s: float) -> float:
    """The length a gap must exceed to be named: `min_s` (the caller's `IDLE_MIN_S`, in the
    records' time) and `IDLE_MIN_SHARE` of the records' span, whichever is longer."""
    span = max((r.end for r in records), default=0.0)
    return max(min_s, IDLE_MIN_SHARE * span)
