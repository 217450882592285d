#!/usr/bin/env bash
# Accelerator readiness in one run (<= 10 minutes): correctness against the CPU, then timings on the device.
#
#   benchmarks/accelerator_check.sh             # on a GPU/TPU machine (fails early when jax sees no accelerator)
#   benchmarks/accelerator_check.sh --dry-run   # on a CPU: same steps, CPU against itself, small sizes
#
# Steps (each under its own timeout; figures and logs go to $OUT, default ./accelerator_check_out):
#   1. benchmarks/accelerator_check.py  correctness (smoothing, scoring, rule filter, vmapped training) vs the
#      CPU backend, smoothing bytes/s vs the device's memory bandwidth, relevance_full GFLOP/s   (240 s)
#   2. benchmarks/train_vmap.py         15 models vmapped vs sequential (ratio printed)           (150 s)
#   3. benchmarks/encoder_tune.py       one encoder-tuning step: all layers vs the top 1-3         (90 s)
#   4. benchmarks/tune_vmap.py          15 tuned encoders (3 seeds x 5 folds) together vs one by one (90 s)
#   5. benchmarks/cross_encoder.py      cross-encoder pairs/s, scoring and training               (90 s)
#   6. python -m riskrank_jax.sweep     UltraTool sweep (tuned-encoder rows included), wall time  (the rest)
# PYTHON selects the interpreter (default: .venv/bin/python if present, else python3); ACCEL_BUDGET the seconds
# for all steps (default 600); OUT the folder for figures and logs.
# Exit status: 0 when every step passed, 2 when a correctness check failed, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
DRY=0
for a in "$@"; do
  case "$a" in
    --dry-run) DRY=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $a (use --dry-run or --help)" >&2; exit 1 ;;
  esac
done
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
OUT=${OUT:-$PWD/accelerator_check_out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
START=$(date +%s)
BUDGET=${ACCEL_BUDGET:-600}  # seconds for all steps; the sweep gets what the others leave
STATUS=0
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() {  # step NAME TIMEOUT CMD...: run with a timeout, log to $OUT/NAME.log, record rc and seconds
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  if [ "$limit" -le 5 ]; then echo "[$name] skipped: no time left" | tee "$OUT/$name.log"; return 124; fi
  echo "[$name] (timeout ${limit}s) $*"
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $(( $(date +%s) - t0 ))}" >>"$OUT/steps.jsonl"
  tail -n 25 "$OUT/$name.log"
  return $rc
}
: >"$OUT/steps.jsonl"
"$PY" -c "import jax; print('jax', jax.__version__, jax.devices())" | tee "$OUT/devices.txt"

if [ $DRY = 1 ]; then
  step correctness 240 "$PY" benchmarks/accelerator_check.py --dry-run --out "$OUT"; rc=$?
else
  step correctness 240 "$PY" benchmarks/accelerator_check.py --out "$OUT"; rc=$?
fi
[ $rc = 2 ] && STATUS=2
[ $rc != 0 ] && [ $rc != 2 ] && STATUS=1

if [ $DRY = 1 ]; then
  step train_vmap $(( $(left) < 150 ? $(left) : 150 )) "$PY" benchmarks/train_vmap.py --random --epochs 1 --no-warm
else
  step train_vmap $(( $(left) < 150 ? $(left) : 150 )) "$PY" benchmarks/train_vmap.py --epochs 10
fi
[ $? != 0 ] && [ $STATUS = 0 ] && STATUS=1

step encoder_tune $(( $(left) < 90 ? $(left) : 90 )) "$PY" benchmarks/encoder_tune.py --repeat $([ $DRY = 1 ] && echo 1 || echo 3)
[ $? != 0 ] && [ $STATUS = 0 ] && STATUS=1
if [ $DRY = 1 ]; then
  step tune_vmap $(( $(left) < 90 ? $(left) : 90 )) "$PY" benchmarks/tune_vmap.py --seeds 1 --folds 2 --steps 1
else
  step tune_vmap $(( $(left) < 90 ? $(left) : 90 )) "$PY" benchmarks/tune_vmap.py --seeds 3 --folds 5 --steps 5
fi
[ $? != 0 ] && [ $STATUS = 0 ] && STATUS=1
step cross_encoder $(( $(left) < 90 ? $(left) : 90 )) "$PY" benchmarks/cross_encoder.py --pairs $([ $DRY = 1 ] && echo 32 || echo 256) --steps $([ $DRY = 1 ] && echo 1 || echo 3)
[ $? != 0 ] && [ $STATUS = 0 ] && STATUS=1

BENCH=ultratool; [ $DRY = 1 ] && BENCH=demo
TIMER=(); command -v /usr/bin/time >/dev/null && TIMER=(/usr/bin/time -v)
step sweep $(( $(left) - 5 )) "${TIMER[@]}" "$PY" -m riskrank_jax.sweep --benchmark $BENCH --force \
  --out "$OUT/sweep" --checkpoint-dir "$OUT/checkpoints" --no-bench
[ $? != 0 ] && [ $STATUS = 0 ] && STATUS=1
grep -E "Maximum resident set size|Elapsed \(wall" "$OUT/sweep.log" 2>/dev/null | tee "$OUT/sweep_resources.txt"
echo "total $(( $(date +%s) - START )) s, status $STATUS; figures in $OUT"
exit $STATUS
