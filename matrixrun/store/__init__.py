"""The results store: every run and ingest indexed in SQLite (default) or PostgreSQL, for
`matrixrun history`, noise priors from earlier runs (`verify.noise_from: auto`) and the
regression check (docs/store.md).

Run directories stay the source of truth; the store is an index of them (`extract` reads
one, `record.rebuild`-style re-indexing reads many). `record.record_run` is the one call
`run`, `ingest` and `compare` make. Nothing is imported here, so `matrixrun history` loads
only the modules it asks with (the statistics stack is not among them).
"""
