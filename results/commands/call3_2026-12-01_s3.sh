# Session 3 of 2026-12-01, call 3 (the last ~10 min of device time), on one H200 (nvidia-h200, 16 CPUs; the 2-GPU
# kind was no longer lent): diagnostics of call 2's two timing faults (strict times of short kernels off by tens of
# us; a false clock_mismatch on the 6.4 GB Swish task), the timing table with a 200 us spin, then the real-scale RL
# step table (issue 13 item 5) for the 1.5B-class policy only, as far as the time goes.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
timeout -k 5 70 python scripts/diag_clock.py clock --out $OUT/r/diag_clock.json > $OUT/r/diag.log 2>&1
echo "diag clock rc=$?"
CUDAL1_CLOCK_TRACE=1 timeout -k 5 90 python scripts/diag_clock.py swish --out $OUT/r/diag_swish.json >> $OUT/r/diag.log 2>&1
echo "diag swish rc=$?"
CUDAL1_CLOCK_TRACE=1 CUDAL1_JUDGE_TRIM=0 timeout -k 5 90 python scripts/diag_clock.py swish --out $OUT/r/diag_swish_notrim.json >> $OUT/r/diag.log 2>&1
echo "diag swish notrim rc=$?"
CUDAL1_SPIN_US=200 timeout -k 5 40 python scripts/timing_accuracy.py --out $OUT/r/timing_spin200.json > $OUT/r/timing.log 2>&1
echo "timing rc=$?"
timeout -k 10 225 python scripts/rl_scale.py --models=1.5b --micro_batch_sizes=1,8 --out=$OUT/r/rl_scale.jsonl > $OUT/r/rl_scale.log 2>&1
echo "rl_scale rc=$?"
grep -E "KiB spin|^run|overhead ms" $OUT/r/diag.log | cut -c1-300
grep -h SUMMARY $OUT/r/timing.log | cut -c1-300
tail -8 $OUT/r/rl_scale.log | cut -c1-250
tar czf $OUT/r.tgz -C $OUT r
