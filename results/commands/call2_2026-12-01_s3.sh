# Session 3 of 2026-12-01, call 2, on nvidia-h200-x2 (2 H200s, 32 CPUs), after call 1's fixes (the judge returns its
# cached GPU memory between commands: call 1's suite ran the 6 GB elementwise tasks out of memory; strict timing
# busy-waits for `end` before its device-wide synchronise; evaluate.py measures every candidate in one batch; builds
# killed at an interrupt). Two streams, each with one GPU and 16 CPUs of its own (taskset). Stream 0: the GPU suite,
# timing accuracy. Stream 1: the CUDA-L1 A100 audit from scratch (continued in call 3), repeatability, precision.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv -l 10 > $OUT/r/smi.csv 2>&1 &
smi=$!
( export CUDA_VISIBLE_DEVICES=0
  timeout -k 10 470 taskset -c 0-15 python -m pytest -q -s -rA --durations=15 -m gpu tests/test_bench_gpu.py > $OUT/r/gpu_suite.log 2>&1
  echo "suite rc=$?"
  timeout -k 5 45 taskset -c 0-15 python scripts/timing_accuracy.py --out $OUT/r/timing_accuracy.json > $OUT/r/timing.log 2>&1
  echo "timing rc=$?" ) > $OUT/r/s0.txt 2>&1 &
p0=$!
( export CUDA_VISIBLE_DEVICES=1
  timeout -k 20 340 taskset -c 16-31 python evaluate.py --kernels=.kb/cudal1_release/a100.json --baselines=eager --screen_degenerate=False \
      --eval_dir=results/cudal1_a100_audit > $OUT/r/audit_eval.log 2>&1
  echo "audit rc=$?"
  timeout -k 5 48 taskset -c 16-31 python scripts/bench_repeat.py --out $OUT/r/repeat.json > $OUT/r/repeat.log 2>&1
  echo "repeat rc=$?"
  timeout -k 5 120 taskset -c 16-31 python scripts/precision_calibration.py --device=cuda \
      --sample=.kb/cudal1_sample/a100_sample.jsonl --out $OUT/r/precision.md > $OUT/r/precision.log 2>&1
  echo "precision rc=$?" ) > $OUT/r/s1.txt 2>&1 &
p1=$!
wait $p0 $p1
kill $smi
cat $OUT/r/s0.txt $OUT/r/s1.txt
grep -E "passed|failed" $OUT/r/gpu_suite.log | tail -1; grep -E "^(FAILED|ERROR)" $OUT/r/gpu_suite.log | cut -c1-200 | head -20
grep -h SUMMARY $OUT/r/*.log | cut -c1-400; grep -c "kernels:" $OUT/r/audit_eval.log
tar czf $OUT/r/audit.tgz results/cudal1_a100_audit 2>/dev/null
tar czf $OUT/r.tgz -C $OUT r
