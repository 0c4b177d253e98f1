# Session 4 of 2026-12-01, call 1, on one H200 (16 CPUs): the whole GPU suite of bench (issue 11: hack suite old and
# new kinds, legitimate suite, CUDA-L1 samples; issue 12: the hung kernel), after session 3's last fixes (the
# reference timed in a fresh runner of its own; 200 us spin). Each output line carries seconds since the start.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
ts() { python -u -c 'import sys,time
t=time.time()
for l in sys.stdin: print(f"{time.time()-t:6.1f} {l}", end="", flush=True)'; }
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv -l 10 > $OUT/r/smi.csv 2>&1 &
smi=$!
timeout -k 10 555 python -m pytest -v -s -rA --durations=25 -p no:cacheprovider -m gpu tests/test_bench_gpu.py 2>&1 | ts > $OUT/r/gpu_suite.log
echo "suite rc=$?"
kill $smi
grep -E "passed|failed" $OUT/r/gpu_suite.log | tail -1; grep -E "(FAILED|ERROR)" $OUT/r/gpu_suite.log | cut -c1-250 | head -30
