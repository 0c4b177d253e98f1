# Session 3 of 2026-12-01, call 3 (the last ~10 min of device time), on nvidia-h200-x2. Stream 0: diagnostics of
# call 2's two timing faults (strict times of short kernels off by tens of us; a false clock_mismatch on the 6.4 GB
# Swish task), the timing table with a 200 us spin, then the rest of the GPU suite (legit kernels, CUDA-L1 samples,
# protocols, degenerate screen) that calls 1-2 did not reach before their time limit. Stream 1: the real-scale RL
# step table (issue 13 item 5), 1.5B first.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
( export CUDA_VISIBLE_DEVICES=0
  timeout -k 5 80 taskset -c 0-15 python scripts/diag_clock.py clock --out $OUT/r/diag_clock.json > $OUT/r/diag.log 2>&1
  echo "diag clock rc=$?"
  CUDAL1_CLOCK_TRACE=1 timeout -k 5 90 taskset -c 0-15 python scripts/diag_clock.py swish --out $OUT/r/diag_swish.json >> $OUT/r/diag.log 2>&1
  echo "diag swish rc=$?"
  CUDAL1_CLOCK_TRACE=1 CUDAL1_JUDGE_TRIM=0 timeout -k 5 90 taskset -c 0-15 python scripts/diag_clock.py swish --out $OUT/r/diag_swish_notrim.json >> $OUT/r/diag.log 2>&1
  echo "diag swish notrim rc=$?"
  CUDAL1_SPIN_US=200 timeout -k 5 40 taskset -c 0-15 python scripts/timing_accuracy.py --out $OUT/r/timing_spin200.json > $OUT/r/timing.log 2>&1
  echo "timing rc=$?"
  timeout -k 5 170 taskset -c 0-15 python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "legit or cudal1 or protocols or degenerate" > $OUT/r/gpu_suite_rest.log 2>&1
  echo "suite rest rc=$?" ) > $OUT/r/s0.txt 2>&1 &
p0=$!
( export CUDA_VISIBLE_DEVICES=1
  timeout -k 10 480 taskset -c 16-31 python scripts/rl_scale.py --models=1.5b,0.5b --out=$OUT/r/rl_scale.jsonl > $OUT/r/rl_scale.log 2>&1
  echo "rl_scale rc=$?" ) > $OUT/r/s1.txt 2>&1 &
p1=$!
wait $p0 $p1
cat $OUT/r/s0.txt $OUT/r/s1.txt
grep -E "KiB spin|^run|overhead ms" $OUT/r/diag.log | cut -c1-300
grep -h SUMMARY $OUT/r/timing.log | cut -c1-300; grep -E "passed|failed" $OUT/r/gpu_suite_rest.log | tail -1
tail -16 $OUT/r/rl_scale.log | cut -c1-250
tar czf $OUT/r.tgz -C $OUT r
