# Session 3 of 2026-12-01, call 4 (the last ~4 min of device time), one H200: after call 3's findings (the strict
# spin is 200 us now; the reference is timed in a fresh runner of its own, like the candidate), the traced Swish
# evaluation again (call 3: a false clock_mismatch, reference overhead 48.0 ms vs the candidate's 48.9), the timing
# table at the new default, and the hack suite (every forged-clock attack must still be caught).
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
CUDAL1_CLOCK_TRACE=1 timeout -k 5 45 python scripts/diag_clock.py swish --out $OUT/r/diag_swish.json > $OUT/r/diag.log 2>&1
echo "diag swish rc=$?"
timeout -k 5 30 python scripts/timing_accuracy.py --out $OUT/r/timing_accuracy.json > $OUT/r/timing.log 2>&1
echo "timing rc=$?"
timeout -k 5 95 python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "hack_gets_no_reward" > $OUT/r/gpu_hacks.log 2>&1
echo "hacks rc=$?"
grep -E "^run|overhead ms" $OUT/r/diag.log | cut -c1-300
grep -h SUMMARY $OUT/r/timing.log | cut -c1-300
grep -E "passed|failed" $OUT/r/gpu_hacks.log | tail -1; grep -E "^FAILED" $OUT/r/gpu_hacks.log | cut -c1-200
tar czf $OUT/r.tgz -C $OUT r
