"""The public Mooncake trace format's one fixed number (FAST'25 release): how many tokens one
`hash_ids` entry stands for.

Here, in core, because two stages need it and one may not import the other: the load client
builds a replayed prompt from blocks of this many token ids (`load/datasets/trace.py`), and
the report's setup section says so (`report/sections/setup.py`), which may not import `load/`
(rendering a report loads no stage that measures: tests/test_layout.py)."""

from __future__ import annotations

#: Tokens per hash id (Mooncake's block size).
BLOCK = 512
