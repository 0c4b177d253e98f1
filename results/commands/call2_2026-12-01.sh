# Call 2 (2026-12-01): one H200 (16 CPUs). The Swish GPU tests (IPC, clocks, a kernel that never returns, side
# stream, poison), the hack suite (REFERENCE.md §4, §4b, §4c), the legitimate suite (tests/legit, CUDA-L1 samples),
# protocols, degenerate screen, the timing-accuracy table and the 64-candidate throughput.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
timeout 300 python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py > $OUT/r/gpu_suite.log 2>&1; echo "suite rc=$?"
grep -E "passed|failed" $OUT/r/gpu_suite.log | tail -3; grep -E "^(FAILED|ERROR)" $OUT/r/gpu_suite.log | head -30
timeout 60 python scripts/timing_accuracy.py --out $OUT/r/timing_accuracy.json > $OUT/r/timing.log 2>&1; echo "timing rc=$?"
tail -13 $OUT/r/timing.log
timeout 80 python scripts/bench_throughput.py --n 64 --out $OUT/r/throughput.json > $OUT/r/throughput.log 2>&1; echo "throughput rc=$?"
tail -2 $OUT/r/throughput.log
