# Call 1 (2026-12-01): first run of the split evaluator on one H200 (16 CPUs): the Swish GPU tests (IPC, clocks, a
# kernel that never returns, side stream, poison), the timing-accuracy table and the 64-candidate throughput.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), torch.cuda.device_count())"
timeout 260 python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "fused or half or illegal or side or empty or hung or ipc" > $OUT/r/swish.log 2>&1; echo "swish rc=$?"
tail -4 $OUT/r/swish.log
timeout 150 python scripts/timing_accuracy.py --out $OUT/r/timing_accuracy.json > $OUT/r/timing.log 2>&1; echo "timing rc=$?"
tail -14 $OUT/r/timing.log
timeout 140 python scripts/bench_throughput.py --n 64 --out $OUT/r/throughput.json > $OUT/r/throughput.log 2>&1; echo "throughput rc=$?"
tail -2 $OUT/r/throughput.log
