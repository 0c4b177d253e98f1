# The GPU measurements still owed by issues 11-14 (not yet run: the session of 2026-12-01 afternoon had 70 s of
# device time). Three calls of <= 10 min on one H200 (16 CPUs), each from the repository root with KernelBench and
# the CUDA-L1 files copied into .kb/ (carry .kb): KERNELBENCH_DIR=$PWD/.kb/kernelbench
# CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample. Every step has its own timeout that leaves time for the final tar.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
case "$1" in
A)  # issue 11 + 12: the GPU suite (hacks, legit, CUDA-L1 samples, hung kernel, IPC), short-kernel accuracy,
    # repeatability, precision calibration
    timeout 330 python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py > $OUT/r/gpu_suite.log 2>&1
    timeout 60 python scripts/timing_accuracy.py --out $OUT/r/timing_accuracy.json > $OUT/r/timing.log 2>&1
    timeout 90 python scripts/bench_repeat.py --out $OUT/r/repeat.json > $OUT/r/repeat.log 2>&1
    timeout 90 python scripts/precision_calibration.py --sample=.kb/cudal1_sample/a100_sample.jsonl --out $OUT/r/precision.md > $OUT/r/precision.log 2>&1
    ;;
B)  # issue 11: the CUDA-L1 A100 release audit (resumable: run B again to continue); issue 12: throughput
    timeout 420 python evaluate.py --kernels=.kb/cudal1_release/a100.json --baselines=eager \
        --eval_dir=results/cudal1_a100_audit > $OUT/r/audit_eval.log 2>&1
    python scripts/audit_cudal1.py --eval_dir=results/cudal1_a100_audit --kernels=.kb/cudal1_release/a100.json \
        > $OUT/r/audit.md 2>&1
    timeout 120 python scripts/bench_throughput.py --n 64 --out $OUT/r/throughput.json > $OUT/r/throughput.log 2>&1
    tar czf $OUT/r/audit.tgz results/cudal1_a100_audit
    ;;
C)  # issue 14: the main command on the GPU (tiny preset, wall time); issue 13: real-scale memory/time table
    /usr/bin/time -v timeout 420 python rl.py --preset=demo > $OUT/r/demo.log 2>&1
    timeout 120 python scripts/rl_scale.py --out=$OUT/r/rl_scale.jsonl > $OUT/r/rl_scale.log 2>&1
    tar czf $OUT/r/demo.tgz out/tiny/rl/log.jsonl out/tiny/rl/curves.png out/tiny/eval/summary.md
    ;;
esac
tar czf $OUT/r.tgz -C $OUT r
