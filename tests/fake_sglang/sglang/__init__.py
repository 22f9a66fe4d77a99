"""A stand-in `sglang` package for tests: only `sglang.bench_serving` (see there)."""
