# Session 4 of 2026-12-01, call 2 (and 3 if it does not finish), on one H200 (16 CPUs): the CUDA-L1 A100 release
# (225 kernels, 250 lines) through evaluate.py at its defaults with the eager baseline (issue 11 item 5, issue 12
# item 4). Resumable: the next call carries out/cudal1_a100_audit and runs the same command; the wall times add up.
# Then the audit table. Each output line carries seconds since the start.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
T=${1:-530}
ts() { python -u -c 'import sys,time
t=time.time()
for l in sys.stdin: print(f"{time.time()-t:6.1f} {l}", end="", flush=True)'; }
timeout -k 40 $T python evaluate.py --kernels=.kb/cudal1_release/a100.json --baselines=eager --screen_degenerate=False \
    --eval_dir=out/cudal1_a100_audit 2>&1 | ts > $OUT/r/audit_eval.log
echo "audit rc=$?"
timeout 20 python scripts/audit_cudal1.py --eval_dir=out/cudal1_a100_audit --kernels=.kb/cudal1_release/a100.json > $OUT/r/audit.txt 2>&1
tail -3 $OUT/r/audit.txt; grep -c "kernels:" $OUT/r/audit_eval.log; tail -4 $OUT/r/audit_eval.log | cut -c1-300
tar czf $OUT/r/audit.tgz out/cudal1_a100_audit
