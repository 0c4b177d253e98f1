# Call 3 (2026-12-01): the GPU suite again after call 2's fixes (checksum in bounded chunks: call 2's 48 GiB
# temporaries ran the GPU out of memory; spin re-sized to working clocks; conv tasks allowed cuDNN's TF32), then the
# timing-accuracy table. One H200, 16 CPUs.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
timeout 345 python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py > $OUT/r/gpu_suite.log 2>&1; echo "suite rc=$?"
grep -E "passed|failed" $OUT/r/gpu_suite.log | tail -2; grep -E "^(FAILED|ERROR)" $OUT/r/gpu_suite.log | cut -c1-200 | head -30
timeout 50 python scripts/timing_accuracy.py --out $OUT/r/timing_accuracy.json > $OUT/r/timing.log 2>&1; echo "timing rc=$?"
tail -12 $OUT/r/timing.log | cut -c1-400
