# Session 4 of 2026-12-01, call 3, on one H200 (16 CPUs), after the fixes of this session (builds made in ModelNew's
# __init__ happen in the build ahead, on the meta device; the clock check allows 15% of the per-call overhead; an
# interrupt stops evaluations in flight after 10 s; tests/legit/gemm_div_sum.py sums in float64). First the
# legitimate kernels that call 1 rejected, with the 6.4 GB-task ones beside them; then the CUDA-L1 A100 audit,
# resumed from call 2 (carried: out/cudal1_a100_audit), then the audit table.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
ts() { python -u -c 'import sys,time
t=time.time()
for l in sys.stdin: print(f"{time.time()-t:6.1f} {l}", end="", flush=True)'; }
CUDAL1_LEGIT_ONLY=sigmoid,modelnew_subclass_kernel,gemm_div_sum,tanh,relu,cudnn_tf32_default \
  timeout -k 5 140 python -m pytest -v -s -rA -p no:cacheprovider -m gpu tests/test_bench_gpu.py -k legit_kernel 2>&1 | ts > $OUT/r/legit_rerun.log
echo "legit rc=$?"
grep -E "passed|failed" $OUT/r/legit_rerun.log | tail -1
timeout -k 15 ${1:-390} python evaluate.py --kernels=.kb/cudal1_release/a100.json --baselines=eager --screen_degenerate=False \
    --eval_dir=out/cudal1_a100_audit 2>&1 | ts > $OUT/r/audit_eval.log
echo "audit rc=$?"
timeout 20 python scripts/audit_cudal1.py --eval_dir=out/cudal1_a100_audit --kernels=.kb/cudal1_release/a100.json > $OUT/r/audit.txt 2>&1
tail -2 $OUT/r/audit.txt; grep -c "kernels:" $OUT/r/audit_eval.log; tail -3 $OUT/r/audit_eval.log | cut -c1-250
tar czf $OUT/r/audit.tgz out/cudal1_a100_audit
