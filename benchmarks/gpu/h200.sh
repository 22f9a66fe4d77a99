#!/usr/bin/env bash
# One whole experiment on the lent H200 machine, in one call (its machine stays warm only 30 s):
# install the carried wheels, build the model, run the spec (or RESUME a carried run
# directory), pack the run directory into $OUT.
#   device run, carry [.whl]:  bash benchmarks/gpu/h200.sh spec/h200_transformers_cb.yaml
# .whl comes from ../shared/gpu/fetch_wheels.sh .whl (run on a machine with the registry).
# The device's copy of .git is the session's first one: pass the commit the tree is at as a
# literal (run `git rev-parse HEAD` here, paste its output),
#   MATRIXRUN_GIT_SHA=<that sha> bash benchmarks/gpu/h200.sh SPEC
# so env.json records it; `$(git rev-parse HEAD)` in the device command reads the stale .git.
set -uo pipefail
SPEC=${1:?usage: h200.sh SPEC [matrixrun run options]}; shift
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total,serial --format=csv | tee "$OUT/smi.csv"
python3 benchmarks/gpu/make_model.py /tmp/llama-0.8b > "$OUT/make_model.log" 2>&1
grep -E "^(greedy|decisive|model:)" "$OUT/make_model.log" || tail -5 "$OUT/make_model.log"
python3 -c "from transformers.cli.transformers import main; main()" serve --help \
  > "$OUT/serve_help.txt" 2>&1
name=$(basename "$SPEC" .yaml)
start=$(date +%s)
# SIGINT before the call limit: the run keeps what it measured and stops its servers, and the
# tar below still happens (continue it in a later call with --resume on the carried directory)
# RESUME=DIR (a run directory carried into the tree, e.g. .h200run/NAME) continues that run
if [[ -n "${RESUME:-}" ]]; then
  rm -rf "/tmp/$name" && cp -r "$RESUME" "/tmp/$name" && set -- --resume "/tmp/$name" "$@"
else
  set -- --out "/tmp/$name" "$@"
fi
timeout -s INT "${RUN_LIMIT_S:-480}" python3 -m matrixrun run "$SPEC" "$@" 2>&1 | tee "$OUT/run.log" | tail -40
echo "run exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
tar czf "$OUT/$name.tgz" -C /tmp "$name"
