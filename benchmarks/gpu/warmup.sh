#!/usr/bin/env bash
# benchmarks/gpu/warmup.py on the lent H200 machine, in one call: install the carried wheels,
# build the model, run the launches, leave warmup.jsonl / warmup.md / serve.log in $OUT.
#   device run, carry [.whl]:  bash benchmarks/gpu/warmup.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/smi.csv"
start=$(date +%s)
python3 benchmarks/gpu/make_model.py /tmp/llama-0.8b 2>&1 | tail -2
echo "model built in $(( $(date +%s) - start )) s"
python3 benchmarks/gpu/warmup.py --model /tmp/llama-0.8b --out "$OUT" "$@"
