#!/usr/bin/env bash
# The load client's self-check benchmark (benchmarks/client.py) on the lent machine's 16 cores:
# no GPU needed, but a quiet many-core host is what the regression targets ask for and
# what spreading the client over several processes needs. One call:
#   device run, carry [.whl]:  MATRIXRUN_GIT_SHA=<commit> bash benchmarks/gpu/client.sh [client.py options]
# Writes $OUT/client.md (the table, as docs/benchmarks.md holds it) and $OUT/client.log.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket" ; uptime; command -v taskset; } \
  > "$OUT/machine.txt" 2>&1
cp docs/benchmarks.md /tmp/benchmarks.md
python3 benchmarks/client.py --write /tmp/benchmarks.md "$@" 2>&1 | tee "$OUT/client.log" | tail -40
echo "client.py exit ${PIPESTATUS[0]}"
sed -n '/<!-- bench-client:start -->/,/<!-- bench-client:end -->/p' /tmp/benchmarks.md > "$OUT/client.md"
